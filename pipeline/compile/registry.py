"""The registry on disk: deterministic Parquet tables (what DVC tracks) and a DuckDB file built from them.

A DuckDB file is not byte-identical from build to build, so DVC tracks the Parquet exports and the
database is a disposable, rebuilt-on-demand index over them (it records the hash of the Parquet it was
built from, and is rebuilt when that no longer matches).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb

from ..core.errors import FabricrefError
from ..core.paths import Layout

# table → (columns with DuckDB types, sort key). The order of columns and rows is part of the contract.
TABLES: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    "reference_models": (
        [
            ("reference_id", "VARCHAR"),
            ("kind", "VARCHAR"),
            ("title", "VARCHAR"),
            ("form_factor", "VARCHAR"),
            ("summary", "VARCHAR"),
            ("model_path", "VARCHAR"),
            ("model_sha256", "VARCHAR"),
        ],
        ["reference_id"],
    ),
    "parameters": (
        [
            ("reference_id", "VARCHAR"),
            ("name", "VARCHAR"),
            ("value", "DOUBLE"),
            ("unit", "VARCHAR"),
            ("direction", "VARCHAR"),
            ("why", "VARCHAR"),
        ],
        ["reference_id", "name"],
    ),
    "model_revisions": (
        [
            ("model", "VARCHAR"),
            ("revision", "INTEGER"),
            ("sha256", "VARCHAR"),
            ("changed_on", "VARCHAR"),
            ("is_current", "BOOLEAN"),
            ("pinned", "BOOLEAN"),
        ],
        ["model", "revision"],
    ),
    "assumptions": (
        [
            ("reference_id", "VARCHAR"),
            ("field", "VARCHAR"),
            ("value", "DOUBLE"),
            ("unit", "VARCHAR"),
            ("direction", "VARCHAR"),
            ("why", "VARCHAR"),
        ],
        ["reference_id", "field"],
    ),
    "fields": (
        [
            ("reference_id", "VARCHAR"),
            ("field", "VARCHAR"),
            ("value_number", "DOUBLE"),
            ("value_text", "VARCHAR"),
            ("unit", "VARCHAR"),
            ("direction", "VARCHAR"),
            ("status", "VARCHAR"),
            ("confidence", "VARCHAR"),
            ("formula", "VARCHAR"),
            ("reason", "VARCHAR"),
            ("evidence_needed", "VARCHAR"),
            ("chosen", "VARCHAR"),
            ("choice_reason", "VARCHAR"),
            ("description", "VARCHAR"),
        ],
        ["reference_id", "field"],
    ),
    "field_citations": (
        [
            ("reference_id", "VARCHAR"),
            ("field", "VARCHAR"),
            ("source_id", "VARCHAR"),
            ("rule_id", "VARCHAR"),
            ("revision", "INTEGER"),
            ("sha256", "VARCHAR"),
            ("retrieved_at", "VARCHAR"),
            ("url", "VARCHAR"),
            ("snapshot_path", "VARCHAR"),
            ("locator", "VARCHAR"),
            ("excerpt", "VARCHAR"),
            ("stated", "VARCHAR"),
            ("origin", "VARCHAR"),
            ("carried_from_revision", "INTEGER"),
            ("chosen", "BOOLEAN"),
        ],
        ["reference_id", "field", "source_id", "rule_id"],
    ),
    "field_inputs": (
        [
            ("reference_id", "VARCHAR"),
            ("field", "VARCHAR"),
            ("position", "INTEGER"),
            ("input", "VARCHAR"),
        ],
        ["reference_id", "field", "position"],
    ),
    "sources": (
        [
            ("source_id", "VARCHAR"),
            ("url", "VARCHAR"),
            ("publisher", "VARCHAR"),
            ("title", "VARCHAR"),
            ("document_type", "VARCHAR"),
            ("media_type", "VARCHAR"),
            ("status", "VARCHAR"),
            ("read_on", "VARCHAR"),
            ("rule_count", "INTEGER"),
        ],
        ["source_id"],
    ),
    "snapshots": (
        [
            ("source_id", "VARCHAR"),
            ("revision", "INTEGER"),
            ("retrieved_at", "VARCHAR"),
            ("sha256", "VARCHAR"),
            ("size", "BIGINT"),
            ("media_type", "VARCHAR"),
            ("url", "VARCHAR"),
            ("final_url", "VARCHAR"),
            ("etag", "VARCHAR"),
            ("last_modified", "VARCHAR"),
            ("origin", "VARCHAR"),
            ("snapshot_path", "VARCHAR"),
            ("is_current", "BOOLEAN"),
        ],
        ["source_id", "revision"],
    ),
    "claims": (
        [
            ("source_id", "VARCHAR"),
            ("rule_id", "VARCHAR"),
            ("field", "VARCHAR"),
            ("subject", "VARCHAR"),
            ("value_number", "DOUBLE"),
            ("value_text", "VARCHAR"),
            ("unit", "VARCHAR"),
            ("direction", "VARCHAR"),
            ("status", "VARCHAR"),
            ("revision", "INTEGER"),
            ("sha256", "VARCHAR"),
            ("locator", "VARCHAR"),
            ("excerpt", "VARCHAR"),
        ],
        ["source_id", "rule_id"],
    ),
}

VIEWS = {
    "field_provenance": """
        SELECT f.reference_id, f.field, f.value_text, f.value_number, f.unit, f.direction, f.status, f.confidence,
               c.source_id, c.url, c.retrieved_at, c.sha256, c.origin, c.locator, c.excerpt, c.stated, c.revision,
               c.snapshot_path, c.chosen
        FROM fields f LEFT JOIN field_citations c USING (reference_id, field)
    """,
}


def write_table(
    directory: Path, name: str, columns: list[tuple[str, str]], order: list[str], rows: Iterable[Sequence[Any]]
) -> Path:
    """One table as Parquet, sorted, single-threaded: the same rows always give the same bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET threads = 1")
        con.execute("SET preserve_insertion_order = true")
        cols = ", ".join(f'"{c}" {t}' for c, t in columns)
        con.execute(f'CREATE TABLE "{name}" ({cols})')
        data = list(rows)
        if data:
            # Column-wise: one list per column, unnested inside DuckDB (executemany is row by row: far slower).
            series = [list(col) for col in zip(*data, strict=True)]
            select = ", ".join(f"unnest(?::{t}[])" for _, t in columns)
            con.execute(f'INSERT INTO "{name}" SELECT {select}', series)
        target = directory / f"{name}.parquet"
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".parquet")
        os.close(fd)
        try:
            keys = ", ".join(f'"{k}"' for k in order)
            con.execute(
                f"COPY (SELECT * FROM \"{name}\" ORDER BY {keys}) TO '{tmp}' "
                "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 100000)"
            )
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return target
    finally:
        con.close()


