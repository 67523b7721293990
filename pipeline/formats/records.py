"""Field records: what one rule read from one snapshot (`claim`, extract stage) and a reference's field as
compiled (`field`, compile stage). The status is a promise the model keeps: a published or preliminary field
carries provenance, a derived field its formula and inputs, an unknown field a reason and no value."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from .common import CITE_PATTERN, Direction, FieldKey, Sha256, Slug, Strict

Confidence = Literal["published", "preliminary", "assumed", "unknown"]
NonEmpty = Annotated[str, Field(min_length=1)]


class Provenance(Strict):
    """Where a stated fact comes from, down to the snapshot's SHA-256 and the text matched."""

    source_id: NonEmpty
    rule_id: NonEmpty
    revision: int = Field(ge=1)
    sha256: Sha256
    retrieved_at: str = Field(min_length=10)
    url: str | None = Field(min_length=8, description="The canonical URL; null for a design statement with none.")
    snapshot_path: NonEmpty
    locator: NonEmpty
    excerpt: NonEmpty
    origin: Literal["retrieved", "transcription"]
    stated: str | None = None
    carried_from_revision: int | None = None


class Claim(Strict):
    """What one rule read from one snapshot, in the vocabulary's unit."""

    model_config = ConfigDict(title="claim")
    record: Literal["claim"]
    source_id: str
    rule_id: str
    field: str
    subject: str
    value_number: float | None
    value_text: NonEmpty
    unit: str | None
    direction: Direction | None
    status: Literal["published", "preliminary"]
    provenance: Provenance


Digits = Annotated[
    int,
    Field(
        ge=1,
        le=15,
        description="Significant digits the value carries: as many as the document states (a stated figure), the "
        "fewest among the inputs that are not exact (a derived one). Views print the value to these digits.",
    ),
]


class CitedClaim(Strict):
    """One cited document's claim as the field weighs it, kept whether or not it gives the value: what it states
    (in the field's unit), how precisely, when the document was published, what kind of evidence it is, and
    whether it agrees with the field's value. A field whose claims disagree keeps every one (a conflict)."""

    cite: str = Field(pattern=CITE_PATTERN)
    value_number: float | None
    value_text: NonEmpty
    unit: str | None
    direction: Direction | None
    status: Literal["published", "preliminary"]
    digits: Digits | None = None
    published_on: str | None = None
    publisher_kind: NonEmpty
    read_via: str | None = None
    scope: Literal["product", "family"] = "product"
    agrees: bool = Field(description="Agrees with the field's value within the digits each states.")


class Check(Strict):
    """A stated field's figure derived again from other fields (`check_formula`): the stated figure stays the
    value; the derivation is recorded with its precision and whether it agrees within the digits each carries."""

    formula: NonEmpty
    inputs: list[str] = Field(min_length=1)
    value_number: float
    unit: str | None
    direction: Direction | None
    digits: Digits | None = None
    agrees: bool


class _FieldBase(Strict):
    record: Literal["field"]
    reference_id: Slug
    field: FieldKey
    unit: str | None
    direction: Direction | None
    confidence: Confidence = Field(
        description="The weakest footing among the records this one rests on: a derived field is as strong as "
        "its weakest input; a design choice of an illustrative model is 'assumed'."
    )


class StatedField(_FieldBase):
    """A field a document states: at least one provenance, a value as the document wrote it."""

    model_config = ConfigDict(title="published or preliminary")
    status: Literal["published", "preliminary"]
    value_number: float | None
    value_text: NonEmpty
    provenance: list[Provenance] = Field(min_length=1)
    chosen: str | None = Field(default=None, description="source#rule taken when cited documents disagree.")
    choice_reason: str | None = None
    digits: Digits | None = None
    claims: list[CitedClaim] = Field(default_factory=list)
    conflict: bool = Field(
        default=False, description="The cited documents disagree beyond the digits they state; every claim is kept."
    )
    resolved_by: Literal["rule", "take"] | None = Field(
        default=None,
        description="How a conflict was resolved: by the declared rule (the most specific product's document; "
        "among those, the latest), or by the model's take: where the rule cannot decide.",
    )
    check: Check | None = None


class DerivedField(_FieldBase):
    """A field computed by a formula from other fields (and parameters)."""

    model_config = ConfigDict(title="derived")
    status: Literal["derived"]
    value_number: float
    value_text: str | None
    formula: NonEmpty
    inputs: list[str] = Field(min_length=1)
    provenance: list[Provenance] = Field(default_factory=list)
    digits: Digits | None = None


class UnknownField(_FieldBase):
    """A field no source states: no value, a reason, and what evidence would settle it."""

    model_config = ConfigDict(title="unknown")
    status: Literal["unknown"]
    value_number: Literal[None]
    value_text: Literal[None]
    reason: str = Field(min_length=10)
    evidence_needed: str | None = None
    provenance: list[Provenance] = Field(default_factory=list, max_length=0)


FieldRecord = Annotated[StatedField | DerivedField | UnknownField, Field(discriminator="status")]
Record = Annotated[Claim | FieldRecord, Field(discriminator="record")]
