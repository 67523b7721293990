"""The registry on disk: deterministic Parquet tables (what DVC tracks) and a DuckDB file built from them.

A DuckDB file is not byte-identical from build to build, so DVC tracks the Parquet exports and the
database is a disposable, rebuilt-on-demand index over them (it records the hash of the Parquet it was
built from, and is rebuilt when that no longer matches).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb

from ..core.columns import insert_columns
from ..core.errors import FabricrefError
from ..core.files import current_umask
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
            if not insert_columns(con, name, columns, series):
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
    """Every table built aside in a fresh directory, then switched in with one atomic exchange of directories:
    a crash or kill at any point leaves the old tables or the new ones, never a mix that `query` would serve."""
    final = lay.tables_dir
    _remove_leftovers(final.parent, ".tables.")
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".tables.{os.getpid()}."))
    except OSError as exc:
        raise FabricrefError(f"cannot write {lay.relative(final)}: {exc.strerror}") from exc
    try:
        os.chmod(staging, 0o777 & ~current_umask())
        for name, (columns, order) in TABLES.items():
            write_table(staging, name, columns, order, rows.get(name, []))
        _switch_directories(staging, final)
    except OSError as exc:
        raise FabricrefError(f"cannot write {lay.relative(final)}: {exc.strerror or exc}") from exc
    except duckdb.Error as exc:
        raise FabricrefError(f"cannot write {lay.relative(final)}: {exc}") from exc
    finally:
        # After the exchange this holds the old tables; after a failure, the half-built new ones.
        shutil.rmtree(staging, ignore_errors=True)


_RENAME_EXCHANGE = 2


def _switch_directories(new: Path, final: Path) -> None:
    """Put `new` where `final` is in one step: renameat2(RENAME_EXCHANGE) swaps the two directories atomically
    (the old tables end up at `new`). Where the kernel or file system cannot, two renames: between them
    `final` is briefly absent (a reader sees "missing: run compile"), never mixed."""
    if not final.exists():
        os.rename(new, final)
        return
    if _exchange(new, final):
        return
    aside = new.with_name(new.name + ".old")
    os.rename(final, aside)
    os.rename(new, final)
    os.rename(aside, new)


def _exchange(a: Path, b: Path) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False  # not supported by this kernel or file system: fall back to two renames
    raise OSError(code, os.strerror(code), str(b))


def _remove_leftovers(directory: Path, prefix: str) -> None:
    """Temp files and directories a killed build left behind (`<prefix><pid>.…`): removed when the process
    that made them is gone; a live one's are left alone (another build may be running)."""
    try:
        entries = list(directory.glob(f"{prefix}*"))
    except OSError:
        return
    for entry in entries:
        pid_text = entry.name[len(prefix) :].split(".", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # ours from an earlier, failed call in this process: nothing of ours is building now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    """(Re)build registry.duckdb from the Parquet tables, atomically; leftovers of a killed build are removed
    first, and a read-only checkout or a full disk is a clear error, not an OSError traceback."""
    expected = tables_hash(lay)
    target = lay.duckdb_path
    _remove_leftovers(target.parent, ".registry.")
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".registry.{os.getpid()}.", suffix=".duckdb")
        os.close(fd)
        os.unlink(tmp)  # DuckDB wants to create the file itself
    except OSError as exc:
        raise FabricrefError(f"cannot build {lay.relative(target)}: {exc.strerror}") from exc
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
    except OSError as exc:
        raise FabricrefError(f"cannot build {lay.relative(target)}: {exc.strerror or exc}") from exc
    except duckdb.Error as exc:
        raise FabricrefError(f"cannot build {lay.relative(target)}: {exc}") from exc
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
