"""How every view words a field's evidence (a citation, a conflict between documents, a stated figure's check):
one wording for show, audit, the report and the explorer, since a view that forgets one of these facts (a page
read through a copy, two documents disagreeing) misleads silently."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .format import format_field

READ_VIA_A_COPY = "read via a copy"
# A design statement never published at an address has none; it is its id and its pinned transcription's hash.
NO_URL = "no URL: a design statement, identified by its id and the SHA-256 of its pinned transcription"


def address(url: str | None) -> str:
    """Where a cited document lives: its canonical URL, or why it has none."""
    return url if url is not None else NO_URL


CONFLICTING = "conflicting sources"
RESOLVED_BY = {
    "rule": "by the declared rule (the most specific product's document; among those, the latest)",
    "take": "by the model's take (the rule cannot decide)",
}


def citation_label(c: Mapping[str, Any]) -> str:
    """'servethehome-amd-mi400-hot-chips-2026 (press, 2026-08-24, transcription, read via a copy)'."""
    parts = [c.get("publisher_kind"), c.get("published_on"), c.get("origin")]
    if c.get("read_via"):
        parts.append(READ_VIA_A_COPY)
    inside = ", ".join(str(p) for p in parts if p)
    return f"{c['source_id']} ({inside})" if inside else str(c["source_id"])


def conflict_text(citations: Sequence[Mapping[str, Any]], resolved_by: str | None) -> str:
    """'conflicting sources: 23.3 TB/s from servethehome-… (2026-08-24, taken) vs 19.6 TB/s from turtlesai-…
    (2025-06); resolved by the declared rule (…)'."""
    ordered = sorted(citations, key=lambda c: (not c.get("chosen"), _newest_first(c.get("published_on"))))
    claims = []
    for c in ordered:
        when = [c.get("published_on") or "undated"] + (["taken"] if c.get("chosen") else [])
        claims.append(f"{format_field(c)} from {c['source_id']} ({', '.join(when)})")
    text = f"{CONFLICTING}: " + " vs ".join(claims)
    return text + (f"; resolved {RESOLVED_BY[resolved_by]}" if resolved_by in RESOLVED_BY else "")


def _newest_first(published_on: str | None) -> str:
    """A sort key putting later dates first and undated documents last."""
    if not published_on:
        return "~"
    return "".join(chr(ord("9") - ord(ch) + ord("0")) if ch.isdigit() else ch for ch in published_on)


def check_of(field: Mapping[str, Any]) -> dict[str, Any] | None:
    """A field row's `check_*` columns as one record; None when the field has no check."""
    if not field.get("check_formula"):
        return None
    return {
        "formula": field["check_formula"],
        "value": field.get("check_value"),
        "digits": field.get("check_digits"),
        "agrees": bool(field.get("check_agrees")),
    }


def check_text(check: Mapping[str, Any], stated: Mapping[str, Any]) -> str:
    """'check: scale_up.aggregate_bandwidth / accelerator.count = 1.81 TB/s bidirectional, agrees with the stated
    1.8 TB/s bidirectional', each at its own precision."""
    derived = {
        "value_number": check["value"],
        "unit": stated.get("unit"),
        "direction": stated.get("direction"),
        "digits": check.get("digits"),
    }
    verdict = "agrees with" if check["agrees"] else "DISAGREES with"
    return f"check: {check['formula']} = {format_field(derived)}, {verdict} the stated {format_field(stated)}"
