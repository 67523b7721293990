"""The registry on disk: deterministic Parquet tables written by the stages, read through DuckDB views.

`registry/registry.duckdb` holds views, not tables: a DuckDB file is not byte-identical from build to build (so
it cannot be a DVC output), and a file of copies goes stale silently after `dvc checkout`; views hold no numbers.
A view binds its columns when created, so it must be rebuilt when a column's name or type changes, not when a
number does: a stage whose numbers move often writes `schema.json` beside its tables (`write_schema`) and the
`database` stage declares that file instead. Paths in the views are absolute (a relative one resolves against
the reader's working directory, possibly inside another checkout); a guard in every view refuses a file that
was moved or copied.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ..errors import FabricrefError, IntegrityError
from .files import atomic_write_json, new_file_mode, process_alive
from .paths import Layout, contained
from .store import sha256_file

if TYPE_CHECKING:
    import numpy as np

# The directories under registry/ holding Parquet tables: the stages' outputs in the order they are written, then
# `measurements` (written by `fabricref measured`, outside DVC).
TABLE_DIRS = ("tables", "topology", "traffic", "validation", "measurements")

# Views over several tables, created when every table they read is present.
DERIVED_VIEWS: dict[str, tuple[tuple[str, ...], str]] = {
    "field_provenance": (
        ("fields", "field_citations", "sources"),
        """
        SELECT f.reference_id, f.field, f.value_text, f.value_number, f.unit, f.direction, f.status, f.confidence,
               c.source_id, c.url, c.retrieved_at, c.sha256, c.origin, c.locator, c.excerpt, c.stated, c.revision,
               c.snapshot_path, c.chosen, s.publisher_kind, s.read_via, s.published_on, f.conflict, c.agrees
        FROM fields f LEFT JOIN field_citations c USING (reference_id, field)
        LEFT JOIN sources s ON s.source_id = c.source_id
        """,
    ),
    # Each graph edge a workload uses, with its bytes each way over one step or request (every phase's bytes times
    # its count): what the report's heat maps colour and the traffic plots rank.
    "traffic_link_steps": (
        ("traffic", "traffic_links"),
        """
        SELECT l.topology_id, l.workload_id, l.source, l.target, l.network, l.tier, l.capacity_gbps,
               sum(l.bytes_forward * t.count) AS bytes_forward, sum(l.bytes_reverse * t.count) AS bytes_reverse
        FROM traffic_links l JOIN traffic t USING (topology_id, workload_id, phase)
        GROUP BY ALL
        """,
    ),
}

BUILD_TABLE = "_registry_build"
SCHEMA_FILE = "schema.json"
VIEWS_FILE = "views.json"  # the views of registry.duckdb with their bound columns: the database stage's output


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _writer_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that writes stable bytes: single-threaded, in insertion order."""
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET threads = 1")
        con.execute("SET preserve_insertion_order = true")
    except BaseException:
        con.close()
        raise
    return con


def _create(con: duckdb.DuckDBPyConnection, name: str, columns: list[tuple[str, str]]) -> None:
    con.execute(f"CREATE TABLE {_quote(name)} ({', '.join(f'{_quote(c)} {t}' for c, t in columns)})")


def _create_views(con: duckdb.DuckDBPyConnection, paths: dict[str, str], where: str = "") -> None:
    """One view per Parquet file (absolute path), then the derived views whose tables are all there."""
    for name, path in paths.items():
        con.execute(f"CREATE VIEW {_quote(name)} AS SELECT * FROM read_parquet({_literal(path)}){where}")
    for name, (needs, sql) in DERIVED_VIEWS.items():
        if all(n in paths for n in needs):
            con.execute(f"CREATE VIEW {_quote(name)} AS {sql}")


