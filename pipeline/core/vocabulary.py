"""The field vocabulary (`schemas/vocabulary.json`): every key a reference carries, with its unit."""

from __future__ import annotations

from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .schemas import SCHEMAS_DIR, load_json, validate


class FieldSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["quantity", "count", "text"]
    unit: str | None = None
    direction: Literal["per_direction", "bidirectional"] | None = None
    applies_to: tuple[str, ...]
    description: str

    @property
    def stored_unit(self) -> str | None:
        return "count" if self.type == "count" else self.unit


@cache
def vocabulary() -> dict[str, FieldSpec]:
    path = SCHEMAS_DIR / "vocabulary.json"
    data = load_json(path)
    validate(data, "vocabulary.schema.json", path)
    return {key: FieldSpec.model_validate(spec) for key, spec in sorted(data["fields"].items())}
