"""Read-only SQL over the registry: only statements that read are run; the connection cannot write files."""

from __future__ import annotations

import contextlib
import math
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ..core.paths import Layout
from ..core.registry import open_tables
from ..errors import FabricrefError, UsageError

READING = {"SELECT", "EXPLAIN"}
_MEMORY_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)", re.IGNORECASE)


@dataclass(frozen=True)
class Limits:
    """What one `fabricref query` may use: a cross join of two billion-row ranges must stop, not eat the
    machine. Defaults suit the registry (a few MB); the CLI options raise them."""

    timeout: float = 30.0
    memory_limit: str = "1GB"
    threads: int = 2
    max_rows: int = 1_000_000

    def checked(self) -> Limits:
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise UsageError(f"--timeout {self.timeout}: expected a positive number of seconds")
        if not _MEMORY_RE.fullmatch(self.memory_limit.strip()):
            raise UsageError(f"--memory-limit {self.memory_limit!r}: expected a size such as 512MB, 2GB or 1.5GiB")
        if self.threads < 1:
            raise UsageError(f"--threads {self.threads}: expected at least 1")
        if self.max_rows < 1:
            raise UsageError(f"--max-rows {self.max_rows}: expected at least 1")
        return self


class QueryError(FabricrefError):
    """DuckDB refused the statement (syntax error, unknown table...)."""


# Rows fetched from DuckDB at a time when a result is streamed: Python holds one batch, never the whole result.
BATCH_ROWS = 10_000


def run(lay: Layout, sql: str, limits: Limits | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """One read-only SELECT under a time limit (interrupted from a timer thread), a memory limit, a thread
    count and a row cap; all set before the configuration is locked, so the statement cannot raise them.
    Every row in memory: for big results use `stream`."""
    with stream(lay, sql, limits, batch_rows=(limits or Limits()).max_rows + 1) as (columns, batches):
        return columns, [row for batch in batches for row in batch]


@contextlib.contextmanager
def stream(
    lay: Layout, sql: str, limits: Limits | None = None, batch_rows: int = BATCH_ROWS
) -> Iterator[tuple[list[str], Iterator[list[tuple[Any, ...]]]]]:
    """`run`, with the rows as batches of at most `batch_rows` fetched as they are consumed, so writing a
    270,000-row result as CSV or JSON holds one batch in Python at a time. The time limit covers the fetching
    too. A result over the row cap raises QueryError before the batch that crosses it is handed out: a result
    under one batch is refused before anything is printed; a bigger one after the rows below the cap."""
    limits = (limits or Limits()).checked()
    tables = open_tables(lay)
    con = tables.con
    timer: threading.Timer | None = None
    try:
        statement = _statement(con, tables, sql, limits, lay)
        timer = threading.Timer(limits.timeout, con.interrupt)
        timer.daemon = True
        timer.start()
        with _reported(limits):
            cursor = con.execute(statement)
        columns = [d[0] for d in cursor.description] if cursor.description else []

        def batches() -> Iterator[list[tuple[Any, ...]]]:
            seen = 0
            while True:
                with _reported(limits):
                    batch = cursor.fetchmany(batch_rows)
                if not batch:
                    return
                seen += len(batch)
                if seen > limits.max_rows:
                    raise QueryError(
                        f"the query returns more than {limits.max_rows:,} rows; add a LIMIT or raise --max-rows"
                    )
                yield batch

        yield columns, batches()
    finally:
        if timer is not None:
            timer.cancel()
        con.close()


def plan_files(lay: Layout) -> list[Path]:
    """The Parquet files of `fabricref plan` (one per search) under the checkout's plans/ folder."""
    folder = lay.plans_dir
    return sorted(folder.glob("*.parquet")) if folder.is_dir() else []


def _plans_view(con: Any, tables: Any, lay: Layout, sql: str) -> list[Path]:
    """The `plans` view over every plan file, columns matched by name (training and serving plans differ); the
    files it reads, so the lock-down allows their folder. No plans: no view (a query naming it says so). An
    unreadable plan file stops only a query that names `plans`."""
    files = plan_files(lay)
    if not files or "plans" in tables.paths:
        return []
    for path in files:
        sys.audit("fabricref.read", str(path))
    sources = ", ".join("'" + p.resolve().as_posix().replace("'", "''") + "'" for p in files)
    try:
        con.execute(f"CREATE VIEW plans AS SELECT * FROM read_parquet([{sources}], union_by_name = true)")
    except duckdb.Error as exc:
        if re.search(r"\bplans\b", sql, re.IGNORECASE):
            raise QueryError(
                f"{lay.relative(lay.plans_dir)}/ holds a file DuckDB cannot read ({exc}); delete it or rerun its "
                "`fabricref plan`"
            ) from None
        return []
    return files


def _statement(con: Any, tables: Any, sql: str, limits: Limits, lay: Layout) -> Any:
    """The one reading statement of `sql`, with the connection limited and locked down first."""
    # Views over the Parquet files as they are now (never a stale copy). No other file access from SQL:
    # COPY TO, ATTACH, read_csv('/etc/...') and friends are all refused, and the setting is locked so a
    # statement cannot switch it back on.
    con.execute(f"SET memory_limit = '{limits.memory_limit.strip()}'")
    con.execute(f"SET threads = {int(limits.threads)}")
    # An in-memory DuckDB offloads to ./.tmp once the memory limit is reached, unbounded: a query stops at the
    # limit instead of filling the disk of whoever runs it (one cross join wrote 63 GB).
    con.execute("SET temp_directory = ''")
    tables.lock_down(_plans_view(con, tables, lay, sql))
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"SQL error: {exc}") from None
    if not statements:
        raise UsageError("empty SQL: expected a SELECT statement")
    for statement in statements:
        kind = statement.type.name
        if kind not in READING:
            raise QueryError(
                f"refused: {kind} statement; the registry is opened read-only and `fabricref query` runs only "
                "SELECT (rebuild the registry with `dvc repro` instead of writing to it)"
            )
    if len(statements) > 1:
        raise UsageError(
            f"{len(statements)} statements given; `fabricref query` runs exactly one SELECT "
            "(run them one at a time, or join them into one query)"
        )
    return statements[0]


