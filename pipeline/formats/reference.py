"""`models/references/<id>.yaml`: which fields a reference takes from which sources, derived fields with
formulas, explicit unknowns, and the labelled design choices (parameters) and assumptions of the model."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from .common import CITE_PATTERN, NAME_PATTERN, Direction, FieldKey, FormFactor, Slug, Strict, Title

CiteId = Annotated[str, Field(pattern=CITE_PATTERN, description="source-id#rule-id")]
ParamName = Annotated[str, Field(pattern=NAME_PATTERN)]


class Parameter(Strict):
    """A design choice of an illustrative model: not a vendor fact."""

    value: float
    unit: str
    direction: Direction | None = None
    why: str = Field(min_length=5)


class Assumption(Strict):
    """A value the topology uses where the registry field is unknown: declared and labelled, never presented
    as a vendor fact."""

    value: float
    unit: str
    direction: Direction | None = None
    why: str = Field(min_length=10)


class Cite(Strict):
    """A field stated by one or more documents (claims `source#rule`)."""

    model_config = ConfigDict(title="cite", json_schema_extra={"dependentRequired": {"take": ["why"]}})
    cite: list[CiteId] = Field(min_length=1, json_schema_extra={"uniqueItems": True})
    take: CiteId | None = Field(
        default=None,
        description="The claim taken when the cited documents disagree and the declared rule cannot decide (the "
        "most specific product's document; among those, the latest: README, Evidence policy). Where the rule "
        "decides, a take: must agree with it.",
    )
    why: str | None = Field(default=None, min_length=10)
    reads: FieldKey | None = Field(
        default=None,
        description="The vocabulary key the cited claims state, when it differs from this field (e.g. a "
        "cluster's building-block accelerators read from a server's accelerator.count).",
    )
    check_formula: str | None = Field(
        default=None,
        min_length=1,
        description="The same figure derived from other fields (the safe formula language), where the registry "
        "could derive what a document states: the stated figure stays the value and compile records whether the "
        "derivation agrees with it within the digits each carries; views show a disagreement.",
    )
    note: str | None = None

    @field_validator("cite")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("has non-unique elements")
        return value

    @model_validator(mode="after")
    def _take_needs_why(self) -> Cite:
        if self.take is not None and self.why is None:
            raise ValueError("'why' is a dependency of 'take'")
        return self


class Formula(Strict):
    """A field derived from other fields (and `param.` parameters) with the safe formula language."""

    model_config = ConfigDict(title="formula")
    formula: str = Field(min_length=1)
    note: str | None = None


class Unknown(Strict):
    """A field no source states: why, and what evidence would settle it."""

    model_config = ConfigDict(title="unknown")
    unknown: str = Field(min_length=10, description="Why no value is given.")
    evidence_needed: str | None = None


def _field_form(value: Any) -> str | None:
    if isinstance(value, dict):
        return next((k for k in ("cite", "formula", "unknown") if k in value), None)
    return {Cite: "cite", Formula: "formula", Unknown: "unknown"}.get(type(value))


FieldDecl = Annotated[
    Annotated[Cite, Tag("cite")] | Annotated[Formula, Tag("formula")] | Annotated[Unknown, Tag("unknown")],
    Discriminator(
        _field_form, custom_error_type="field_form", custom_error_message="expected one of cite, formula, unknown"
    ),
]


class ReferenceFile(Strict):
    """A reference architecture: which fields it takes from which sources, derived fields, explicit unknowns."""

    id: Slug
    kind: Literal["vendor", "illustrative"] = Field(
        description="An illustrative model is a teaching example, never a vendor reference."
    )
    title: Title
    form_factor: FormFactor
    summary: str = ""
    parameters: dict[ParamName, Parameter] = Field(
        default_factory=dict, description="Design choices of an illustrative model: not vendor facts."
    )
    fields: dict[FieldKey, FieldDecl]
    assumptions: dict[FieldKey, Assumption] = Field(
        default_factory=dict,
        description="Values the topology uses where the registry field is unknown: declared, labelled, "
        "never presented as vendor facts.",
    )
