"""The one confidence rule: a record's confidence follows from its status, except that a computed figure is only
as strong as the weakest record it rests on."""

from __future__ import annotations

from collections.abc import Iterable

# Strongest first. `derived` is not a confidence: it is resolved to the weakest of its inputs.
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
