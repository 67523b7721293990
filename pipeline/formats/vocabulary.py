"""`schemas/vocabulary.json`: every key a reference carries, with the unit (and bandwidth direction) its
value is stored in. A spec is a tagged union on `type`: a quantity must name its unit."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from .common import Direction, FieldKey, FieldType, FormFactor, Strict


class FieldSpec(Strict):
    """One vocabulary key (the common shape; the file holds one of the three forms below)."""

    type: FieldType
    unit: str | None = None
    direction: Direction | None = None
    applies_to: list[FormFactor] = Field(min_length=1)
    description: str
    minimum: float | None = Field(
        default=None,
        description="The smallest value the field may take (0 for a bandwidth, a memory, a power: a formula "
        "or a claim giving less is refused); counts are always whole and non-negative.",
    )

    @property
    def stored_unit(self) -> str | None:
        return "count" if self.type == "count" else self.unit


class QuantitySpec(FieldSpec):
    """A number with a unit (bandwidths also with the direction they are stored in)."""

    model_config = ConfigDict(title="quantity")
    type: Literal["quantity"]
    unit: str = Field(min_length=1)


class CountSpec(FieldSpec):
    """A whole number of things."""

    model_config = ConfigDict(title="count")
    type: Literal["count"]


class TextSpec(FieldSpec):
    """Text, e.g. a model name."""

    model_config = ConfigDict(title="text")
    type: Literal["text"]


Spec = Annotated[QuantitySpec | CountSpec | TextSpec, Field(discriminator="type")]


class Vocabulary(Strict):
    """The field vocabulary."""

    description: str | None = None
    fields: dict[FieldKey, Spec]
