"""Building blocks shared by every format: a strict base model, constrained strings, and the schema writer.

The pydantic models in this package are the one source of truth for every declarative file and record;
`schemas/*.json` are generated from them (`python -m fabricref.core.generate`), so the two can never drift.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema

if TYPE_CHECKING:
    from pydantic import TypeAdapter

SLUG_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$(?!\n)"
KEY_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$(?!\n)"
NAME_PATTERN = r"^[a-z][a-z0-9_]*$(?!\n)"
SHA256_PATTERN = r"^[0-9a-f]{64}$(?!\n)"
DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$(?!\n)"
CITE_PATTERN = r"^[a-z0-9-]+#[a-z0-9-]+$(?!\n)"
# One line with something visible on it: a title is shown in tables, headings and drawings, and is permanent.
# U+2028 / U+2029 (line and paragraph separators) end a line as a newline does.
TITLE_PATTERN = r"^[^\t\n\r\u2028\u2029]*\S[^\t\n\r\u2028\u2029]*$(?!\n)"

Slug = Annotated[
    str,
    Field(
        pattern=SLUG_PATTERN,
        min_length=1,
        max_length=80,
        description="Lowercase letters, digits and single hyphens: becomes part of paths.",
    ),
]
Title = Annotated[
    str,
    Field(
        min_length=3,
        max_length=200,
        pattern=TITLE_PATTERN,
        description="One line of text, not only spaces (no tab or newline; no control characters).",
    ),
]
FieldKey = Annotated[str, Field(pattern=KEY_PATTERN, description="A key of schemas/vocabulary.json.")]
Sha256 = Annotated[str, Field(pattern=SHA256_PATTERN)]
Day = Annotated[str, Field(pattern=DATE_PATTERN, description="A calendar date, YYYY-MM-DD.")]
Direction = Literal["per_direction", "bidirectional"]
FieldType = Literal["quantity", "count", "text"]
FormFactor = Literal["server", "rack", "cluster", "switch", "nic"]
Dtype = Literal["fp32", "bf16", "fp16", "fp8"]


class Strict(BaseModel):
    """Unknown keys are refused (a misspelt key is an error, never silently ignored) and nothing is coerced
    (the string "8" is not the number 8), so the model accepts exactly what its generated schema accepts."""

    # Python's engine, so the patterns' `$(?!\n)` is read as in the JSON Schema: `$` alone would let a value
    # with a trailing newline ("a-rule\n") through jsonschema (Python `re`), and Rust's engine has no look-ahead.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, regex_engine="python-re")


class _Generator(GenerateJsonSchema):
    """pydantic's generator without a title on every property (noise in a schema people read), and with
    pattern-keyed maps closed."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def dict_schema(self, schema: Any) -> Any:
        """A map whose keys follow a pattern refuses every other key, as pydantic does (`patternProperties`
        alone would let them through)."""
        out = super().dict_schema(schema)
        patterns = out.pop("patternProperties", None)
        if patterns:
            ((pattern, values),) = patterns.items()
            out["propertyNames"] = {"pattern": pattern}
            out["additionalProperties"] = values
        return out


def json_schema(adapter: TypeAdapter[Any], name: str, title: str) -> dict[str, Any]:
    """The JSON Schema of one format's validator, with its `$id` and title; keys sorted when written."""
    body = adapter.json_schema(schema_generator=_Generator)
    body.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://fabricref.example/schemas/{name}",
        "title": title,
        **body,
    }
