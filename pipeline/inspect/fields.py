"""A reference's fields as every reading view shows them (`fabricref show`, the explorer): each field row with its
citations, the claims a conflict keeps, and a stated figure's check, read from the compile stage's tables."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..core.citing import check_of, check_text, citation_label, conflict_text
from ..core.format import format_field
from ..core.paths import Layout
from ..core.registry import open_tables

# The citation columns a view reads (field_citations): where a claim came from and what it states.
CITATION_KEYS = (
    "source_id",
    "rule_id",
    "value_number",
    "value_text",
    "unit",
    "direction",
    "digits",
    "status",
    "published_on",
    "publisher_kind",
    "read_via",
    "origin",
    "chosen",
    "agrees",
)


def reference_fields(lay: Layout, reference_id: str) -> list[dict[str, Any]]:
    """Every field of one reference (by key), each with `citations` (the cited claims, as CITATION_KEYS); empty
    when no such reference exists. Two queries with bound parameters, not one per field."""
    with open_tables(lay, "tables") as tables:
        fields = tables.rows("SELECT * FROM fields WHERE reference_id = ? ORDER BY field", reference_id)
        cites = tables.rows(
            "SELECT * FROM field_citations WHERE reference_id = ? ORDER BY field, source_id, rule_id", reference_id
        )
    by_field: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in cites:
        by_field[c["field"]].append({k: c[k] for k in CITATION_KEYS})
    return [{**f, "citations": by_field.get(f["field"], [])} for f in fields]


def value_cell(f: dict[str, Any]) -> str:
    """The value as a table shows it: the figure at its record's precision, then (on lines of their own) the
    conflicting claims when the cited documents disagree, and the check when it disagrees with the stated figure."""
    lines = [format_field(f)]
    if f.get("conflict"):
        lines.append(conflict_text(f["citations"], f.get("resolved_by")))
    check = check_of(f)
    if check is not None and not check["agrees"]:
        lines.append(check_text(check, f))
    return "\n".join(lines)


def source_cell(f: dict[str, Any]) -> str:
    """What the value rests on: each cited source with its kind, date, origin and whether it was read from a copy;
    else the formula of a derived field, or why an unknown one is unknown."""
    if f["citations"]:
        return ", ".join(citation_label(c) for c in f["citations"])
    return f.get("formula") or f.get("reason") or ""


def json_record(f: dict[str, Any]) -> dict[str, Any]:
    """One field for `fabricref show --json`: the exact value (never rounded) with the document's own text, its
    precision, every citation, the conflict and the check as data."""
    stated = f["status"] in ("published", "preliminary")
    return {
        "field": f["field"],
        "value": f["value_text"] if f["value_number"] is None else f["value_number"],
        "unit": f["unit"],
        "direction": f["direction"],
        "status": f["status"],
        "source": source_cell(f),
        "stated": f["value_text"] if stated else None,
        "digits": f.get("digits"),
        "conflict": bool(f.get("conflict")),
        "resolved_by": f.get("resolved_by"),
        "citations": [
            {**{k: c[k] for k in CITATION_KEYS if k not in ("chosen",)}, "taken": bool(c["chosen"])}
            for c in f["citations"]
        ],
        "check": check_of(f),
    }
