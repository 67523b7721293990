"""Read-only SQL over the registry: only statements that read are run; the connection cannot write files."""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from typing import Any

import duckdb

from .core.errors import FabricrefError, UsageError
from .core.paths import Layout
from .core.registry import open_tables

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


def run(lay: Layout, sql: str, limits: Limits | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """One read-only SELECT under a time limit (interrupted from a timer thread), a memory limit, a thread
    count and a row cap; all set before the configuration is locked, so the statement cannot raise them."""
    limits = (limits or Limits()).checked()
    tables = open_tables(lay)
    con = tables.con
    try:
        # Views over the Parquet files as they are now (never a stale copy). No other file access from SQL:
        # COPY TO, ATTACH, read_csv('/etc/...') and friends are all refused, and the setting is locked so a
        # statement cannot switch it back on.
        con.execute(f"SET memory_limit = '{limits.memory_limit.strip()}'")
        con.execute(f"SET threads = {int(limits.threads)}")
        tables.lock_down()
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
        return _execute(con, statements[0], limits)
    finally:
        con.close()


def _execute(con: Any, statement: Any, limits: Limits) -> tuple[list[str], list[tuple[Any, ...]]]:
    timer = threading.Timer(limits.timeout, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        cursor = con.execute(statement)
        columns = [d[0] for d in cursor.description] if cursor.description else []
        found = cursor.fetchmany(limits.max_rows + 1)
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
    finally:
        timer.cancel()
    if len(found) > limits.max_rows:
        raise QueryError(f"the query returns more than {limits.max_rows:,} rows; add a LIMIT or raise --max-rows")
    return columns, found


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
