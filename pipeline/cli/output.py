"""Printing for every verb: one console, JSON and table emitters, the common options."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import stat
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Column, Table

from ..core.files import new_file_mode
from ..core.format import MISSING, format_exact, format_quantity
from ..core.paths import Layout, layout, settle
from ..core.text import json_ascii, json_safe, visible
from ..errors import FabricrefError, UsageError


class _TextConsole(Console):
    """A console that makes control characters visible (`␛` for ESC) in every string it prints: text from
    documents, logs and users is data, never terminal commands."""

    def render_str(self, text: str, **kwargs: Any) -> Any:
        return super().render_str(visible(text), **kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """Text wraps between words; a word longer than the line (a path, a SHA-256) stays whole on a line of its
        own, so it can be copied or searched for."""
        if objects and all(isinstance(o, str) for o in objects) and "soft_wrap" not in kwargs:
            text = kwargs.pop("sep", " ").join(objects)
            width = self.width
            lines = [
                textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False) or line
                for line in text.split("\n")
            ]
            objects, kwargs["soft_wrap"] = ("\n".join(lines),), True
        super().print(*objects, **kwargs)


# markup=False: vendor text (excerpts, labels) is printed as it is, never interpreted as console markup.
out = _TextConsole(highlight=False, markup=False, width=None if sys.stdout.isatty() else 200)


def encodes_unicode(stream: Any) -> bool:
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    return encoding.startswith("utf")


def safe_streams() -> None:
    """Streams in an encoding that cannot hold every character (LC_ALL=en_US.ISO-8859-1) write backslash escapes
    instead of failing; JSON output is then pure ASCII (JSON's own escapes, so the data is exact)."""
    for stream in (sys.stdout, sys.stderr):
        if not encodes_unicode(stream) and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def set_width() -> None:
    """COLUMNS when set, else the terminal's width, else 200 (redirected output is not wrapped at 80)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        out.width = int(columns)
    elif sys.stdout.isatty():
        out.width = os.get_terminal_size(sys.stdout.fileno()).columns if hasattr(sys.stdout, "fileno") else 80
    else:
        out.width = 200


def make_table(
    *columns: str, keys: int = 1, title: str | None = None, rows: list[list[Any]] | None = None, exact: bool = False
) -> Any:
    """Rows as a table whose first `keys` columns are identifiers, never cut to an ellipsis: whole when they fit,
    else folded; when even the narrowest layout is too wide, each row becomes a block of `column  value` lines.
    The layout is chosen at print time, for that console's width. `exact`: floats with the digits their record
    holds (`format_exact`) instead of an estimate's three."""
    if exact:
        rows = [[format_exact(float(v)) if isinstance(v, float | Decimal) else v for v in r] for r in rows or []]
    return _KeyedTable(columns, keys, title, rows or [])


def records_table(columns: dict[str, Callable[[Any], Any]], records: Iterable[Any], **options: Any) -> Any:
    """`make_table` of records, each column given as its header and the function that makes its cell."""
    return make_table(*columns, rows=[[shown(r) for shown in columns.values()] for r in records], **options)


class _KeyedTable:
    def __init__(self, columns: tuple[str, ...], keys: int, title: str | None, rows: list[list[Any]]) -> None:
        self.columns, self.keys, self.title, self.rows = columns, keys, title, rows

    def __rich_console__(self, console: Console, options: Any) -> Any:
        yield self._layout(console, options.max_width)

    def _layout(self, console: Console, width: int) -> Any:
        from rich.measure import Measurement

        columns, keys, title, rows = self.columns, self.keys, self.title, self.rows
        # Borders and padding take 3 characters per column; the key columns stay whole when the others keep at
        # least 8 characters each beside them.
        room = width - 3 * len(columns) - 1 - 8 * (len(columns) - keys)
        longest = [max([len(c), *(len(str(r[i])) for r in rows if r[i] is not None)]) for i, c in enumerate(columns)]
        whole = sum(longest[:keys]) <= room
        # A key that cannot stay whole folds, but never into slivers: at least a third of the width (or 8).
        key_width = [longest[i] if whole else min(longest[i], max(8, width // 3)) for i in range(keys)]
        t = Table(title=title)
        for i, name in enumerate(columns):
            if i < keys:
                t.add_column(name, overflow="fold", no_wrap=whole, min_width=key_width[i])
            else:
                t.add_column(name, overflow="fold")
        for r in rows:
            t.add_row(*(cell(v) for v in r))
        # Measured unbounded: rich clamps a measurement to the width it is given, hiding that the table cannot fit.
        # Folded key columns need only their minimum width, whatever their longest word; the rest must fit.
        unbounded = console.options.update(width=10**6)
        if whole:
            narrowest = Measurement.get(console, unbounded, t).minimum
        else:
            others = Table(*columns[keys:])
            for r in rows:
                others.add_row(*(cell(v) for v in r[keys:]))
            narrowest = Measurement.get(console, unbounded, others).minimum + sum(w + 3 for w in key_width)
        if narrowest <= width or len(columns) <= 2:
            return t
        records = Table(Column("column", overflow="fold"), Column("value", overflow="fold"), title=title)
        for r in rows:
            for i, (name, v) in enumerate(zip(columns, r, strict=True)):
                records.add_row(name, cell(v), end_section=i == len(columns) - 1)
        return records


def cell(value: Any) -> Any:
    """A table cell: None `—`, a number through core/format (whole numbers under 10,000, a year or a revision, as
    they are), a dict a key-value sub-table, a list of dicts a sub-table with their keys as columns, a list of
    scalars one item per line; anything else its text."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value) if abs(value) < 10_000 else format_quantity(value)
    if isinstance(value, float | Decimal):
        return format_quantity(float(value))
    if isinstance(value, dict):
        if not value:
            return ""
        folded = (Column(overflow="fold"), Column(overflow="fold"))
        sub = Table(*folded, show_header=False, box=None, pad_edge=False, padding=(0, 1, 0, 0))
        for k, v in value.items():
            sub.add_row(str(k), cell(v))
        return sub
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, dict) for v in value):
            names = list(dict.fromkeys(k for v in value for k in v))
            sub = Table(*names, box=None, pad_edge=False, padding=(0, 1, 0, 0))
            for v in value:
                sub.add_row(*(cell(v.get(k)) for k in names))
            return sub
        if any(isinstance(v, dict | list | tuple) for v in value):
            sub = Table(Column(overflow="fold"), show_header=False, box=None, pad_edge=False, padding=(0, 0, 0, 0))
            for v in value:
                sub.add_row(cell(v))
            return sub
        return "\n".join(str(cell(v)) for v in value)
    return str(value)  # made visible as it is printed (_TextConsole)


def unit_of_key(key: str) -> str | None:
    """The unit a result's number carries by its key's name; None for counts, fractions and labels."""
    if key == "seconds" or key.endswith("_seconds"):
        return "s"
    if key.endswith("_gb_per_s"):
        return "GB/s"
    if key.endswith("_gbps"):
        return "Gb/s"
    if key == "bytes" or key.startswith("bytes_") or key.endswith("_bytes"):
        return "B"
    if key.startswith("tflops"):
        return "TFLOP/s"
    if key.startswith("flops"):
        return "FLOP"
    return None


# Fields of a network: their byte rates get the bit rate beside them, the family the links are stated in.
NETWORK_FIELDS = ("scale_up.", "scale_out.", "frontend.", "host")


def in_bits(row: dict[str, Any]) -> str | None:
    """A network field stated as a byte rate (NVLink's 1.8 TB/s) in the bit rates its neighbours are stated in
    ('14.4 Tb/s'), at its record's digits; None for any other field."""
    unit, number = row.get("unit") or "", row.get("value_number")
    if number is None or not unit.endswith("B/s") or unit.endswith("iB/s"):
        return None
    if not str(row.get("field", "")).startswith(NETWORK_FIELDS):
        return None
    digits = max(int(row.get("digits") or 0), 3)  # × 8 is exact: at least the formatter's own three digits
    return format_quantity(number * 8, unit.removesuffix("B/s") + "b/s", row.get("direction"), digits)


def readable(value: Any, key: str = "", direction: str | None = None) -> Any:
    """A result's value for a table: numbers with the unit their key names (a rate with `direction`), `—` for
    none, yes / no for a flag; dicts and lists keep their shape, their numbers made readable the same way."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return {k: readable(v, str(k), direction) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [readable(v, key, direction) for v in value]
    if isinstance(value, int | float):
        unit = unit_of_key(key)
        return format_quantity(value, unit, direction if unit and unit.endswith("/s") else None)
    return value


RootOpt = Annotated[Path | None, typer.Option("--root", help="Checkout root (default: found from the cwd).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def lay_of(root: Path | None) -> Layout:
    """The checkout a command works on (--root, or found from the cwd), settled for the rest of the command."""
    return settle(layout(root))


def strict(data: Any) -> Any:
    """JSON-ready data: NaN and ±Infinity null (RFC 8259 has no such numbers), tuples lists, other objects their
    string."""
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


def _write_json(text: str) -> None:
    text = json_safe(text)
    sys.stdout.write(text if encodes_unicode(sys.stdout) else json_ascii(text))


def print_json(data: Any) -> None:
    """Keys in the order of the result (and its table), and a trailing newline."""
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        # NaN / Infinity are not JSON: an input was out of range; say so rather than print invalid JSON.
        raise FabricrefError("the result holds a NaN or infinite number (an input is out of range)") from None
    _write_json(text + "\n")


def csv_cell(value: Any) -> Any:
    """A CSV cell: a STRUCT, MAP or LIST as compact JSON, a non-finite number empty, text made visible."""
    if isinstance(value, dict | list | tuple):
        return json.dumps(strict(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return visible(value)
    return value


def emit(columns: list[str], rows: list[tuple[Any, ...]], as_json: bool, title: str | None = None) -> None:
    """Rows as a JSON list of objects, or as a table (None shown as empty)."""
    if as_json:
        # Table rows (query results): a NaN or infinite cell is data, shown as null; print_json refuses them in
        # a computed result, where they mean an input out of range.
        print_json(strict([dict(zip(columns, row, strict=True)) for row in rows]))
        return
    out.print(make_table(*columns, title=title, rows=[list(r) for r in rows], exact=True))


def write_csv_batches(columns: list[str], batches: Iterable[list[tuple[Any, ...]]]) -> None:
    """Rows as CSV with a header line, written batch by batch as they arrive (the same text whatever the
    batches)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    try:
        for batch in batches:
            writer.writerows([csv_cell(v) for v in row] for row in batch)
            sys.stdout.write(buf.getvalue())
            buf.seek(0)
            buf.truncate()
    except FabricrefError as exc:  # rows written cannot be taken back: the last line says they are not all
        writer.writerow([f"# error: incomplete result: {exc}"])
        sys.stdout.write(buf.getvalue())
        raise
    sys.stdout.write(buf.getvalue())


def print_json_rows(columns: list[str], batches: Iterable[list[tuple[Any, ...]]]) -> None:
    """`emit(..., as_json=True)` written batch by batch as they arrive: the same text as for the whole list."""
    opening = "[\n"
    try:
        for batch in batches:
            parts = []
            for row in batch:
                record = json.dumps(strict(dict(zip(columns, row, strict=True))), indent=2, ensure_ascii=False)
                parts.append(f"{opening}  " + record.replace("\n", "\n  "))  # as it stands inside the list
                opening = ",\n"
            _write_json("".join(parts))
    except FabricrefError as exc:  # still valid JSON: its last record says the rows are not all
        error = json.dumps(f"incomplete result: {exc}", ensure_ascii=False)
        _write_json(f'{opening}  {{"error": {error}, "complete": false}}\n]\n')
        raise
    sys.stdout.write("[]\n" if opening == "[\n" else "\n]\n")


def output_path(path: Path, option: str = "--output") -> Path:
    """A file the user names to write (`--output PATH`, `--plot PATH`) must be new or a regular file: the rename
    that puts the output in place would replace a device (`/dev/full`, run as root), a FIFO, a socket or a symbolic
    link with a plain file. UsageError otherwise, before anything is written."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return path  # absent (or its directory is): the write names why it cannot be made
    if not stat.S_ISREG(mode):
        kind = {stat.S_IFDIR: "a directory", stat.S_IFLNK: "a symbolic link"}.get(
            stat.S_IFMT(mode), "a device, FIFO or socket"
        )
        raise UsageError(f"{option} {visible(str(path))}: is {kind}; expected a new file or a regular file to replace")
    return path


@contextlib.contextmanager
def written_whole(path: Path | None) -> Iterator[None]:
    """stdout as it is (None), or sent to a temporary file beside `path` that replaces it once the block
    completes: an error midway leaves no half file."""
    if path is None:
        yield
        return
    output_path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise FabricrefError(f"--output {path}: cannot write there ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            os.fchmod(fd, new_file_mode())
            with contextlib.redirect_stdout(handle):
                yield
            handle.flush()
            os.fsync(fd)
        os.replace(tmp, path)
    except OSError as exc:
        raise FabricrefError(f"--output {path}: cannot write there ({exc.strerror})") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
