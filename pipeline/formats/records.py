"""Field records: what one rule read from one snapshot (`claim`, extract stage) and a reference's field as
compiled (`field`, compile stage). The status is a promise the model keeps: a published or preliminary field
carries provenance, a derived field its formula and inputs, an unknown field a reason and no value."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from .common import Direction, FieldKey, Sha256, Slug, Strict

Confidence = Literal["published", "preliminary", "assumed", "unknown"]
NonEmpty = Annotated[str, Field(min_length=1)]


class Provenance(Strict):
    """Where a stated fact comes from, down to the snapshot's SHA-256 and the text matched."""

    source_id: NonEmpty
    rule_id: NonEmpty
    revision: int = Field(ge=1)
    sha256: Sha256
    retrieved_at: str = Field(min_length=10)
    url: str = Field(min_length=8)
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


class DerivedField(_FieldBase):
    """A field computed by a formula from other fields (and parameters)."""

    model_config = ConfigDict(title="derived")
    status: Literal["derived"]
    value_number: float
    value_text: str | None
    formula: NonEmpty
    inputs: list[str] = Field(min_length=1)
    provenance: list[Provenance] = Field(default_factory=list)


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