def _copy_sorted(con: duckdb.DuckDBPyConnection, directory: Path, name: str, order: list[str]) -> Path:
    """The table sorted by `order`, written atomically as `directory/name.parquet` with its `record_hash`."""
    target = directory / f"{name}.parquet"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".parquet")
    os.close(fd)
    try:
        query = f"SELECT * FROM {_quote(name)} ORDER BY " + ", ".join(_quote(k) for k in order)
        con.execute(f"COPY ({query}) TO '{tmp}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 100000)")
        record_hash(target, sha256_file(Path(tmp)))
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target


# Every Parquet and DuckDB file has its SHA-256 beside it (`NAME.parquet.sha256`, `sha256sum` form), checked by
# every reader before DuckDB reads a byte: a flipped bit is refused naming the file, never read as other numbers.
HASH_SUFFIX = ".sha256"
_REBUILD = {
    "tables": "`dvc checkout registry/tables` (or rebuild it: `dvc repro --force compile`)",
    "topology": "`dvc checkout registry/topology` (or rebuild it: `dvc repro --force topology`)",
    "traffic": "`dvc checkout` (or rebuild it: `dvc repro --force traffic`)",
    "comparison": "`dvc checkout` (or rebuild it: `dvc repro --force traffic`)",
    "measurements": "`fabricref measured import` of any pinned log again (the table is rebuilt from every pin)",
    "validation": "`dvc checkout` (or rebuild it: `dvc repro --force validate`)",
}


def hash_path(path: Path) -> Path:
    return path.with_name(path.name + HASH_SUFFIX)


def record_hash(path: Path, sha256: str) -> Path:
    """Write `path`'s SHA-256 beside it, before the file is renamed into place (a crash between leaves a mismatch)."""
    target = hash_path(path)
    # Raw OSError (not FabricrefError) on failure, like the table's own write: the stage names what it writes.
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), new_file_mode())
            handle.write(f"{sha256}  {path.name}\n".encode())
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target


_VERIFIED: dict[tuple[str, int, int, int, int], None] = {}


def verify_file(path: Path, rebuild: str | None = None) -> None:
    """IntegrityError unless `path` hashes to the SHA-256 beside it (cached while the file is unchanged)."""
    contained(path)
    sidecar = hash_path(path)
    how = rebuild or _REBUILD.get(path.parent.name, "`dvc checkout` or `dvc repro --force` of the stage writing it")
    try:
        info, side = path.stat(), sidecar.stat()
    except FileNotFoundError as exc:
        missing = path if exc.filename == str(path) else sidecar
        raise IntegrityError(
            f"{path}: {'missing' if missing == path else f'no recorded SHA-256 ({sidecar.name} is missing)'}; "
            f"restore it with {how}"
        ) from None
    key = (str(path), info.st_ino, info.st_size, info.st_mtime_ns, side.st_mtime_ns)
    if key in _VERIFIED:
        return
    text = sidecar.read_text(encoding="utf-8", errors="replace") if side.st_size <= 4096 else ""
    recorded = text.split()[0] if text.split() else ""
    actual = sha256_file(path)
    if recorded != actual:
        raise IntegrityError(
            f"{path}: damaged: it hashes to {actual}, {sidecar.name} records {recorded or 'no hash'}; restore it "
            f"with {how}"
        )
    _VERIFIED[key] = None


def _column(values: Sequence[Any]) -> np.ndarray:
    """One column as a NumPy object array (assigned, not constructed: a list-valued cell stays one cell)."""
    import numpy as np

    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


