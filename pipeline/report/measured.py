"""The report's model-vs-measured page: each pinned nccl-tests / rccl-tests log's busbw beside the model's, one plot
per log, cited by file name, origin, pin and SHA-256. Reads only registry/comparison/measured_vs_model.parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.files import atomic_write_bytes
from ..core.format import format_quantity
from ..core.paths import Layout
from ..core.registry import Tables

TABLE = "measured_vs_model"
PAGE = "measured.html"


def table_path(lay: Layout) -> Path:
    return lay.registry_dir / "comparison" / f"{TABLE}.parquet"


def _logs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per log (out-of-place rows: what nccl-tests reports first), its rows by size, readable cells."""
    logs: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["placement"] != "out-of-place":
            continue
        log = logs.setdefault(
            r["measurement_id"],
            {k: r[k] for k in ("measurement_id", "sha256", "origin", "file_name", "pin", "topology_id", "op")}
            | {"ranks": r["ranks"], "hosts": r["hosts"], "algorithm_declared": r["algorithm_declared"], "rows": []},
        )
        log["rows"].append(
            {
                **r,
                "size": format_quantity(r["bytes"] / 1024, "KiB"),
                "measured": format_quantity(r["measured_busbw_gb_per_s"], "GB/s"),
                "model": format_quantity(r["model_busbw_gb_per_s"], "GB/s"),
                "measured_time": format_quantity(r["measured_seconds"], "s"),
                "model_time": format_quantity(r["model_seconds"], "s"),
                "ratio_text": "—" if r["ratio"] is None else f"{r['ratio']:.3f}",
            }
        )
    for log in logs.values():
        log["rows"].sort(key=lambda x: x["bytes"])
        log["plot"] = f"plots/measured-{log['measurement_id']}.svg"
    return [logs[k] for k in sorted(logs)]


def plot(log: dict[str, Any]) -> bytes:
    """Measured busbw beside the model's against the buffer size (matplotlib is loaded only when a plot is made)."""
    from ..views.charts import busbw_chart

    title = (
        f"{log['op']} on {log['topology_id']}, {log['ranks']} ranks: {log['file_name']} (sha256 {log['sha256'][:12]})"
    )
    return busbw_chart(title, [("", log["rows"])])


def read(lay: Layout) -> list[dict[str, Any]]:
    """The logs the page shows (each with its plot's path in the report, `log["plot"]`)."""
    with Tables({TABLE: table_path(lay)}) as t:
        rows = t.rows(f"SELECT * FROM {TABLE} ORDER BY measurement_id, placement, bytes, line")
    return _logs(rows)


def write_page(out: Path, env: Any, caveats: list[str], logs: list[dict[str, Any]]) -> dict[str, Any]:
    """Write measured.html under `out` (the plots are the caller's); return the index's link to it."""
    page = env.get_template("measured.html.j2").render(
        title="Model vs measured (nccl-tests / rccl-tests logs)", root="", caveats=caveats, logs=logs
    )
    atomic_write_bytes(out / PAGE, page.encode())
    return {"page": PAGE, "logs": len(logs)}


def write(lay: Layout, out: Path, env: Any, caveats: list[str]) -> dict[str, Any]:
    """Write measured.html and one plot per log under `out`; return the index's link to the page."""
    logs = read(lay)
    for log in logs:
        atomic_write_bytes(out / log["plot"], plot(log))
    return write_page(out, env, caveats, logs)
