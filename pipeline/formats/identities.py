"""`models/identities.json`: a reference id keeps its kind and title forever."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Slug, Strict


class Identity(Strict):
    kind: Literal["vendor", "illustrative"]
    title: str = Field(min_length=3)


class Identities(Strict):
    """Permanent identities of reference models."""

    description: str | None = None
    references: dict[Slug, Identity]