@contextlib.contextmanager
def table_writer(
    directory: Path, tables: dict[str, tuple[list[tuple[str, str]], list[str]]]
) -> Iterator[Callable[[str, Iterable[Sequence[Any]]], None]]:
    """Tables (name → (columns with DuckDB types, sort key)) filled by `add(name, rows)`; on leaving without an
    error each is written as `directory/<name>.parquet`: the same rows give the same bytes, whatever the batches."""
    contained(directory)
    con = _writer_connection()
    try:
        for name, (columns, _) in tables.items():
            _create(con, name, columns)

        def add(name: str, rows: Iterable[Sequence[Any]]) -> None:
            data = list(rows)
            if not data:
                return
            columns = tables[name][0]
            # Column-wise through DuckDB's scan of a dict of NumPy arrays (a C loop per column; parameter lists
            # and executemany convert value by value), each cast to its declared type.
            con.register("_batch", {c: _column(v) for (c, _), v in zip(columns, zip(*data, strict=True), strict=True)})
            select = ", ".join(f"CAST({_quote(c)} AS {t})" for c, t in columns)
            con.execute(f"INSERT INTO {_quote(name)} SELECT {select} FROM _batch")
            con.unregister("_batch")  # (after a failure the connection is closed below, with what it holds)

        yield add
        directory.mkdir(parents=True, exist_ok=True)
        for name, (_, order) in tables.items():
            _copy_sorted(con, directory, name, order)
    finally:
        con.close()


def columns(names: str | Iterable[str], types: Mapping[str, str] | None = None, **more: str) -> list[tuple[str, str]]:
    """Column declarations in order: `"a b:DOUBLE"` (or the names as a list), each VARCHAR unless its `:TYPE`,
    `types` or a keyword (a type with spaces) says otherwise; a keyword wins over `types`, both over `:TYPE`."""
    known = {**(types or {}), **more}
    out = []
    for c in names.split() if isinstance(names, str) else names:
        name, _, typed = c.partition(":")
        out.append((name, known.get(name) or typed or "VARCHAR"))
    return out


def write_table(
    directory: Path, name: str, columns: list[tuple[str, str]], order: list[str], rows: Iterable[Sequence[Any]]
) -> Path:
    """One table as Parquet (`table_writer`)."""
    with table_writer(directory, {name: (columns, order)}) as add:
        add(name, rows)
    return directory / f"{name}.parquet"


def concat_tables(
    directory: Path, name: str, columns: list[tuple[str, str]], order: list[str], parts: Sequence[Path]
) -> int:
    """One table from per-item Parquet parts of the same columns, written as `write_table` writes; the row count."""
    directory.mkdir(parents=True, exist_ok=True)
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise FabricrefError(f"{', '.join(missing)} missing: run `dvc repro` (the per-item stages write them)")
    con = _writer_connection()
    try:
        _create(con, name, columns)
        names = ", ".join(_quote(c) for c, _ in columns)
        for part in parts:  # in the order given, so ties under ORDER BY keep one order from run to run
            sys.audit("fabricref.read", str(part))
            verify_file(part)
            con.execute(f"INSERT INTO {_quote(name)} SELECT {names} FROM read_parquet({_literal(part.as_posix())})")
        count = con.execute(f"SELECT count(*) FROM {_quote(name)}").fetchone()[0]
        _copy_sorted(con, directory, name, order)
        return int(count)
    finally:
        con.close()


def remove_stale(directory: Path, keep: Iterable[str]) -> None:
    """Delete the Parquet tables (and hashes) of `directory` that the stage no longer writes."""
    names = set(keep)
    contained(directory)
    for stale in directory.glob("*.parquet"):
        if stale.stem not in names:
            stale.unlink()
            with contextlib.suppress(FileNotFoundError):
                hash_path(stale).unlink()


def table_columns(paths: dict[str, Path]) -> dict[str, list[list[str]]]:
    """Table name → [[column, DuckDB type], ...] as a view over `read_parquet` of each file binds them."""
    con = duckdb.connect(":memory:")
    try:
        found = {}
        for name, path in sorted(paths.items()):
            source = _literal(path.resolve().as_posix())
            rows = con.execute(f"DESCRIBE SELECT * FROM read_parquet({source})").fetchall()
            found[name] = [[str(r[0]), str(r[1])] for r in rows]
        return found
    finally:
        con.close()


def write_schema(directory: Path) -> Path:
    """`directory/schema.json`: every table of the directory with its columns, written after the tables. It
    changes exactly when the views must be rebuilt, so the `database` stage declares it instead of the tables."""
    paths = {p.stem: p for p in sorted(directory.glob("*.parquet"))}
    target = directory / SCHEMA_FILE
    atomic_write_json(target, {"tables": table_columns(paths)})
    return target


