"""The traffic stage's outputs from its items' results: the tables every reader knows, the plot data of the
phases and links, the KV curve and the caveats.

Imports no estimating code: the results come from the item cache or the workers (pipeline/traffic/stage.py)."""

from __future__ import annotations

from typing import Any

from ..core.files import atomic_write_bytes, atomic_write_json
from ..core.paths import Layout
from ..core.registry import Tables, remove_stale, write_schema, write_table
from . import plots
from .parts import TABLES, traffic_dir


def write_outputs(lay: Layout, rows: dict[str, list[Any]], kv_csv: bytes) -> dict[str, int]:
    """registry/traffic/<table>.parquet from each table's rows (in item order; written sorted), the plot data
    (phase times, busiest links, the KV curve) and caveats.json. Returns the row count per table."""
    out = traffic_dir(lay)
    counts = {}
    for name, (columns, order) in TABLES.items():
        write_table(out, name, columns, order, rows[name])
        counts[name] = len(rows[name])
    remove_stale(out, TABLES)
    write_schema(out)  # the tables' columns: the views file's dep, unmoved by a changed number
    names = ("traffic", "traffic_links", "traffic_workloads", "traffic_failures")
    with Tables({n: out / f"{n}.parquet" for n in names}) as t:
        plots.write_phases(out / "plots", t)
        # The caveats beside these numbers, for every page of the report: a file of their own, so the pages that
        # show no traffic numbers do not rerun when a number moves (the words do not).
        found = [r["c"] for r in t.rows("SELECT DISTINCT caveat AS c FROM traffic_workloads ORDER BY 1")]
        found += [r["c"] for r in t.rows("SELECT DISTINCT not_established AS c FROM traffic_failures ORDER BY 1")]
    atomic_write_bytes(out / "plots" / "kv_transfer.csv", kv_csv)
    atomic_write_json(out / "caveats.json", {"caveats": [c for c in dict.fromkeys(found) if c]})
    return counts
