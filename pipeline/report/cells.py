"""A cluster heat map's cell, apart from the drawing code so the stage can build cells without importing matplotlib."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    """The links of one tier in one pod: the busiest one's utilisation, and how many carry load."""

    tier: str
    pod: int | None  # None: links outside any pod (e.g. spine–core counted at the core)
    peak: float
    links: int
