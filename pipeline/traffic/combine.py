"""The traffic stage's outputs from its items' results: the tables every reader knows, the plot data of the
phases and links, the KV curve and the caveats.

The items' tables arrive column by column (pipeline/traffic/payload.py); each table is their columns joined in
item order, then written sorted (`write_columns`, one DuckDB connection for all): the rows in the same order as
when each item's rows were appended, so the same bytes. The plot data and the caveats are read from those columns
in memory, not read back from the files just written; where the in-memory reading could differ from the SQL
(ties or NULLs in a sort key, a NaN utilization) the files are read back as before (`plots.write_phases`).

Imports no estimating code: the results come from the item cache or the workers (pipeline/traffic/stage.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_bytes, canonical_json
from ..core.paths import Layout
from ..core.registry import Tables, remove_stale, write_columns, write_schema, writer_connection
from . import plots
from .parts import TABLES, traffic_dir
from .payload import concat


def join(parts: dict[str, list[list[Any]]]) -> dict[str, list[Any]]:
    """Each table's columns from its items' columns (`parts[table]`: one list of columns per item, in item order)."""
    out = {}
    for name, (columns, _) in TABLES.items():
        items = parts.get(name, [])
        out[name] = [concat([item[c] for item in items]) for c in range(len(columns))]
    return out


def write_outputs(
    lay: Layout, parts: dict[str, list[list[Any]]], kv_csv: bytes, more: dict[Path, bytes] | None = None
) -> dict[str, int]:
    """registry/traffic/<table>.parquet from each table's items' columns (in item order; written sorted), the plot
    data (phase times, busiest links, the KV curve), caveats.json and `more` files (the metrics). Returns the row
    count per table. The tables are written in a thread of their own (DuckDB runs without the GIL) while this one
    derives the plot data and writes the small files."""
    out = traffic_dir(lay)
    tables = join(parts)
    with ThreadPoolExecutor(1) as pool:
        written = pool.submit(_write_tables, out, tables)
        files = {**(more or {}), out / "plots" / "kv_transfer.csv": kv_csv}
        phases = plots.phases_from(tables["traffic"], tables["traffic_links"])
        if phases is not None:
            files.update({out / "plots" / name: data for name, data in phases.items()})
        # The caveats beside these numbers, for every page of the report: a file of their own, so the pages that
        # show no traffic numbers do not rerun when a number moves (the words do not).
        found = caveats(tables)
        files[out / "caveats.json"] = canonical_json({"caveats": [c for c in dict.fromkeys(found) if c]})
        write_files(files)
        counts = written.result()
    if phases is None:
        with Tables({n: out / f"{n}.parquet" for n in ("traffic", "traffic_links")}) as t:
            plots.write_phases(out / "plots", t)
    return counts


def _write_tables(out: Path, tables: dict[str, list[Any]]) -> dict[str, int]:
    """Every table, then the stale ones removed and schema.json (the tables' columns: the views file's dep,
    unmoved by a changed number)."""
    counts = {}
    con = writer_connection()
    try:
        for name, (columns, order) in TABLES.items():
            write_columns(out, name, columns, order, tables[name], con=con)
            counts[name] = len(tables[name][0])
    finally:
        con.close()
    remove_stale(out, TABLES)
    write_schema(out)
    return counts


def write_files(files: dict[Path, bytes]) -> None:
    """Each file written atomically (`atomic_write_bytes`), several at a time: each waits on its fsync, not on
    the others' (the first error is raised once all are done)."""
    if len(files) <= 1:
        for path, data in files.items():
            atomic_write_bytes(path, data)
        return
    with ThreadPoolExecutor(min(8, len(files))) as pool:
        for done in [pool.submit(atomic_write_bytes, path, data) for path, data in files.items()]:
            done.result()


def _column(tables: dict[str, list[Any]], table: str, column: str) -> list[Any]:
    names = [c for c, _ in TABLES[table][0]]
    return plots.as_list(tables[table][names.index(column)])


def caveats(tables: dict[str, list[Any]]) -> list[str | None]:
    """`SELECT DISTINCT caveat FROM traffic_workloads ORDER BY 1`, then the same of traffic_failures'
    `not_established`: distinct texts in code point order (DuckDB's binary order of UTF-8 text), NULL last."""
    found: list[str | None] = []
    for table, column in (("traffic_workloads", "caveat"), ("traffic_failures", "not_established")):
        values = set(_column(tables, table, column))
        found += sorted(v for v in values if v is not None)
        found += [None] if None in values else []
    return found
