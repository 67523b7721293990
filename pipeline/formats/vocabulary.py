"""`schemas/vocabulary.json`: every key a reference carries, with the unit (and bandwidth direction) its
value is stored in."""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from .common import Direction, FieldKey, FieldType, FormFactor, Strict


class FieldSpec(Strict):
    model_config = ConfigDict(
        json_schema_extra={"if": {"properties": {"type": {"const": "quantity"}}}, "then": {"required": ["unit"]}}
    )
    type: FieldType
    unit: str | None = None
    direction: Direction | None = None
    applies_to: list[FormFactor] = Field(min_length=1)
    description: str

    @model_validator(mode="after")
    def _quantity_has_unit(self) -> FieldSpec:
        if self.type == "quantity" and self.unit is None:
            raise ValueError("'unit' is a required property of a quantity")
        return self

    @property
    def stored_unit(self) -> str | None:
        return "count" if self.type == "count" else self.unit


class Vocabulary(Strict):
    """The field vocabulary."""

    description: str | None = None
    fields: dict[FieldKey, FieldSpec]
