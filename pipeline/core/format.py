"""One way to print a number with its unit, for every human-facing view (machine output keeps exact numbers).

Bits stay bits and bytes bytes; decimal units get SI prefixes, binary ones IEC prefixes; a bandwidth's direction
is spelled out; three significant digits by default, never exponent notation. A registry field is printed at the
precision its record carries: a stated figure with the digits the document states, a derived one with the
fewest among its inputs (130 TB/s ÷ 72 is "1.81 TB/s", not "1,805.56 GB/s").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

MISSING = "—"
DEFAULT_DIGITS = 3
MAX_DIGITS = 15  # a double holds about 15-17 significant decimal digits: more would print noise

_SI = (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0))
_IEC = (("Pi", 2.0**50), ("Ti", 2.0**40), ("Gi", 2.0**30), ("Mi", 2.0**20), ("Ki", 2.0**10), ("", 1.0))
_TIME = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
# Spelling variants of one base unit, written back in the project's spelling.
_BASES = {
    "B": "B",
    "b": "b",
    "B/s": "B/s",
    "b/s": "b/s",
    "bps": "b/s",
    "bit/s": "b/s",
    "Bps": "B/s",
    "W": "W",
    "FLOP": "FLOP",  # a count of operations (a step's work); rates as a document states them (TFLOP/s) are kept
}
_DIRECTIONS = {"per_direction": "per direction", "bidirectional": "bidirectional"}
_COUNTS = {None, "", "count", "1"}


def _split(unit: str) -> tuple[str, float, bool, str] | None:
    """'GiB' → ('Gi', 2**30, True, 'B'); None for a unit this module does not rescale."""
    for prefix, factor in _IEC:
        if prefix and unit.startswith(prefix) and unit[len(prefix) :] in ("B", "B/s"):
            return prefix, factor, True, unit[len(prefix) :]
    for prefix, factor in (*_SI, ("K", 1e3)):
        rest = unit[len(prefix) :]
        if unit.startswith(prefix) and rest in _BASES:
            return prefix, factor, False, _BASES[rest]
    return None


def _number(x: float, digits: int) -> str:
    """`digits` significant digits, trailing zeros dropped, never in exponent notation ('0.00018'); from
    10**digits up, a whole number; thousands separators always ('1,307.4')."""
    if x == 0:
        return "0"
    if abs(x) < 1000 and abs(r := _round(x, digits)) < 1000:
        decimals = max(0, digits - 1 - math.floor(math.log10(abs(r))))
    elif abs(x) >= 10**digits:
        return f"{round(x):,}"
    else:
        decimals = max(0, digits - (math.floor(math.log10(abs(x))) + 1))
    text = f"{x:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _round(x: float, digits: int) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.{digits}g}")


def _scaled(base: float, scales: tuple[tuple[str, float], ...], digits: int) -> tuple[float, str]:
    """Pick the largest prefix that leaves a mantissa of at least 1 (after rounding), else the smallest one."""
    for prefix, factor in scales:
        mantissa = _round(base / factor, digits)
        if abs(mantissa) >= 1:
            return mantissa, prefix
    prefix, factor = scales[-1]
    return _round(base / factor, digits), prefix


def format_count(value: float, digits: int = 3) -> str:
    """Whole counts exactly with thousands separators ('18,432'); fractional ones to `digits` digits."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return _number(_round(value, digits), digits)


def format_percent(fraction: float | None, digits: int = 2, signed: bool = False) -> str:
    """A fraction as a percentage: 0.4567 → '46%', 0.004 → '0.4%'; `signed`: '+12.3%'; None or not finite → '—'."""
    if fraction is None or not math.isfinite(fraction):
        return MISSING
    text = _number(fraction * 100, digits)
    return f"+{text}%" if signed and fraction > 0 else f"{text}%"


def format_exact(value: float, digits: int = 10, separators: bool = True) -> str:
    """A stored number as a record shows it: up to `digits` significant digits, never exponent notation
    ('2,614.9', '0.000000125'); without `separators`, as a registry text field stores it ('1080000')."""
    if not math.isfinite(value):
        return str(value)
    text = format(Decimal(f"{float(value):.{digits}g}"), ",f" if separators else "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_quantity(
    value: float | int | str | None, unit: str | None = None, direction: str | None = None, digits: int = 3
) -> str:
    """'1.26 TB', '70 µs', '400 Gb/s per direction', '18,432'; None → '—'; text as it is. `value` is in `unit`;
    the prefix is chosen for reading, the base unit and binary vs decimal are kept."""
    if value is None:
        return MISSING
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool) or not math.isfinite(float(value)):
        text = str(value)
    elif unit in _COUNTS:
        text = format_count(value, digits)
    elif value == 0:  # no prefix reads better than another: keep the unit as stored
        text = f"0 {unit}"
    elif unit in _TIME_UNITS:
        mantissa, shown = _scaled(float(value) * _TIME_UNITS[unit], _TIME, digits)
        text = f"{_number(mantissa, digits)} {shown}"
    elif (parts := _split(unit)) is not None:
        _prefix, factor, binary, base = parts
        mantissa, prefix = _scaled(float(value) * factor, _IEC if binary else _SI, digits)
        text = f"{_number(mantissa, digits)} {prefix}{base}"
    else:  # a unit we do not rescale (%, FLOP/s...): the number, then the unit as stated
        text = f"{_number(_round(float(value), digits), digits)} {unit}"
    if direction:
        text += " " + _DIRECTIONS.get(direction, direction.replace("_", " "))
    return text


def format_distinct(
    old: float | int | str | None,
    new: float | int | str | None,
    unit: str | None = None,
    direction: str | None = None,
    old_direction: str | None = None,
    digits: int = DEFAULT_DIGITS,
) -> tuple[str, str]:
    """Two values of one field, with at least `digits` significant digits and just enough more that different
    numbers never print the same ('1.8 TB/s → 1.8 TB/s' for 1800 → 1801 GB/s)."""
    old_dir = direction if old_direction is None else old_direction
    for shown in range(min(digits, MAX_DIGITS), MAX_DIGITS + 1):
        a = format_quantity(old, unit, old_dir, shown)
        b = format_quantity(new, unit, direction, shown)
        if a != b or old == new:
            return a, b
    return a, b


_NUMBER_RE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?|\.\d+)")


def significant_digits(text: str | None) -> int | None:
    """The significant digits of the first number written in `text` ('1,307.4 TFLOPS' → 5, '0.05' → 1); None
    when there is none. A whole number's trailing zeros count: '400 Gb/s' is a nominal rate, exact as printed."""
    if not text:
        return None
    match = _NUMBER_RE.search(text)
    if match is None:
        return None
    digits = match.group(1).replace(",", "").replace(".", "").lstrip("0")
    return min(max(len(digits), 1), MAX_DIGITS)


def stated_number(text: str | None) -> tuple[float, int] | None:
    """The first number written in `text` with its significant digits ('1,440 GB' → (1440.0, 4)), or None."""
    if not text:
        return None
    match = _NUMBER_RE.search(text)
    if match is None:
        return None
    digits = significant_digits(match.group(1))
    return float(match.group(1).replace(",", "")), digits or 1


def format_field(row: Mapping[str, Any], digits: int | None = None) -> str:
    """A registry row's value as every view prints it: `value_number` at `digits` (else the row's, else three),
    else `value_text`, else '—'."""
    number = row.get("value_number")
    if number is None:
        return row.get("value_text") or MISSING
    shown = digits if digits is not None else row.get("digits")
    return format_quantity(number, row.get("unit"), row.get("direction"), int(shown) if shown else DEFAULT_DIGITS)
