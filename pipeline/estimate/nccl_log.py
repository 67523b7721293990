"""Reading the standard stdout of nccl-tests / rccl-tests (all_reduce_perf and friends).

The format: `#` header lines (the test's parameters, `# Using devices` then one `#  Rank N ... device D [bus]
NAME` line per rank, the column header `size count type redop root time algbw busbw #wrong` for out-of-place then
in-place), one row per size, and a `# Avg bus bandwidth` footer. Every row is checked against the header and
against nccl-tests' own definitions (algbw = S / t; busbw = algbw × the operation's bus factor), so a truncated
line, a shifted column, a non-numeric cell or a log of another operation than declared is refused with its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

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
PLACEMENTS = ("out-of-place", "in-place")
RANK_RE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$"
)
TEST_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")


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
    """Parse one log; `declared_op` (the importer's --op) must match what the log shows."""
    if declared_op is not None and declared_op not in OPS:
        raise ValidationError(f"unknown operation {declared_op!r}: expected one of {', '.join(OPS)}")
    devices: list[tuple[int, str, int, str]] = []
    columns: list[str] | None = None
    named_op: tuple[str, int] | None = None
    rows: list[Row] = []
    footer = False
    lines = text.splitlines()
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if m := TEST_RE.match(line):
                test = m.group(1)
                if test not in TESTS:
                    raise _fail(where, number, f"unknown test {test!r}: expected one of {', '.join(TESTS)}")
                named_op = (TESTS[test], number)
            elif m := RANK_RE.match(line):
                devices.append((int(m.group(1)), m.group(2), int(m.group(3)), m.group(4)))
            elif re.match(r"^#\s+size\s+count\s+type\b", line):
                columns = line.lstrip("#").split()
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
        rows.extend(_row(where, number, line, columns))
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
    op = _op(where, named_op, declared_op, rows)
    for row in rows:
        _check(where, row, op, ranks)
    return Log(op, ranks, sorted(devices), rows, footer)


def _row(where: str, number: int, line: str, columns: list[str]) -> list[Row]:
    cells = line.split()
    names = " ".join(columns)
    if len(cells) != len(columns):
        hint = " (truncated line?)" if len(cells) < len(columns) else ""
        raise _fail(where, number, f"expected {len(columns)} columns ({names}), got {len(cells)}{hint}")
    cell = dict(zip(_keys(columns), cells, strict=True))
    try:
        size, count = int(cell["size"]), int(cell["count"])
    except ValueError:
        raise _fail(
            where, number, f"size and count must be whole numbers, got {cell['size']!r} {cell['count']!r}"
        ) from None
    root = cell.get("root", "-1")
    if not re.fullmatch(r"-?\d+", root):
        raise _fail(where, number, f"root must be a whole number, got {root!r}")
    out = []
    for placement in PLACEMENTS:
        values = []
        for key in ("time", "algbw", "busbw"):
            text = cell[f"{placement}.{key}"]
            try:
                value = float(text)
            except ValueError:
                raise _fail(where, number, f"{placement} {key} must be a number, got {text!r}") from None
            if value < 0 or value != value or value in (float("inf"),):
                raise _fail(where, number, f"{placement} {key} must be a finite non-negative number, got {text!r}")
            values.append(value)
        wrong_text = cell[f"{placement}.wrong"]
        if wrong_text == "N/A":
            wrong = None
        elif wrong_text.isdigit():
            wrong = int(wrong_text)
        else:
            raise _fail(where, number, f"{placement} #wrong must be a count or N/A, got {wrong_text!r}")
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
    factor = bus_factor(op, ranks)
    if (
        row.algbw_gb_per_s >= 1
        and abs(row.busbw_gb_per_s - row.algbw_gb_per_s * factor) > 0.011 + 0.02 * row.busbw_gb_per_s
    ):
        raise _fail(
            where,
            row.line,
            f"{row.placement} busbw {row.busbw_gb_per_s} is not algbw × {factor:.4g} (the {op} bus factor for "
            f"{ranks} ranks): a log of another operation or rank count than declared?",
        )


def parse_file(path: Path, declared_op: str | None = None) -> Log:
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ValidationError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_text(text, str(path), declared_op)