def table_paths(lay: Layout, *dirs: str) -> dict[str, Path]:
    """Table name → Parquet file, for the named directories (each must exist), else for every one that exists."""
    out: dict[str, Path] = {}
    for sub in dirs or TABLE_DIRS:
        if sub not in TABLE_DIRS:
            raise ValueError(f"unknown registry table directory {sub!r}; expected one of {TABLE_DIRS}")
        directory = lay.registry_dir / sub
        if not directory.is_dir():
            if not dirs and sub != "tables":
                continue
            raise FabricrefError(
                f"{lay.relative(directory)}/ is missing: run `dvc repro` (it writes the registry's tables)"
            )
        for path in sorted(directory.glob("*.parquet")):
            if path.stem in out:
                raise FabricrefError(f"two registry tables named {path.stem}: {lay.relative(out[path.stem])}, ...")
            out[path.stem] = path
    return out


class Tables:
    """An in-memory DuckDB with one view per Parquet file. It holds no copy: every query reads the files."""

    def __init__(self, paths: dict[str, Path]) -> None:
        self.paths = dict(sorted(paths.items()))
        self.con = duckdb.connect(":memory:")
        try:
            for path in self.paths.values():
                # Reads through DuckDB are invisible to Python's `open` audit event; say which file is read so
                # tests/e2e/test_stage_audit.py can compare what each stage reads with what dvc.yaml declares.
                sys.audit("fabricref.read", str(path))
                if not path.exists():
                    raise FabricrefError(f"{path} is missing: run `dvc repro`")
                verify_file(path)
            _create_views(self.con, {name: path.resolve().as_posix() for name, path in self.paths.items()})
        except BaseException:
            self.con.close()
            raise

    def rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        """Rows as dicts; values are bound parameters (`?`), never spliced into the SQL text."""
        cur = self.con.execute(sql, list(params))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def tuples(self, sql: str, *params: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
        cur = self.con.execute(sql, list(params))
        return [d[0] for d in cur.description], cur.fetchall()

    def lock_down(self, lock_configuration: bool = True, extra: Iterable[Path] = ()) -> None:
        """From now on SQL reads only the registry's Parquet files (and `extra` ones), irrevocably;
        `lock_configuration`: no other setting can change either."""
        dirs = sorted({p.resolve().parent.as_posix() + "/" for p in [*self.paths.values(), *extra]})
        self.con.execute("SET allowed_directories = ?", [dirs])
        self.con.execute("SET enable_external_access = false")
        if lock_configuration:
            self.con.execute("SET lock_configuration = true")

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Tables:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_tables(lay: Layout, *dirs: str) -> Tables:
    """Views over the Parquet tables of the named registry directories (default: every one)."""
    return Tables(table_paths(lay, *dirs))


def _views(lay: Layout) -> list[tuple[str, str]]:
    """(view name, absolute Parquet path) for every table present now."""
    return [(name, path.resolve().as_posix()) for name, path in table_paths(lay).items()]


def _guard(lay: Layout) -> str:
    """SQL that is true while the database file is opened where it was built, and raises otherwise."""
    here = sorted({os.path.abspath(lay.duckdb_path), lay.duckdb_path.resolve().as_posix()})
    message = (
        f"registry.duckdb was built at {here[0]} and has been moved or copied: its views would read that "
        "checkout's Parquet files. Rebuild it here with `dvc repro database` (or `python -m fabricref.database`)"
    )
    where = ", ".join(_literal(h) for h in here)
    return (
        f"CASE WHEN EXISTS (SELECT 1 FROM duckdb_databases() WHERE path IN ({where})) "
        f"THEN true ELSE error({_literal(message)}) END"
    )


def build_database(lay: Layout) -> Path:
    """(Re)write registry.duckdb atomically: one view per Parquet table, the derived views, the build record."""
    views = _views(lay)
    target = contained(lay.duckdb_path, lay.root)
    remove_leftovers(target.parent, ".registry.")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".registry.{os.getpid()}.", suffix=".duckdb")
        os.close(fd)
        os.unlink(tmp)  # DuckDB wants to create the file itself
    except OSError as exc:
        raise FabricrefError(f"cannot build {lay.relative(target)}: {exc.strerror}") from exc
    guard = _guard(lay)
    try:
        con = duckdb.connect(tmp)
        try:
            _create_views(con, dict(views), f" WHERE {guard}")
            bound = _bound(con)
            _check_schemas(lay, bound)
            con.execute(f"CREATE TABLE {BUILD_TABLE} (view VARCHAR, parquet_path VARCHAR)")
            for name, path in views:
                con.execute(f"INSERT INTO {BUILD_TABLE} VALUES (?, ?)", [name, path])
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.chmod(tmp, new_file_mode())
        record_hash(target, sha256_file(Path(tmp)))
        os.replace(tmp, target)
        # The stage's DVC output, written last: deterministic where the DuckDB file is not, and missing on a fresh
        # clone, so `dvc repro` builds registry.duckdb there.
        atomic_write_json(lay.registry_dir / VIEWS_FILE, {"views": _tracked(views, bound)})
    except OSError as exc:
        raise FabricrefError(f"cannot build {lay.relative(target)}: {exc.strerror or exc}") from exc
    except duckdb.Error as exc:
        raise FabricrefError(f"cannot build {lay.relative(target)}: {exc}") from exc
    finally:
        for leftover in (tmp, tmp + ".wal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
    return target


def _bound(con: duckdb.DuckDBPyConnection) -> dict[str, list[list[str]]]:
    """Every view of the file with its columns (name, DuckDB type) as DuckDB bound them."""
    bound: dict[str, list[list[str]]] = {}
    for view, column, kind in con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = current_database() AND NOT internal ORDER BY table_name, column_index"
    ).fetchall():
        bound.setdefault(view, []).append([column, kind])
    return bound


