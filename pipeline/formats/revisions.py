"""`models/revisions/<kind>/<id>.json`: append-only revisions of one reference or cluster model."""

from __future__ import annotations

from pydantic import Field

from .common import Day, Sha256, Strict


class ModelRevision(Strict):
    revision: int = Field(ge=1)
    sha256: Sha256
    changed_on: Day


class ModelRevisions(Strict):
    """Append-only revisions of one reference or cluster model."""

    model: str = Field(pattern=r"^(references|clusters)/[a-z0-9]+(?:-[a-z0-9]+)*$(?!\n)")
    revisions: list[ModelRevision] = Field(min_length=1)
