"""Reading the standard stdout of nccl-tests / rccl-tests (all_reduce_perf and friends).

The format: `#` header lines (the test's parameters, `# Using devices` then one `#  Rank N ... device D [bus]
NAME` line per rank, the column header `size count type redop root time algbw busbw #wrong` for out-of-place then
in-place), one row per size, and a `# Avg bus bandwidth` footer. Every row is checked against the header and
against nccl-tests' own definitions (algbw = S / t; busbw = algbw × the operation's bus factor), so a truncated
line, a shifted column, a non-numeric cell or a log of another operation than declared is refused with its line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..core.text import NOT_IN_A_LINE_RE, named
from ..errors import ValidationError
from .collectives import OPS, bus_factor

# nccl-tests binary name → the operation as this project names it.
TESTS = {
    "all_reduce_perf": "all-reduce",
    "reduce_scatter_perf": "reduce-scatter",
    "all_gather_perf": "all-gather",
    "alltoall_perf": "all-to-all",
    "broadcast_perf": "broadcast",
    "reduce_perf": "reduce",
    "sendrecv_perf": "send",
}
REDUCING = {"all-reduce", "reduce-scatter", "reduce"}
REDOPS = {"sum", "prod", "max", "min", "avg", "premulsum"}
# The data types nccl-tests prints (src/common.cu test_typenames), and `none` of the tests that do not reduce.
DTYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"}
DTYPES |= {"f8e4m3", "f8e5m2", "fp8_e4m3", "fp8_e5m2"}
PLACEMENTS = ("out-of-place", "in-place")
RANK_RE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$"
)
TEST_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
# Numbers as nccl-tests prints them, ASCII only: int() and float() also take `²`, `٣`, `1_000`, `nan`, `inf`.
WHOLE_RE = re.compile(r"-?[0-9]+", re.ASCII)
DECIMAL_RE = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?", re.ASCII)
# What one run prints: a few dozen sizes, two placements each. Beyond these it is not one run's stdout.
MAX_ROWS = 10_000
MAX_WHOLE = 2**53  # sizes and counts (bytes, elements): a BIGINT, and exact as a float


@dataclass(frozen=True)
class Row:
    line: int
    bytes: int
    count: int
    dtype: str
    redop: str
    root: int
    placement: str
    time_us: float
    algbw_gb_per_s: float
    busbw_gb_per_s: float
    wrong: int | None


@dataclass
class Log:
    op: str
    ranks: int
    devices: list[tuple[int, str, int, str]]  # (rank, host, device, name)
    rows: list[Row] = field(default_factory=list)
    footer: bool = False

    @property
    def hosts(self) -> int:
        return len({d[1] for d in self.devices})


class LogError(ValidationError):
    """A line of a measured log that cannot be read as nccl-tests output."""


def _fail(where: str, line: int, message: str) -> LogError:
    return LogError(f"{where}:{line}: {message}")


def parse_text(text: str, where: str, declared_op: str | None = None) -> Log:
    """Parse one log; `declared_op` (the importer's --op) must match what the log shows. Text of printable
    lines, or refused naming the line and column of the first character that is not."""
    # nccl-tests writes none of what no line of text holds: a NUL (a truncated or binary file), an escape, a
    # line break other than LF or CRLF (str.splitlines would split there, shifting every later line number), an
    # invisible character (in a host name, one host becomes two). A byte-order mark opening the file is an
    # editor's, and is dropped.
    text = text.removeprefix("\ufeff")
    unified = text.replace("\r\n", "\n")
    found = NOT_IN_A_LINE_RE.search(unified)
    if found:
        at = found.start()
        line, column = unified.count("\n", 0, at) + 1, at - unified.rfind("\n", 0, at)
        raise _fail(
            where,
            line,
            f"column {column} holds {named(found.group())}: not text as nccl-tests writes it (a binary or "
            "truncated file?); expected its output as printed",
        )
    if declared_op is not None and declared_op not in OPS:
        raise ValidationError(f"unknown operation {declared_op!r}: expected one of {', '.join(OPS)}")
    devices: list[tuple[int, str, int, str]] = []
    rank_lines: dict[int, int] = {}
    columns: list[str] | None = None
    header_line = 0
    named_op: tuple[str, int] | None = None
    rows: list[Row] = []
    seen: dict[tuple[object, ...], int] = {}
    footer = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if m := TEST_RE.match(line):
                test = m.group(1)
                if test not in TESTS:
                    raise _fail(where, number, f"unknown test {test!r}: expected one of {', '.join(TESTS)}")
                if named_op is not None:
                    raise _concatenated(where, number, "a second `# Collective test starting:` line", named_op[1])
                named_op = (TESTS[test], number)
            elif m := RANK_RE.match(line):
                if columns is not None:
                    raise _concatenated(where, number, "a `#  Rank` line after the column header", header_line)
                rank = int(m.group(1))
                if rank in rank_lines:
                    first = rank_lines[rank]
                    raise _fail(where, number, f"rank {rank} is listed twice (line {first} and here): one per rank")
                rank_lines[rank] = number
                devices.append((rank, m.group(2), int(m.group(3)), m.group(4)))
            elif re.match(r"^#\s+size\s+count\s+type\b", line):
                if columns is not None:
                    raise _concatenated(where, number, "a second column header", header_line)
                columns = line.lstrip("#").split()
                header_line = number
                _check_header(where, number, columns)
            elif "Avg bus bandwidth" in line:
                footer = True
            continue
        if columns is None:
            if rows or devices:
                raise _fail(where, number, "a row before the column header (`#  size  count  type ...`)")
            continue  # banner lines before the header (NCCL version, MPI noise)
        if line.startswith("NCCL") or line.startswith("["):
            continue
        if footer:
            raise _concatenated(where, number, "a result row after the `# Avg bus bandwidth` footer", header_line)
        for row in _row(where, number, line, columns):
            key = (row.placement, row.bytes, row.dtype, row.redop, row.root)
            if key in seen:
                raise _fail(
                    where,
                    number,
                    f"size {row.bytes} ({row.dtype}, {row.redop}, root {row.root}) is measured twice (line {seen[key]} "
                    "and here): a log is one run, one row per size",
                )
            seen[key] = number
            rows.append(row)
        if len(rows) > 2 * MAX_ROWS:
            raise _fail(where, number, f"more than {MAX_ROWS:,} result rows: one nccl-tests run prints a few dozen")
    if columns is None:
        raise LogError(
            f"{where}: not nccl-tests output: no column header line (`#  size  count  type  redop  root  time  "
            "algbw  busbw  #wrong ...`) was found"
        )
    if not rows:
        raise LogError(f"{where}: no result rows after the column header (truncated log?)")
    if not devices:
        raise LogError(f"{where}: no `#  Rank N ... device D` lines: the number of ranks is unknown")
    ranks = len(devices)
    listed = sorted(rank_lines)
    if listed != list(range(ranks)):
        shown = ", ".join(map(str, listed[:10])) + (" ..." if ranks > 10 else "")
        raise LogError(f"{where}: the `#  Rank` lines list ranks {shown}; expected 0 to {ranks - 1}, each once")
    op = _op(where, named_op, declared_op, rows)
    for row in rows:
        _check(where, row, op, ranks)
    return Log(op, ranks, sorted(devices), rows, footer)


def _concatenated(where: str, number: int, what: str, first: int) -> LogError:
    return _fail(where, number, f"{what} (the first at line {first}): two runs concatenated? import each run's log")


def _row(where: str, number: int, line: str, columns: list[str]) -> list[Row]:
    cells = line.split()
    if len(cells) != len(columns):
        hint = " (truncated line?)" if len(cells) < len(columns) else ""
        raise _fail(where, number, f"expected {len(columns)} columns ({' '.join(columns)}), got {len(cells)}{hint}")
    cell = dict(zip(_keys(columns), cells, strict=True))
    if not all(WHOLE_RE.fullmatch(cell[n]) and 0 <= int(cell[n]) <= MAX_WHOLE for n in ("size", "count")):
        raise _fail(
            where,
            number,
            f"size and count must be whole numbers from 0 to 2**53, got {cell['size']!r} {cell['count']!r}",
        )
    size, count = int(cell["size"]), int(cell["count"])
    if cell["type"] not in DTYPES:
        raise _fail(
            where, number, f"type {cell['type']!r}: expected an nccl-tests data type ({', '.join(sorted(DTYPES))})"
        )
    root = cell.get("root", "-1")
    if not WHOLE_RE.fullmatch(root) or not -1 <= int(root) <= 65_535:
        raise _fail(where, number, f"root must be -1 (none) or a rank number, got {root!r}")
    out = []
    for placement in PLACEMENTS:
        values = []
        for key in ("time", "algbw", "busbw"):
            text = cell[f"{placement}.{key}"]
            if not DECIMAL_RE.fullmatch(text):
                finite = text.lower().lstrip("+-") in ("nan", "inf", "infinity") or text.startswith("-")
                what = "a finite non-negative number" if finite else "a number"
                raise _fail(where, number, f"{placement} {key} must be {what}, got {text!r}")
            if not math.isfinite(value := float(text)):
                raise _fail(where, number, f"{placement} {key} must be a finite non-negative number, got {text!r}")
            values.append(value)
        wrong_text = cell[f"{placement}.wrong"]
        if wrong_text != "N/A" and not (WHOLE_RE.fullmatch(wrong_text) and not wrong_text.startswith("-")):
            raise _fail(where, number, f"{placement} #wrong must be a count or N/A, got {wrong_text!r}")
        wrong = None if wrong_text == "N/A" else int(wrong_text)
        if wrong:
            raise _fail(where, number, f"{placement}: {wrong} wrong results: the run failed its own validation")
        out.append(
            Row(number, size, count, cell["type"], cell["redop"], int(root), placement, *values, wrong)  # type: ignore[arg-type]
        )
    return out


_MEASURED = tuple(f"{placement}.{key}" for placement in PLACEMENTS for key in ("time", "algbw", "busbw", "wrong"))
REQUIRED_KEYS = ("size", "count", "type", "redop", *_MEASURED)


def _check_header(where: str, number: int, columns: list[str]) -> None:
    """A column header missing a column every row is read by (or naming one twice) is refused at its line."""
    keys = _keys(columns)
    missing = [k for k in REQUIRED_KEYS if k not in keys]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if missing or twice:
        problem = f"lacks {', '.join(missing)}" if missing else f"names {', '.join(twice)} twice"
        raise _fail(
            where,
            number,
            f"the column header {problem}; expected `size count type redop root time algbw busbw #wrong "
            "time algbw busbw #wrong` (out-of-place, then in-place)",
        )


def _keys(columns: list[str]) -> list[str]:
    """Header words to cell keys: the repeated time/algbw/busbw/#wrong get their placement prefix."""
    keys, seen = [], 0
    for c in columns:
        base = {"#wrong": "wrong", "error": "wrong"}.get(c, c)
        if base in ("time", "algbw", "busbw", "wrong"):
            keys.append(f"{PLACEMENTS[min(seen // 4, 1)]}.{base}")
            seen += 1
        else:
            keys.append(base)
    return keys


def _op(where: str, named: tuple[str, int] | None, declared: str | None, rows: list[Row]) -> str:
    if named and declared and named[0] != declared:
        raise _fail(where, named[1], f"this is a {named[0]} log, but {declared} was declared")
    op = (named[0] if named else None) or declared
    if op is None:
        raise LogError(
            f"{where}: the log does not name its test (no `# Collective test starting:` line); declare it with --op"
        )
    first = rows[0]
    reduces = first.redop in REDOPS
    if op in REDUCING and not reduces:
        raise _fail(
            where, first.line, f"redop {first.redop!r}: a {op} log reduces (sum, max, ...); is it another test?"
        )
    if op not in REDUCING and reduces:
        raise _fail(where, first.line, f"redop {first.redop!r}: a {op} log does not reduce; is it another test?")
    return op


def _check(where: str, row: Row, op: str, ranks: int) -> None:
    """algbw = S / t and busbw = algbw × factor, within the two decimals nccl-tests prints."""
    if row.time_us <= 0:
        raise _fail(where, row.line, f"{row.placement} time must be positive, got {row.time_us}")
    algbw = row.bytes / (row.time_us * 1e3)
    if abs(algbw - row.algbw_gb_per_s) > 0.011 + 0.02 * algbw:
        raise _fail(
            where,
            row.line,
            f"{row.placement} algbw {row.algbw_gb_per_s} GB/s disagrees with size / time = {algbw:.2f} GB/s",
        )
    if row.root >= ranks:
        raise _fail(where, row.line, f"root {row.root}: the log lists {ranks} ranks (0 to {ranks - 1})")
    factor = bus_factor(op, ranks)
    # Both printed with two decimals: each off by at most 0.005, so busbw may differ from algbw × factor by
    # 0.005 × (1 + factor), plus the 2 % the algbw check allows, at every size (small ones too).
    if abs(row.busbw_gb_per_s - row.algbw_gb_per_s * factor) > 0.006 * (1 + factor) + 0.02 * row.busbw_gb_per_s:
        raise _fail(
            where,
            row.line,
            f"{row.placement} busbw {row.busbw_gb_per_s} is not algbw × {factor:.4g} (the {op} bus factor for "
            f"{ranks} ranks): a log of another operation or rank count than declared?",
        )


def parse_bytes(data: bytes, where: str, declared_op: str | None = None) -> Log:
    """Parse one log as read from a file or the store: UTF-8 text, or refused naming the byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = data.count(b"\n", 0, exc.start) + 1, exc.start - data.rfind(b"\n", 0, exc.start)
        raise ValidationError(
            f"{where}:{line}: not UTF-8 text ({exc.reason} at byte {exc.start}, column {column} of the line)"
        ) from None
    return parse_text(text, where, declared_op)
