"""Append-only revision histories: of one source (`sources/pins/<id>.json`) and of one reference or cluster model
(`models/revisions/<kind>/<id>.json`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..errors import ValidationError
from .common import Day, Sha256, Slug, Strict

Origin = Literal["retrieved", "transcription"]


class Revision(Strict):
    revision: int = Field(ge=1)
    retrieved_at: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$(?!\n)", description="UTC, RFC 3339.")
    sha256: Sha256
    size: int = Field(ge=0)
    media_type: str
    url: str | None = Field(description="The source's canonical URL; null for a design statement that has none.")
    final_url: str | None = Field(description="Where the bytes came from after redirects; null when `url` is.")
    etag: str | None = None
    last_modified: str | None = None
    origin: Origin
    note: str | None = None


class PinHistory(Strict):
    """Append-only revision history of one source."""

    source_id: Slug
    revisions: list[Revision] = Field(min_length=1)

    @property
    def current(self) -> Revision:
        return self.revisions[-1]

    def get(self, number: int) -> Revision:
        for rev in self.revisions:
            if rev.revision == number:
                return rev
        raise ValidationError(
            f"source {self.source_id} has no revision {number}: "
            f"it has {', '.join(str(r.revision) for r in self.revisions)}"
        )


class ModelRevision(Strict):
    revision: int = Field(ge=1)
    sha256: Sha256
    changed_on: Day


class ModelRevisions(Strict):
    """Append-only revisions of one reference or cluster model."""

    model: str = Field(pattern=r"^(references|clusters)/[a-z0-9]+(?:-[a-z0-9]+)*$(?!\n)")
    revisions: list[ModelRevision] = Field(min_length=1)
