"""The validation table (registry/validation/) as both views show it: model vs published, ratio, tolerance,
verdict, and what the result is used for."""

from __future__ import annotations

from typing import Any

from ..core.format import MISSING, format_percent, format_quantity

SQL = "SELECT * FROM validation ORDER BY file, result"
ROLES = {
    "calibration": "set a calibration number",
    "check": "acceptance check",
    "held-out": "held out (sets nothing)",
}


def shown(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row printed at four digits (a ratio of 1.04 must not read as 1), the exact numbers under `values`."""
    out = []
    for r in rows:
        unit = r.get("unit") or None
        within = r.get("within")
        out.append(
            {
                "case": f"{r['file']}#{r['result']}",
                "label": r.get("label") or "",
                "target": r.get("target") or "",
                "quantity": str(r["quantity"]).replace("_", " "),
                "source": r["file"],
                "url": r.get("url") or "",
                "model": format_quantity(r.get("model"), unit, digits=4),
                "published": format_quantity(r.get("published"), unit, digits=4),
                "ratio": MISSING if r.get("ratio") is None else f"{r['ratio']:.3f}",
                "tolerance": MISSING if r.get("tolerance") is None else f"±{format_percent(r['tolerance'])}",
                "verdict": "unknown" if within is None else ("in" if within else "out"),
                "role": ROLES.get(str(r.get("use")), str(r.get("use") or "")),
                "note": r.get("note") or "",
                "values": {k: r.get(k) for k in ("model", "published", "ratio", "tolerance")},
                "unit": unit or "",
            }
        )
    return out


def summary(rows: list[dict[str, Any]]) -> str:
    """'25 of 27 within tolerance; 2 outside'."""
    inside = sum(r["verdict"] == "in" for r in rows)
    outside = sum(r["verdict"] == "out" for r in rows)
    unknown = len(rows) - inside - outside
    text = f"{inside} of {len(rows)} within tolerance; {outside} outside"
    return text + (f"; {unknown} without a model figure" if unknown else "")
