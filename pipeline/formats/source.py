"""`sources/<id>.yaml`: one declared document and the rules that read facts from it."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from .common import FieldKey, FieldType, Slug, Strict, Title

Status = Literal["published", "preliminary"]
DocumentType = Literal[
    "datasheet",
    "user-guide",
    "product-page",
    "reference-architecture",
    "technical-blog",
    "announcement",
    "press-coverage",
    "paper",
    "manual",
    "commit",
    "design-statement",
]
PublisherKind = Literal[
    "vendor-document",
    "vendor-press-release",
    "press",
    "reseller",
    "measured",
    "maintainer-statement",
    "design-statement",
]
NonEmpty = Annotated[str, Field(min_length=1)]
# A publication date to the precision known: a day, a month or a year ("2026-08-24", "2026-06", "2022").
PUBLISHED_ON_PATTERN = r"^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?$(?!\n)"
Scope = Literal["product", "family"]


class _SelectBase(Strict):
    within: NonEmpty | None = Field(default=None, description="CSS selector of the element to search in.")
    expect: Literal["one", "first"] = "one"

    def describe(self) -> str:
        scope = f" within {self.within!r}" if self.within else ""
        css, row = getattr(self, "css", None), getattr(self, "row", None)
        return f"css {css!r}{scope}" if css else f"table row {row!r}{scope}"


class CssSelect(_SelectBase):
    """The value is the text of the element a CSS selector matches."""

    model_config = ConfigDict(title="css")
    css: NonEmpty
    row: None = None


class RowSelect(_SelectBase):
    """The value is the last cell of the table row whose first cell (th or td) has this text."""

    model_config = ConfigDict(title="row")
    row: NonEmpty
    css: None = None


def _select_form(value: Any) -> str | None:
    if isinstance(value, dict):
        return "css" if value.get("css") is not None else "row" if value.get("row") is not None else None
    return "css" if isinstance(value, CssSelect) else "row" if isinstance(value, RowSelect) else None


Select = Annotated[
    Annotated[CssSelect, Tag("css")] | Annotated[RowSelect, Tag("row")],
    Discriminator(_select_form, custom_error_type="select", custom_error_message="expected css or row"),
]


class Parse(Strict):
    type: FieldType
    pattern: NonEmpty | None = Field(
        default=None, description="A regular expression with a named group 'value' (and optionally 'unit')."
    )
    unit: NonEmpty | None = Field(
        default=None, description="The unit when the text states it outside the matched value (e.g. '400G' → Gb/s)."
    )
    direction: Literal["per_direction", "bidirectional"] | None = Field(
        default=None, description="Required for bandwidths: what the document states."
    )


class Rule(Strict):
    id: Slug
    field: FieldKey
    subject: str = Field(min_length=2, description="The product the fact is about, in the document's words.")
    select: Select
    parse: Parse
    status: Status | None = Field(default=None, description="Overrides the source's status for this fact.")
    scope: Scope = Field(
        default="product",
        description="How specifically the document states the fact: for the product named in `subject` ('product'), "
        "or for a family, generation or platform it belongs to, or naming only the family ('family'). When cited "
        "documents disagree, a product's own statement outranks a family's (README, Evidence policy: conflicts).",
    )
    on_no_match: Literal["fail", "keep-previous"] = "fail"
    preliminary_when: NonEmpty | None = Field(
        default=None,
        description="A regular expression: when the matched text contains it (e.g. 'expected|up to|planned'), "
        "the fact is preliminary.",
    )
    note: str | None = None


class SourceFile(Strict):
    """A declared source document and the rules that read facts from it."""

    id: Slug
    url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/$.?#][^\s]*$(?!\n)",
        description="The publisher's canonical URL of the document (never a mirror's, a private or a personal host). "
        "Required, except for a design statement that was never published at an address: it has none, and is "
        "identified by its id and its pinned transcription's SHA-256.",
    )
    publisher: str = Field(
        min_length=2, description="Who published it (the vendor, or the press outlet that relayed an announcement)."
    )
    publisher_kind: PublisherKind = Field(
        description="What kind of evidence the document is: the vendor's own document or press release, press "
        "coverage, a reseller's page, a measurement, a maintainer's statement, or a design statement (a deployment "
        "design selected on someone's word, not a vendor document). Only vendor kinds may make a field published "
        "(README, Evidence policy)."
    )
    title: Title
    document_type: DocumentType
    media_type: str = Field(pattern=r"^[a-z]+/[a-z0-9.+-]+$(?!\n)", description="Expected media type, e.g. text/html.")
    status: Status = Field(
        description="What a fact from this document is: shipping product documentation is published; "
        "an announcement is preliminary."
    )
    published_on: str | None = Field(
        default=None,
        pattern=PUBLISHED_ON_PATTERN,
        description="When the document was published (or its revision dated), to the precision known: YYYY-MM-DD, "
        "YYYY-MM or YYYY. When cited documents disagree, the latest of the most specific ones gives the value; "
        "without a date compile cannot apply that rule and asks the model to name the claim it takes.",
    )
    read_on: str | None = Field(
        default=None, pattern=r"^\d{4}-\d{2}-\d{2}$(?!\n)", description="When the facts were read (for transcriptions)."
    )
    read_via: str | None = Field(
        default=None,
        min_length=3,
        description="Where the document was read from a copy rather than from `url` itself, how, in general words "
        "(e.g. 'a stored copy of the article'); `url` stays the publisher's canonical address. No URLs here.",
    )
    notes: str | None = None
    rules: list[Rule] = Field(min_length=1)

    @model_validator(mode="after")
    def _url_unless_unpublished_design_statement(self) -> SourceFile:
        # An address is never invented: a statement with no public address says so by having none.
        if self.url is None and self.publisher_kind != "design-statement":
            raise ValueError(
                "url: required: the publisher's canonical URL of the document (only a design statement, "
                "publisher_kind design-statement, may have none)"
            )
        if self.url is None and self.read_via is not None:
            raise ValueError("read_via: a source with no url has no copy to have been read through")
        return self

    @field_validator("read_via")
    @classmethod
    def _no_address(cls, value: str | None) -> str | None:
        # A copy's address is exactly what must not be recorded (it is often private or short-lived).
        if value is not None and re.search(r"[a-z][a-z0-9+.-]*://|www\.", value, re.IGNORECASE):
            raise ValueError("describe the copy in general words; give no address")
        return value
