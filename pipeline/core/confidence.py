"""The one confidence rule: how strong the footing of a number is, and how that follows from its status.

A field's *status* says how it was obtained (stated, announced, computed, labelled as an assumption, missing);
its *confidence* says how far a reader can trust it. They coincide except for computed figures: a derived
field, a topology link or a traffic phase is only as strong as the weakest record it rests on. Every stage
that reports a confidence takes it from here, so the rule cannot drift between copies.
"""

from __future__ import annotations

from collections.abc import Iterable

# Strongest first. `derived` is not a confidence: it is resolved to the weakest of its inputs. `measured` (a
# calibration number from a benchmark log pinned by hash) is as firm as the hardware it ran on; no registry field
# carries it.
ORDER: tuple[str, ...] = ("published", "measured", "preliminary", "assumed", "unknown")

# Statuses whose confidence is the status itself; a labelled assumption or a model's design choice is `assumed`.
_DIRECT = {
    "published": "published",
    "measured": "measured",
    "preliminary": "preliminary",
    "assumed": "assumed",
    "design-choice": "assumed",
    "unknown": "unknown",
}


def check(confidence: str) -> str:
    """The confidence itself, or a ValueError naming the allowed ones (a typo must not sort as 'strongest')."""
    if confidence not in ORDER:
        raise ValueError(f"unknown confidence {confidence!r}: expected one of {', '.join(ORDER)}")
    return confidence


def weakest(confidences: Iterable[str]) -> str:
    """The weakest of the given confidences; nothing to rest on is `unknown`, never `published`."""
    return max((check(c) for c in confidences), key=ORDER.index, default="unknown")


def of_status(status: str, inputs: Iterable[str] = ()) -> str:
    """The confidence of a record with this status; `inputs` are the confidences a derived record rests on."""
    if status == "derived":
        return weakest(inputs)
    if status not in _DIRECT:
        raise ValueError(f"unknown status {status!r}: expected derived or one of {', '.join(_DIRECT)}")
    return _DIRECT[status]
