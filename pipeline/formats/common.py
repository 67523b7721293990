"""Building blocks shared by every format: a strict base model, constrained strings, and the schema writer."""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema

if TYPE_CHECKING:
    from pydantic import TypeAdapter

SLUG_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$(?!\n)"
KEY_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$(?!\n)"
NAME_PATTERN = r"^[a-z][a-z0-9_]*$(?!\n)"
SHA256_PATTERN = r"^[0-9a-f]{64}$(?!\n)"
DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$(?!\n)"
CITE_PATTERN = r"^[a-z0-9-]+#[a-z0-9-]+$(?!\n)"
# A title is one line with something visible on it: no line separators, no invisible format characters (Unicode
# Cf, with which two titles that look the same differ), no character reference decoding to one (`&#10;`).
FORMAT_CHARS = (
    r"\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    r"\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    r"\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_NOT_IN_TITLE = rf"\t\n\r\u2028\u2029{FORMAT_CHARS}"
# Letters that draw nothing (Hangul fillers, the blank braille pattern, the combining grapheme joiner): a title
# may hold them, but only beside something visible.
_BLANK = r"\u034f\u115f\u1160\u2800\u3164\uffa0"
TITLE_PATTERN = rf"^(?!.*&#)[^{_NOT_IN_TITLE}]*[^\s{FORMAT_CHARS}{_BLANK}][^{_NOT_IN_TITLE}]*$(?!\n)"
_TITLE_RE = re.compile(TITLE_PATTERN)


def _decoded_title(value: str) -> str:
    """A title read as a page reads it: a named character reference (`&Tab;`, `&shy`) must decode to what a title
    may hold."""
    decoded = html.unescape(value)
    if decoded != value and not _TITLE_RE.search(decoded):
        raise ValueError(
            "holds a character reference that decodes to a tab, a newline, an invisible character or only spaces "
            f"({decoded!r}); write the text itself"
        )
    return value


# What each pattern asks for, in words: an error names this instead of the regular expression.
PATTERN_WORDS = {
    SLUG_PATTERN: "lowercase letters, digits and single hyphens (like `nvidia-dgx-h100`)",
    KEY_PATTERN: "a dotted key of lowercase names (like `accelerator.count`)",
    NAME_PATTERN: "a lowercase name of letters, digits and underscores",
    SHA256_PATTERN: "64 lowercase hexadecimal digits (a SHA-256)",
    DATE_PATTERN: "a date YYYY-MM-DD",
    CITE_PATTERN: "source-id#rule-id",
    TITLE_PATTERN: (
        "one line of visible text: no tab or newline, no invisible format character (zero-width space, "
        "bidirectional mark, BOM), no numeric character reference such as `&#10;`"
    ),
}

SLUG_MAX_LENGTH = 80
Slug = Annotated[
    str,
    Field(
        pattern=SLUG_PATTERN,
        min_length=1,
        max_length=SLUG_MAX_LENGTH,
        description="Lowercase letters, digits and single hyphens: becomes part of paths.",
    ),
]
Title = Annotated[
    str,
    AfterValidator(_decoded_title),
    Field(
        min_length=3,
        max_length=200,
        pattern=TITLE_PATTERN,
        description=(
            "One line of text, not only spaces (no tab or newline; no control or invisible format characters, "
            "also not as character references)."
        ),
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
    """Unknown keys are refused and nothing is coerced, so the model accepts exactly what its schema accepts."""

    # Python's engine, so the patterns' `$(?!\n)` is read as in the JSON Schema: `$` alone would let a value
    # with a trailing newline ("a-rule\n") through jsonschema (Python `re`), and Rust's engine has no look-ahead.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, regex_engine="python-re")


class _Generator(GenerateJsonSchema):
    """pydantic's generator without a title on every property, and with pattern-keyed maps closed."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def dict_schema(self, schema: Any) -> Any:
        """A map whose keys follow a pattern refuses every other key, as pydantic does."""
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
