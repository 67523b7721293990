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
