"""Units with their dimensions, decimal vs binary prefixes and bandwidth direction kept explicit: most errors in
this field are unit errors (Gb/s vs GB/s), so units are case-sensitive and an unknown unit is an error."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..errors import ValidationError

# Dimension exponents over the base quantities (bytes, seconds, watts).
Dims = tuple[int, int, int]
DIMENSIONLESS: Dims = (0, 0, 0)
DATA: Dims = (1, 0, 0)
TIME: Dims = (0, 1, 0)
RATE: Dims = (1, -1, 0)
POWER: Dims = (0, 0, 1)
# Arithmetic throughput: floating-point operations (a count) per second.
COMPUTE: Dims = (0, -1, 0)

DIRECTIONS = ("per_direction", "bidirectional")

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}


def _build_units() -> dict[str, tuple[float, Dims]]:
    units: dict[str, tuple[float, Dims]] = {"count": (1.0, DIMENSIONLESS), "1": (1.0, DIMENSIONLESS)}
    for prefix, factor in {**_DECIMAL, **_BINARY}.items():
        units[f"{prefix}B"] = (factor, DATA)
        units[f"{prefix}B/s"] = (factor, RATE)
    for prefix, factor in _DECIMAL.items():
        units[f"{prefix}b"] = (factor / 8, DATA)
        units[f"{prefix}b/s"] = (factor / 8, RATE)
        if prefix:
            units[f"{prefix}bps"] = (factor / 8, RATE)
            units[f"{prefix}Bps"] = (factor, RATE)
            units[f"{prefix}bit/s"] = (factor / 8, RATE)
    units.update(
        {
            "W": (1.0, POWER),
            "kW": (1e3, POWER),
            "MW": (1e6, POWER),
            "s": (1.0, TIME),
            "ms": (1e-3, TIME),
            "us": (1e-6, TIME),
            "µs": (1e-6, TIME),
            "ns": (1e-9, TIME),
            "FLOP/s": (1.0, COMPUTE),
            "TFLOP/s": (1e12, COMPUTE),
            "PFLOP/s": (1e15, COMPUTE),
            "TFLOPS": (1e12, COMPUTE),
            "PFLOPS": (1e15, COMPUTE),
        }
    )
    return units


UNITS = _build_units()


def unit_info(unit: str) -> tuple[float, Dims]:
    try:
        return UNITS[unit]
    except KeyError:
        raise ValidationError(
            f"unknown unit {unit!r}: expected one of B, kB, MB, GB, TB, KiB, MiB, GiB, TiB, b, Gb, "
            "B/s, GB/s, TB/s, b/s, Gb/s, Tb/s, W, kW, s, ms, us, ns, TFLOP/s, PFLOP/s, count "
            "(case matters: Gb/s is bits, GB/s bytes)"
        ) from None


def is_rate(unit: str) -> bool:
    return unit_info(unit)[1] == RATE


def convert(value: float, from_unit: str, to_unit: str) -> float:
    f_factor, f_dims = unit_info(from_unit)
    t_factor, t_dims = unit_info(to_unit)
    if f_dims != t_dims:
        raise ValidationError(f"cannot convert {from_unit} to {to_unit}: different dimensions")
    if f_factor == t_factor:
        return value  # exact: a value kept in its own unit (or a synonym, Gbps = Gb/s) is not rounded
    return value * f_factor / t_factor


def convert_direction(value: float, from_dir: str | None, to_dir: str | None) -> float:
    """A symmetric link's bidirectional figure is twice its per-direction figure; nothing else converts."""
    if from_dir == to_dir:
        return value
    if from_dir is None or to_dir is None:
        raise ValidationError(
            f"bandwidth direction missing: have {from_dir or 'unstated'}, need {to_dir or 'unstated'}"
        )
    return value * 2 if (from_dir, to_dir) == ("per_direction", "bidirectional") else value / 2


_NUMBER_WORDS = {
    "zero": 0,
    "one": 1,
    "single": 1,
    "two": 2,
    "dual": 2,
    "three": 3,
    "four": 4,
    "quad": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "sixteen": 16,
    "eighteen": 18,
    "thirty-six": 36,
    "seventy-two": 72,
}