def write_tables(lay: Layout, rows: dict[str, Iterable[Sequence[Any]]]) -> None:
    for name, (columns, order) in TABLES.items():
        write_table(lay.tables_dir, name, columns, order, rows.get(name, []))
    for stale in lay.tables_dir.glob("*.parquet"):
        if stale.stem not in TABLES:
            stale.unlink()


# Later stages write their own Parquet tables here; the DuckDB registry loads every one of them.
STAGE_TABLE_DIRS = ("topology", "traffic")


def _all_tables(lay: Layout) -> list[tuple[str, Path]]:
    tables = [(name, lay.tables_dir / f"{name}.parquet") for name in sorted(TABLES)]
    for sub in STAGE_TABLE_DIRS:
        tables += [(p.stem, p) for p in sorted((lay.registry_dir / sub).glob("*.parquet"))]
    return tables


def tables_hash(lay: Layout) -> str:
    digest = hashlib.sha256()
    for name, path in _all_tables(lay):
        if not path.exists():
            raise FabricrefError(f"{lay.relative(path)} is missing: run `dvc repro` (or `fabricref compile`)")
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def build_database(lay: Layout) -> Path:
    """(Re)build registry.duckdb from the Parquet tables, atomically."""
    expected = tables_hash(lay)
    target = lay.duckdb_path
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".registry.", suffix=".duckdb")
    os.close(fd)
    os.unlink(tmp)  # DuckDB wants to create the file itself
    try:
        con = duckdb.connect(tmp)
        try:
            for name, path in _all_tables(lay):
                con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM read_parquet(?)', [path.as_posix()])
            for name, sql in VIEWS.items():
                con.execute(f'CREATE VIEW "{name}" AS {sql}')
            con.execute("CREATE TABLE _build (tables_sha256 VARCHAR)")
            con.execute("INSERT INTO _build VALUES (?)", [expected])
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, tmp + ".wal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
    return target


def ensure_database(lay: Layout) -> Path:
    """The DuckDB registry, rebuilt first if it is missing or was built from other Parquet bytes."""
    expected = tables_hash(lay)
    path = lay.duckdb_path
    if path.exists():
        try:
            con = duckdb.connect(str(path), read_only=True)
            try:
                row = con.execute("SELECT tables_sha256 FROM _build").fetchone()
            finally:
                con.close()
            if row and row[0] == expected:
                return path
        except duckdb.Error:
            pass
    return build_database(lay)