def _tracked(views: list[tuple[str, str]], bound: dict[str, list[list[str]]]) -> dict[str, list[list[str]]]:
    """The bound views over the tables DVC tracks: `registry/measurements/` is written outside DVC, so its views
    stay out of the stage's output."""
    kept = {name for name, path in views if Path(path).parent.name != "measurements"}
    kept |= {name for name, (needs, _) in DERIVED_VIEWS.items() if name in bound and set(needs) <= kept}
    return {name: columns for name, columns in bound.items() if name in kept}


def _check_schemas(lay: Layout, bound: dict[str, list[list[str]]]) -> None:
    """Every `schema.json` lists exactly the views over its directory's tables, with the columns DuckDB bound."""
    for sub in TABLE_DIRS:
        path = lay.registry_dir / sub / SCHEMA_FILE
        if not path.is_file():
            continue
        try:
            listed = json.loads(path.read_text(encoding="utf-8"))["tables"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FabricrefError(f'{lay.relative(path)}: expected {{"tables": {{...}}}} ({exc})') from exc
        present = {p.stem for p in (lay.registry_dir / sub).glob("*.parquet")}
        actual = {name: bound.get(name) for name in sorted(present)}
        if listed != actual:
            moved = sorted(n for n in set(listed) | set(actual) if listed.get(n) != actual.get(n))
            raise FabricrefError(
                f"{lay.relative(path)} does not describe the tables beside it ({', '.join(moved)}): rerun the stage "
                "that writes them (`dvc repro`)"
            )


def remove_leftovers(directory: Path, prefix: str) -> None:
    """Remove the temp files and directories (`<prefix><pid>.…`) of builds whose process is gone."""
    try:
        entries = list(directory.glob(f"{prefix}*"))
    except OSError:
        return
    for entry in entries:
        pid_text = entry.name[len(prefix) :].split(".", 1)[0]
        if not pid_text.isdigit() or process_alive(int(pid_text)):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()
