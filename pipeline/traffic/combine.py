"""`python -m pipeline.traffic combine`: the per-item parts into the tables every reader knows, and the plot
data of the phases and links.

Reads only the parts' Parquet files and the workload files' `shares_with`: no estimating code is imported."""

from __future__ import annotations

from pathlib import Path

from ..core.files import atomic_write_json
from ..core.paths import Layout
from ..core.registry import Tables, concat_tables
from . import plots
from .parts import TABLES, WORKLOAD_TABLES, sharing_file, sharing_pairs, traffic_dir, workload_dir, workload_paths


def combine(lay: Layout) -> dict[str, int]:
    """`python -m pipeline.traffic combine`: the per-item parts → registry/traffic/<table>.parquet (what the
    report, the database views and every query read) and the plot data of the phases and links."""
    out = traffic_dir(lay)
    parts: dict[str, list[Path]] = {name: [] for name in TABLES}
    for path in workload_paths(lay):
        for name in WORKLOAD_TABLES:
            parts[name].append(workload_dir(lay, path.stem) / f"{name}.parquet")
    parts["traffic_sharing"] = [sharing_file(lay, wid) for wid, _ in sharing_pairs(lay)]
    counts = {}
    for name, (columns, order) in TABLES.items():
        counts[name] = concat_tables(out, name, columns, order, parts[name])
    names = ("traffic", "traffic_links", "traffic_workloads", "traffic_failures")
    with Tables({n: out / f"{n}.parquet" for n in names}) as t:
        plots.write_phases(out / "plots", t)
        # The caveats beside these numbers, for every page of the report: a file of their own, so the pages that
        # show no traffic numbers do not rerun when a number moves (the words do not).
        found = [r["c"] for r in t.rows("SELECT DISTINCT caveat AS c FROM traffic_workloads ORDER BY 1")]
        found += [r["c"] for r in t.rows("SELECT DISTINCT not_established AS c FROM traffic_failures ORDER BY 1")]
    atomic_write_json(out / "caveats.json", {"caveats": [c for c in dict.fromkeys(found) if c]})
    return counts