@contextlib.contextmanager
def _reported(limits: Limits) -> Iterator[None]:
    """DuckDB's interruption, memory and SQL errors as QueryErrors naming the option to change."""
    try:
        yield
    except duckdb.InterruptException:
        raise QueryError(
            f"query stopped after {limits.timeout:g} s (the time limit); raise it with --timeout SECONDS"
        ) from None
    except duckdb.OutOfMemoryException:
        raise QueryError(
            f"query needs more than the memory limit of {limits.memory_limit}; raise it with --memory-limit "
            "(e.g. --memory-limit 4GB) or narrow the query"
        ) from None
    except duckdb.Error as exc:
        raise QueryError(f"SQL error: {exc}") from None


def rows(lay: Layout, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """One library-owned SELECT with bound parameters (values are never spliced into SQL text)."""
    with open_tables(lay) as tables:
        return tables.tuples(sql, *(params or []))


def reference_summaries(lay: Layout) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Every reference: id, kind, form factor (server, rack, cluster, switch, nic), title and how many of its
    fields have each status."""
    return rows(
        lay,
        """
        SELECT r.reference_id, r.kind, r.form_factor, r.title,
               count(*) FILTER (WHERE f.status = 'published') AS published,
               count(*) FILTER (WHERE f.status = 'preliminary') AS preliminary,
               count(*) FILTER (WHERE f.status = 'derived') AS derived,
               count(*) FILTER (WHERE f.status = 'unknown') AS unknown
        FROM reference_models r JOIN fields f USING (reference_id)
        GROUP BY ALL ORDER BY r.reference_id""",
    )


def reference_fields(lay: Layout, reference_id: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """One reference's fields with the sources they cite (or their formula, or why they are unknown)."""
    return rows(
        lay,
        """
        SELECT f.field, f.value_number, f.value_text, f.unit, f.direction, f.status,
               coalesce(c.sources, f.formula, f.reason) AS source
        FROM fields f LEFT JOIN (
            SELECT reference_id, field,
                   string_agg(source_id || ' (' || origin || ')', ', ' ORDER BY source_id) AS sources
            FROM field_citations GROUP BY ALL) c USING (reference_id, field)
        WHERE f.reference_id = ?
        ORDER BY f.field""",
        [reference_id],
    )
