"""Rows into a DuckDB table fast: typed NumPy columns scanned by DuckDB instead of Python lists as parameters.

Passing 300,000 rows as `unnest(?::T[])` parameters converts every value through DuckDB's Python value path
(seconds per table); a dict of NumPy arrays is scanned column-wise in a fraction of that. The table that comes
out holds the same values, so its Parquet export is the same bytes. Columns whose values do not fit a NumPy
type exactly (nested types, mixed Python types, integers beyond int64) are refused here and the caller keeps
its slow, general path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Coded:
    """A column given as `values[codes[i]]` for row i: a table whose text repeats (a topology's id per edge, a
    node's name at each of its edges, a link class's attributes per link) is carried as its few distinct values
    and one number per row. The values are checked and converted once, and the rows picked out by NumPy, so
    the table holds exactly what the full list `expand()` gives (the same Parquet bytes)."""

    values: Sequence[Any]
    codes: np.ndarray  # integer indices into `values`

    def __len__(self) -> int:
        return len(self.codes)

    def expand(self) -> list[Any]:
        return list(map(self.values.__getitem__, self.codes.tolist()))


def plain(series: Sequence[Any]) -> list[Any]:
    """A column as a list of Python values, whatever form it was given in (list, `Coded`, NumPy array)."""
    if isinstance(series, Coded):
        return series.expand()
    if isinstance(series, np.ndarray):
        return series.tolist()
    return list(series)


def _column(values: Sequence[Any], sql_type: str) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(values, null mask or None) as NumPy arrays, or None when the column cannot be carried exactly."""
    if isinstance(values, Coded):
        carried = _column(values.values, sql_type)
        if carried is None:
            return None
        array, nulls = carried
        return array[values.codes], None if nulls is None else nulls[values.codes]
    if isinstance(values, np.ndarray) and values.dtype != object:
        kind = _NUMERIC.get(sql_type)
        return (values, None) if kind is not None and values.dtype == kind else None
    types = set(map(type, values))
    has_null = type(None) in types
    types.discard(type(None))
    kind = _NUMERIC.get(sql_type)
    if not types <= ({str} if sql_type == "VARCHAR" else _ALLOWED.get(sql_type, set())) or not (
        kind or sql_type == "VARCHAR"
    ):
        return None
    # `np.fromiter`, not `np.array`: the same 1-D array, without `np.array`'s look into every value for nested
    # sequences (2-3x slower on 10^5 values).
    if not has_null:
        try:
            return np.fromiter(values, dtype=kind or object, count=len(values)), None
        except OverflowError:
            return None
    # With nulls: the values as objects, the nulls found and filled in one vectorised pass each (no Python loop;
    # `==` against None is False for every value of these types but None itself).
    objects = np.fromiter(values, dtype=object, count=len(values))
    nulls = objects == None  # noqa: E711 (element-wise, not an identity test)
    objects[nulls] = "" if kind is None else (False if kind is np.bool_ else 0)
    if kind is None:
        return objects, nulls
    try:
        return objects.astype(kind), nulls
    except OverflowError:
        return None


def insert_columns(
    con: duckdb.DuckDBPyConnection, table: str, columns: list[tuple[str, str]], series: list[Sequence[Any]]
) -> bool:
    """INSERT the columns into TABLE through NumPy arrays; False (nothing inserted) if a column does not fit.
    A column is a list of values, a `Coded` column or a NumPy array of the column's own type (int64 for
    INTEGER and BIGINT, float64 for DOUBLE, bool for BOOLEAN)."""
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