_NUMBER_RE = re.compile(r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?$")


def parse_number(text: str) -> float:
    """'1,128' → 1128, '1.8' → 1.8, 'Eight' → 8, '18x' → 18. Anything else is an error."""
    # A number word is looked up before a trailing "x" is stripped: "six" is a word, "18x" a multiplier.
    word = _NUMBER_WORDS.get(text.strip().lower())
    cleaned = text.strip().rstrip("x×").strip()
    word = _NUMBER_WORDS.get(cleaned.lower()) if word is None else word
    if word is not None:
        return float(word)
    if not _NUMBER_RE.fullmatch(cleaned):
        raise ValidationError(f"{text!r} is not a number: expected digits (e.g. 1,128 or 1.8) or a number word")
    value = float(cleaned.replace(",", ""))
    if not math.isfinite(value):
        raise ValidationError(f"{text!r} is not a finite number")
    return value


_QUANTITY_RE = re.compile(r"^\s*(?P<num>[+-]?[\d.,]+)\s*(?P<unit>[A-Za-zµ/]+)\s*$")


@dataclass(frozen=True)
class Quantity:
    value: float
    unit: str
    direction: str | None = None

    def to(self, unit: str, direction: str | None = None) -> Quantity:
        value = convert(self.value, self.unit, unit)
        if is_rate(unit):
            value = convert_direction(value, self.direction, direction)
        return Quantity(value, unit, direction if is_rate(unit) else None)

    def __str__(self) -> str:
        text = f"{self.value:g} {self.unit}"
        return f"{text} ({self.direction.replace('_', ' ')})" if self.direction else text


def parse_quantity(text: str, direction: str | None = None) -> Quantity:
    """'400Gb/s' → Quantity(400, 'Gb/s'). A rate needs a direction: per_direction or bidirectional."""
    match = _QUANTITY_RE.match(text)
    if not match:
        raise ValidationError(f"{text!r} is not a quantity: expected a number followed by a unit, e.g. 400Gb/s")
    value = parse_number(match["num"])
    unit = match["unit"]
    unit_info(unit)
    if is_rate(unit) and direction is not None and direction not in DIRECTIONS:
        raise ValidationError(f"direction {direction!r}: expected one of {', '.join(DIRECTIONS)}")
    return Quantity(value, unit, direction if is_rate(unit) else None)


# Suffixes of a count as people write parameters and tokens: 70B parameters, 1.2T tokens, 128k context.
COUNT_SUFFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_COUNT_RE = re.compile(
    r"^(?P<num>(?:\d{1,3}(?:,\d{3})+|[\d_]+)(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\d+)(?P<suffix>[a-zA-Z]?)$"
)
# kind → (what it is, examples, dimensions)
_AMOUNTS = {
    "count": ("a number", "70B, 1.2T, 128k or 70e9", DIMENSIONLESS),
    "bytes": ("a size with its unit", "1.5GiB or 80GB", DATA),
    "rate": ("a rate with its unit", "400Gb/s or 900GB/s", RATE),
    "time": ("a time with its unit", "5us", TIME),
}


def parse_amount(text: str, kind: str) -> float:
    """Every amount a calculator takes: `kind` 'count' ('70B' → 7e10: B is a billion, as model sizes are
    written), 'bytes' ('1.5GiB'), 'rate' ('400Gb/s' → bytes per second) or 'time' ('5us' → seconds)."""
    cleaned = text.strip().replace(" ", "")
    what, examples, dimensions = _AMOUNTS[kind]
    expected = f"expected {what}, e.g. {examples}"
    if kind == "count":
        match = _COUNT_RE.match(cleaned)
        if match is None or match["suffix"] not in COUNT_SUFFIXES:
            raise ValidationError(f"{text!r}: {expected}")
        value = float(match["num"].replace(",", "").replace("_", "")) * COUNT_SUFFIXES[match["suffix"]]
    else:
        match = _QUANTITY_RE.match(cleaned)
        if match is None or UNITS.get(match["unit"], (None, None))[1] != dimensions:
            units = ", ".join(u for u, (_, dims) in UNITS.items() if dims == dimensions)
            case = " (case matters: Gb/s is bits, GB/s bytes)" if dimensions in (DATA, RATE) else ""
            raise ValidationError(f"{text!r}: {expected}, in one of {units}{case}")
        try:
            value = parse_number(match["num"]) * UNITS[match["unit"]][0]
        except ValidationError as exc:
            raise ValidationError(f"{text!r}: {exc}; {expected}") from None
    if not math.isfinite(value) or value < 0:
        raise ValidationError(f"{text!r}: {expected} (finite, not negative)")
    return value
