"""`models/identities.json`: a reference id keeps its kind and title forever."""

from __future__ import annotations

from typing import Literal

from .common import Slug, Strict, Title


class Identity(Strict):
    kind: Literal["vendor", "illustrative"]
    title: Title


class Identities(Strict):
    """Permanent identities of reference models."""

    description: str | None = None
    references: dict[Slug, Identity]
