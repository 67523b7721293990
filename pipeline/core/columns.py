"""Rows into a DuckDB table fast: typed NumPy columns scanned by DuckDB instead of Python lists as parameters.

Passing 300,000 rows as `unnest(?::T[])` parameters converts every value through DuckDB's Python value path
(seconds per table); a dict of NumPy arrays is scanned column-wise in a fraction of that. The table that comes
out holds the same values, so its Parquet export is the same bytes. Columns whose values do not fit a NumPy
type exactly (nested types, mixed Python types, integers beyond int64) are refused here and the caller keeps
its slow, general path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import numpy as np

_NUMERIC = {
    "INTEGER": np.int64,
    "BIGINT": np.int64,
    "DOUBLE": np.float64,
    "BOOLEAN": np.bool_,
}
# Python types each column type carries exactly (bool is an int subclass: never taken for a number here).
_INTS = {int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32}
_ALLOWED = {
    "INTEGER": _INTS,
    "BIGINT": _INTS,
    "DOUBLE": {float, np.float64, np.float32, *_INTS},
    "BOOLEAN": {bool, np.bool_},
}


def _column(values: Sequence[Any], sql_type: str) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(values, null mask or None) as NumPy arrays, or None when the column cannot be carried exactly."""
    types = set(map(type, values))
    has_null = type(None) in types
    types.discard(type(None))
    nulls = np.fromiter((v is None for v in values), dtype=np.bool_, count=len(values)) if has_null else None
    if sql_type == "VARCHAR":
        if not types <= {str}:
            return None
        return np.array(["" if v is None else v for v in values] if has_null else values, dtype=object), nulls
    kind = _NUMERIC.get(sql_type)
    if kind is None or not types <= _ALLOWED[sql_type]:
        return None
    fill: Any = False if kind is np.bool_ else 0
    try:
        array = np.array([fill if v is None else v for v in values] if has_null else values, dtype=kind)
    except OverflowError:
        return None
    return array, nulls


def insert_columns(
    con: duckdb.DuckDBPyConnection, table: str, columns: list[tuple[str, str]], series: list[list[Any]]
) -> bool:
    """INSERT the column lists into TABLE through NumPy arrays; False (nothing inserted) if a column does not fit."""
    arrays: dict[str, np.ndarray] = {}
    select = []
    for i, ((_, sql_type), values) in enumerate(zip(columns, series, strict=True)):
        carried = _column(values, sql_type)
        if carried is None:
            return False
        array, mask = carried
        arrays[f"c{i}"] = array
        expr = f"c{i}::{sql_type}"
        if mask is not None:
            arrays[f"n{i}"] = mask
            expr = f"CASE WHEN n{i} THEN NULL ELSE {expr} END"
        select.append(expr)
    name = "_fabricref_columns"
    con.register(name, arrays)
    try:
        con.execute(f'INSERT INTO "{table}" SELECT {", ".join(select)} FROM {name}')
    finally:
        con.unregister(name)
    return True
