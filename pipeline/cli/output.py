"""Printing for every verb: one console, JSON and table emitters, the common options."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ..core.errors import FabricrefError
from ..core.paths import Layout, layout

# markup=False: vendor text (excerpts, labels) is printed as it is, never interpreted as console markup.
out = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 200)

RootOpt = Annotated[Path | None, typer.Option("--root", help="Checkout root (default: found from the cwd).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def lay_of(root: Path | None) -> Layout:
    """The checkout a command works on (--root, or found from the cwd)."""
    return layout(root)


def strict(data: Any) -> Any:
    """JSON-ready data: NaN and ±Infinity become null (RFC 8259 has no such numbers, and `json.loads` in other
    languages refuses them), tuples become lists, anything else non-JSON its string."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {str(k): strict(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [strict(v) for v in data]
    if data is None or isinstance(data, str | int | bool):
        return data
    if isinstance(data, Decimal):  # DuckDB DECIMAL: a JSON number, as the table shows it
        return strict(float(data))
    if hasattr(data, "item") and not isinstance(data, bytes):  # numpy scalars
        return strict(data.item())
    return str(data)


def print_json(data: Any) -> None:
    """Sorted keys and a trailing newline, so JSON output is stable and diffable."""
    try:
        text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        # NaN / Infinity are not JSON: an input was out of range; say so rather than print invalid JSON.
        raise FabricrefError("the result holds a NaN or infinite number (an input is out of range)") from None
    sys.stdout.write(text + "\n")


def csv_cell(value: Any) -> Any:
    """A CSV cell: a STRUCT, MAP or LIST as compact JSON (not a Python repr), a non-finite number empty."""
    if isinstance(value, dict | list | tuple):
        return json.dumps(strict(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def emit(columns: list[str], rows: list[tuple[Any, ...]], as_json: bool, title: str | None = None) -> None:
    """Rows as a JSON list of objects, or as a table (None shown as empty)."""
    if as_json:
        # Table rows (query results): a NaN or infinite cell is data, shown as null; print_json refuses them in
        # a computed result, where they mean an input out of range.
        print_json(strict([dict(zip(columns, row, strict=True)) for row in rows]))
        return
    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    out.print(table)


def write_csv(columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """Rows as CSV with a header line (None written as an empty cell, nested values as JSON)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    sys.stdout.write(buf.getvalue())


def write_csv_batches(columns: list[str], batches: Iterable[list[tuple[Any, ...]]]) -> None:
    """`write_csv`, written batch by batch as the rows arrive (same text; one batch in memory at a time)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for batch in batches:
        writer.writerows([csv_cell(v) for v in row] for row in batch)
        sys.stdout.write(buf.getvalue())
        buf.seek(0)
        buf.truncate()
    sys.stdout.write(buf.getvalue())


# Row writers for streamed JSON: the C encoder for keys and scalar values (the indenting encoder is pure Python,
# several times slower), the indenting one only for nested values. Together they give `print_json`'s text.
_FLAT = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_NESTED = json.JSONEncoder(indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)


def _json_row(row: dict[str, Any]) -> str:
    """One row object as `json.dumps([row], indent=2, sort_keys=True)` lays it out inside the list."""
    if not row:
        return "  {}"
    items = []
    for k in sorted(row):
        v = row[k]
        text = _NESTED.encode(v).replace("\n", "\n    ") if isinstance(v, dict | list) and v else _FLAT.encode(v)
        items.append(f"    {_FLAT.encode(k)}: {text}")
    return "  {\n" + ",\n".join(items) + "\n  }"


def print_json_rows(columns: list[str], batches: Iterable[list[tuple[Any, ...]]]) -> None:
    """`emit(..., as_json=True)`, written row by row as the batches arrive: the same text as `print_json` of the
    whole list (NaN / infinity as null, as `strict` makes them)."""
    first = True
    for batch in batches:
        parts = []
        for row in batch:
            parts.append(("[\n" if first else ",\n") + _json_row(strict(dict(zip(columns, row, strict=True)))))
            first = False
        sys.stdout.write("".join(parts))
    sys.stdout.write("[]\n" if first else "\n]\n")
