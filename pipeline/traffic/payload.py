"""An item's result as the item cache stores it: its tables column by column, the large columns as raw arrays.

Why: a cached run read every item back as JSON (~16 MB, most of it the ~100,000 rows of traffic_links) and
rebuilt the columns from the rows before writing the tables; a binary column is read back in a fraction of that,
straight into what `write_columns` takes. What comes back is exactly what the item computed, so the tables are
the same bytes as when the rows went through JSON:

- a text column as its distinct values (JSON) and one int32 code per row (a `columns.Coded` column);
- a DOUBLE column whose values are all floats as little-endian float64 (NaN stored as Python's one NaN, as
  JSON gave it back), an INTEGER / BIGINT column whose values are all ints within int64 as int64;
- any other column (NULLs among numbers, nested values, a bool, an int in a DOUBLE column) as the JSON list of
  its values, as before.

The payload is one JSON line (the tables' layout, the small values, the metrics), then the arrays' bytes. It is
only ever read back from an entry whose key and digest matched (pipeline/core/keyed.py).

Imports no estimating code: the parent decodes cached items without it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.columns import Coded, plain

_INT64 = (-(2**63), 2**63 - 1)
_DTYPES = {"float64": "<f8", "int64": "<i8", "int32": "<i4"}


class _Blob:
    """The arrays of one payload, appended in order; each referred to by (kind, offset, count)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, kind: str, array: np.ndarray) -> list[Any]:
        data = array.astype(_DTYPES[kind], copy=False).tobytes()
        ref = [kind, self.size, len(array)]
        self.parts.append(data)
        self.size += len(data)
        return ref


def _encode_column(values: list[Any], sql_type: str, blob: _Blob) -> dict[str, Any]:
    types = set(map(type, values))
    if sql_type == "VARCHAR" and types <= {str, type(None)}:
        distinct = list(dict.fromkeys(values))
        index = {v: i for i, v in enumerate(distinct)}
        return {"values": distinct, "codes": blob.add("int32", np.fromiter(map(index.__getitem__, values), np.int64))}
    if sql_type == "DOUBLE" and types <= {float}:
        array = np.array(values, dtype=np.float64)
        array[np.isnan(array)] = math.nan  # one NaN, as JSON read it back
        return {"array": blob.add("float64", array)}
    if (
        sql_type in ("INTEGER", "BIGINT")
        and types <= {int}
        and _INT64[0] <= min(values, default=0) <= max(values, default=0) <= _INT64[1]
    ):
        return {"array": blob.add("int64", np.array(values, dtype=np.int64))}
    return {"list": values}


def encode(tables: dict[str, tuple[list[tuple[str, str]], list[tuple]]], extra: dict[str, Any]) -> bytes:
    """`tables`: name → (columns, rows); `extra`: anything else of the item's result (JSON-able: the metrics)."""
    blob = _Blob()
    layout = {}
    for name, (columns, rows) in tables.items():
        series = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
        layout[name] = {
            "rows": len(rows),
            "columns": [_encode_column(list(s), t, blob) for (_, t), s in zip(columns, series, strict=True)],
        }
    head = json.dumps({"tables": layout, "extra": extra}, separators=(",", ":"), allow_nan=True).encode()
    return head + b"\n" + b"".join(blob.parts)


@dataclass
class Decoded:
    """An item's result read back: each table's columns (a list, a `Coded` column or a NumPy array each), and the
    rest (`extra`)."""

    tables: dict[str, list[Any]]
    rows: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)


def decode(payload: bytes) -> Decoded:
    """The tables and the rest of an `encode`d result; the arrays are read-only views of `payload`'s bytes."""
    end = payload.index(b"\n")
    data = json.loads(payload[:end])
    blob = memoryview(payload)[end + 1 :]

    def array(ref: list[Any]) -> np.ndarray:
        kind, offset, count = ref
        return np.frombuffer(blob, dtype=_DTYPES[kind], count=count, offset=offset)

    tables: dict[str, list[Any]] = {}
    rows: dict[str, int] = {}
    for name, layout in data["tables"].items():
        cols: list[Any] = []
        for enc in layout["columns"]:
            if "list" in enc:
                cols.append(enc["list"])
            elif "codes" in enc:
                cols.append(Coded(enc["values"], array(enc["codes"])))
            else:
                cols.append(array(enc["array"]))
        tables[name] = cols
        rows[name] = layout["rows"]
    return Decoded(tables, rows, data["extra"])


def concat(parts: list[Any]) -> Any:
    """One column from the same column of several items, in their order: the values the rows would give, in the
    cheapest form they all share (arrays of one dtype: an array; all coded: one `Coded`; else a list)."""
    if parts and all(isinstance(p, np.ndarray) for p in parts) and len({p.dtype for p in parts}) == 1:
        return np.concatenate(parts)
    if parts and all(isinstance(p, Coded) for p in parts):
        index: dict[Any, int] = {}
        codes = []
        for p in parts:
            remap = np.array([index.setdefault(v, len(index)) for v in p.values], dtype=np.int64)
            codes.append(remap[p.codes] if len(p.codes) else np.zeros(0, dtype=np.int64))
        return Coded(list(index), np.concatenate(codes))
    out: list[Any] = []
    for p in parts:
        out += plain(p)
    return out
