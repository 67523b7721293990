"""Every pinned measured log (sources/measured/, its bytes from the store; never the `measurements` table, written
outside DVC) beside the calibrated model on its topology: registry/comparison/measured_vs_model.parquet, one row per
log, placement and size, with what the report cites. Never cached: with no pins it costs a directory listing."""

from __future__ import annotations

from pathlib import Path

from ..core.paths import Layout
from ..core.registry import columns, write_table
from ..estimate.measured import measured_rows, model_rows

TABLE = "measured_vs_model"
COLUMNS = columns(
    "measurement_id sha256 origin file_name pin topology_id op ranks:INTEGER hosts:INTEGER placement bytes:BIGINT "
    "line:INTEGER measured_seconds:DOUBLE model_seconds:DOUBLE measured_busbw_gb_per_s:DOUBLE "
    "model_busbw_gb_per_s:DOUBLE ratio:DOUBLE algorithm protocol algorithm_declared confidence"
)


def comparison_dir(lay: Layout) -> Path:
    return lay.registry_dir / "comparison"


def run(lay: Layout) -> tuple[Path, int]:
    """Write the table; returns its path and how many logs it compares."""
    measured = measured_rows(lay)
    by_topology: dict[str, list[dict]] = {}
    for m in measured:
        by_topology.setdefault(m["topology_id"], []).append(m)
    rows = []
    for topology_id in sorted(by_topology):
        for m, model in zip(
            by_topology[topology_id], model_rows(lay, topology_id, by_topology[topology_id]), strict=True
        ):
            rows.append(tuple({**m, **model}[c] for c, _ in COLUMNS))
    path = write_table(
        comparison_dir(lay), TABLE, COLUMNS, ["topology_id", "measurement_id", "placement", "bytes", "line"], rows
    )
    return path, len({m["measurement_id"] for m in measured})


def run_stage(lay: Layout) -> str:
    """The measured logs beside the model (part of `python -m fabricref.traffic curves`, the DVC stage
    `traffic-curves`)."""
    path, logs = run(lay)
    return f"{logs} measured log(s) beside the model into {lay.relative(path)}"
