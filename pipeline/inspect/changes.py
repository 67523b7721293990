"""What moved between two revisions of a source, field by field: added, removed, value changed (old → new,
with units), status changed. Old snapshot bytes stay in the store, so any two revisions can be compared."""

from __future__ import annotations

from typing import Any

from ..core import pins
from ..core.format import DEFAULT_DIGITS, format_distinct, format_field, significant_digits
from ..core.paths import Layout
from ..core.sources import load_sources
from ..errors import FabricrefError, UsageError
from ..extract.claims import claims_at


def _raw(v: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What a claim states: a change in any of these is a value change (compared exactly, not as printed)."""
    if v is None:
        return None
    return (v["value_number"], v["value_text"], v["unit"], v["direction"])


def _values(a: dict[str, Any] | None, b: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """Old and new as text with units, with enough digits that different numbers never read the same."""
    number = (a or b or {}).get("value_number") is not None
    if a is not None and b is not None and number and a["unit"] == b["unit"]:
        stated = max(significant_digits(a["value_text"]) or 0, significant_digits(b["value_text"]) or 0)
        return format_distinct(
            a["value_number"], b["value_number"], b["unit"], b["direction"], a["direction"], stated or DEFAULT_DIGITS
        )
    return _text(a), _text(b)


def _text(v: dict[str, Any] | None) -> str | None:
    """A claim's value with the digits its document states."""
    if v is None:
        return None
    if v["value_number"] is not None:
        return format_field({**v, "digits": significant_digits(v["value_text"])})
    return v["value_text"]


def require_revision(history: pins.PinHistory | None, number: int) -> int:
    """A revision the user named must exist (pins are numbered 1..M without gaps); if not, that is bad usage
    (exit 2), never an integrity alarm."""
    count = 0 if history is None else len(history.revisions)
    if not 1 <= number <= count:
        have = f"it has 1…{count}" if count else "it has no pinned revision"
        source = "this source" if history is None else f"source {history.source_id}"
        where = "" if history is None else f"; see `fabricref history {history.source_id}`"
        raise UsageError(f"{source} has no revision {number} ({have}){where}")
    return number


def diff(lay: Layout, source_id: str, from_rev: int | None = None, to_rev: int | None = None) -> dict[str, Any]:
    (source,) = load_sources(lay, source_id)
    history = pins.load(lay, source_id)
    if history is None:
        raise FabricrefError(  # declared (load_sources checked the id) but never pinned: a data gap, not bad usage
            f"source {source_id} has no pinned revision; pin it with `fabricref retrieve --refresh --source "
            f"{source_id}` or `fabricref pin {source_id}`"
        )
    to_rev = require_revision(history, to_rev) if to_rev is not None else history.current.revision
    from_rev = require_revision(history, from_rev) if from_rev is not None else max(1, to_rev - 1)
    old, _old_errors, old_pin = claims_at(lay, source, from_rev)
    new, new_err, new_pin = claims_at(lay, source, to_rev)
    changes = []
    for rule in source.rules:
        a, b = old.get(rule.id), new.get(rule.id)
        old_text, new_text = _values(a, b)
        row = {
            "rule": rule.id,
            "field": rule.field,
            "old": old_text,
            "new": new_text,
            "old_status": a and a["status"],
            "new_status": b and b["status"],
        }
        if a is None and b is None:
            row["change"] = "unmatched"
            row["detail"] = new_err.get(rule.id)
        elif a is None:
            row["change"] = "added"
        elif b is None:
            row["change"] = "removed"
            row["detail"] = new_err.get(rule.id)
        elif _raw(a) != _raw(b):
            row["change"] = "value changed"
        elif a["status"] != b["status"]:
            row["change"] = "status changed"
        else:
            row["change"] = "unchanged"
        changes.append(row)
    return {
        "source_id": source_id,
        "from": {"revision": from_rev, "sha256": old_pin.sha256, "retrieved_at": old_pin.retrieved_at},
        "to": {"revision": to_rev, "sha256": new_pin.sha256, "retrieved_at": new_pin.retrieved_at},
        "changes": changes,
        "changed": [c for c in changes if c["change"] != "unchanged"],
    }


def diff_all(lay: Layout) -> list[dict[str, Any]]:
    """Every source whose latest revision changed something compared with the revision before it."""
    out = []
    for source in load_sources(lay):
        history = pins.load(lay, source.id)
        if history is None or len(history.revisions) < 2:
            continue
        result = diff(lay, source.id)
        if result["changed"]:
            out.append(result)
    return out
