"""Read-only SQL over the registry: only statements that read are run; the connection cannot write files."""

from __future__ import annotations

from typing import Any

import duckdb

from .compile.registry import ensure_database
from .core.errors import FabricrefError, UsageError
from .core.paths import Layout

READING = {"SELECT", "EXPLAIN"}


class QueryError(FabricrefError):
    """DuckDB refused the statement (syntax error, unknown table...)."""


def run(lay: Layout, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    con = duckdb.connect(str(ensure_database(lay)), read_only=True)
    try:
        # No file access from SQL: COPY TO, ATTACH, read_csv('/etc/...') and friends are all refused,
        # and the setting is locked so a statement cannot switch it back on.
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
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
        try:
            cursor = None
            for statement in statements:
                cursor = con.execute(statement)
            assert cursor is not None
            columns = [d[0] for d in cursor.description] if cursor.description else []
            return columns, cursor.fetchall()
        except duckdb.Error as exc:
            raise QueryError(f"SQL error: {exc}") from None
    finally:
        con.close()


def rows(lay: Layout, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """One library-owned SELECT with bound parameters (values are never spliced into SQL text)."""
    con = duckdb.connect(str(ensure_database(lay)), read_only=True)
    try:
        cursor = con.execute(sql, params or [])
        return [d[0] for d in cursor.description], cursor.fetchall()
    finally:
        con.close()


def reference_summaries(lay: Layout) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Every reference: id, kind, title and how many of its fields have each status."""
    return rows(
        lay,
        """
        SELECT r.reference_id, r.kind, r.title,
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
