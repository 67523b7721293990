"""How every view words a field's evidence: a citation's kind of evidence and how it was read, a conflict between
cited documents, a stated figure's check. One wording for `fabricref show`, `fabricref audit`, the report's
reference pages and the explorer, so a reader sees the same words wherever a source is cited.

Why here and not in each view: the record keeps these facts (compile's `field_citations` and `fields` columns),
and a view that forgets one (that a page was read through a third party's copy, that a press relay is not the
vendor, that two documents disagree) misleads silently. The numbers go through the one formatter (`format`).
"""

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
    """'servethehome-amd-mi400-hot-chips-2026 (press, 2026-08-24, transcription, read via a copy)': the source, the
    kind of evidence it is, when it was published (when known), what its pinned hash proves (origin), and whether
    it was read from a copy rather than the publisher's own address."""
    parts = [c.get("publisher_kind"), c.get("published_on"), c.get("origin")]
    if c.get("read_via"):
        parts.append(READ_VIA_A_COPY)
    inside = ", ".join(str(p) for p in parts if p)
    return f"{c['source_id']} ({inside})" if inside else str(c["source_id"])


def conflict_text(citations: Sequence[Mapping[str, Any]], resolved_by: str | None) -> str:
    """'conflicting sources: 23.3 TB/s from servethehome-… (2026-08-24, taken) vs 19.6 TB/s from turtlesai-…
    (2025-06); resolved by the declared rule (…)': every claim's value with its date, the one taken first."""
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
    """A field row's check (`check_formula`, `check_value`, `check_digits`, `check_agrees` columns) as one record:
    formula, value, digits, agrees; None when the field has none."""
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
    1.8 TB/s bidirectional': a check (`check_of`) beside the stated figure it checks (a field row: value_number,
    unit, direction, digits), each at its own precision."""
    derived = {
        "value_number": check["value"],
        "unit": stated.get("unit"),
        "direction": stated.get("direction"),
        "digits": check.get("digits"),
    }
    verdict = "agrees with" if check["agrees"] else "DISAGREES with"
    return f"check: {check['formula']} = {format_field(derived)}, {verdict} the stated {format_field(stated)}"
