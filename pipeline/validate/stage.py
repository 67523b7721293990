"""What the validate stage writes: the `validation` table (registry/validation/validation.parquet, one row per
published result, model vs published), its schema.json (the views file's dep), and registry/validation/metrics.json
(errors by use: calibration, check, held-out). The work is the traffic library's (`estimate/validation.py`)."""

from __future__ import annotations

import json
import math
from typing import Any

from ..core.files import atomic_write_bytes
from ..core.paths import Layout
from ..core.registry import columns, write_schema, write_table
from ..estimate import validation

TABLE = "validation"
TYPES = {**dict.fromkeys(("published", "model", "ratio", "tolerance"), "DOUBLE"), "within": "BOOLEAN"}
COLUMNS = columns(validation.COLUMNS, TYPES)


def _metric(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.6g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _metric(v) for k, v in value.items() if v is not None}
    return value


def write(lay: Layout, rows: list[validation.Row]) -> str:
    directory = lay.registry_dir / "validation"
    directory.mkdir(parents=True, exist_ok=True)
    write_table(directory, TABLE, COLUMNS, ["file", "result"], [r.as_tuple() for r in rows])
    # The table's columns, which the database stage declares instead of the table: its numbers move with every
    # calibration change, its views only with its columns.
    write_schema(directory)
    summary = validation.summary(rows)
    atomic_write_bytes(
        directory / "metrics.json", (json.dumps(_metric(summary), indent=2, sort_keys=True) + "\n").encode()
    )
    check = summary["check"]
    return (
        f"validated {len(rows)} published results into registry/validation/: checks within tolerance "
        f"{check['within_tolerance']}/{check['results']}, held-out within tolerance "
        f"{summary['held-out']['within_tolerance']}/{summary['held-out']['results']}"
    )


def run(lay: Layout) -> str:
    return write(lay, validation.run(lay))
