"""One check for every floating-point option of a command group: click parses `nan`, `inf` and `-1` as floats,
and a calculator given them printed invalid JSON (NaN) or a traceback. Every float option of the group must be
a finite, non-negative number, 0 or from 1e-12 to 1e18, every whole-number option at most 2**53 in magnitude; anything
else is bad usage (exit 2) naming the option, and so is an input whose result overflows."""

from __future__ import annotations

import functools
import math
import typing
from collections.abc import Callable
from typing import Any

import typer

from ..core.schemas import MIN_MAGNITUDE
from ..core.units import parse_amount
from ..errors import UsageError, ValidationError

# No calculator input is anywhere near these (parameters ~1e12, bytes ~1e15); beyond them results overflow.
MAX_FLOAT = 1e18
MAX_INT = 2**53


def _float_options(fn: Callable[..., Any], kind: type = float) -> dict[str, str]:
    """Parameter name → its option flag, for every parameter typed `kind` (or `kind | None`)."""
    hints = typing.get_type_hints(fn, include_extras=True)
    found: dict[str, str] = {}
    for name, hint in hints.items():
        if typing.get_origin(hint) is not typing.Annotated:
            continue
        base, *extras = typing.get_args(hint)
        kinds = set(typing.get_args(base)) - {type(None)} if typing.get_args(base) else {base}
        if kinds != {kind}:
            continue
        # In Annotated form typer keeps the first flag where a default would go: look at both.
        decls = [
            d for extra in extras for d in (getattr(extra, "default", None), *(getattr(extra, "param_decls", ()) or ()))
        ]
        flags = [d for d in decls if isinstance(d, str) and d.startswith("--")]
        found[name] = flags[0] if flags else f"--{name.replace('_', '-')}"
    return found


def check_value(flag: str, value: Any) -> None:
    if isinstance(value, float) and not (math.isfinite(value) and value >= 0):
        raise UsageError(f"{flag} {value}: expected a finite, non-negative number")
    if isinstance(value, float) and value > MAX_FLOAT:
        raise UsageError(f"{flag} {value:g}: expected at most {MAX_FLOAT:g}")
    if isinstance(value, float) and 0 < value < MIN_MAGNITUDE:
        # The declared documents' rule (pipeline/core/schemas.py): near 0 but not 0 only overflows what divides.
        raise UsageError(
            f"{flag} {value!r}: too close to 0 (dividing by it overflows); expected 0 or from {MIN_MAGNITUDE:g} "
            f"to {MAX_FLOAT:g}"
        )
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise UsageError(f"{flag} {value}: expected a whole number of magnitude at most 2**53")


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    numbers = {**_float_options(fn), **_float_options(fn, int)}

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        for name, flag in numbers.items():
            check_value(flag, kwargs.get(name))
        try:
            return fn(*args, **kwargs)
        except OverflowError:
            raise UsageError("the inputs are too large: a result overflows; expected realistic magnitudes") from None

    return run


def check_float_options(group: typer.Typer) -> None:
    """Wrap every command of `group` (call once, after its commands are registered)."""
    for command in group.registered_commands:
        if command.callback is not None and not getattr(command.callback, "_floats_checked", False):
            command.callback = _guarded(command.callback)
            command.callback._floats_checked = True  # type: ignore[attr-defined]


def amount(flag: str, kind: str = "count", whole: bool = False) -> Callable[[Any], Any]:
    """The typer `parser` of an option taking an amount as people write it ('70B', '128k', '80GB'; `whole`: a
    whole number). A plain number ('7e9', 'nan') is left to the group's one check (`check_value`)."""

    def parse(value: Any) -> Any:
        if not isinstance(value, str):  # a default, already a number
            return value
        try:
            number = float(value)
        except ValueError:
            try:
                number = parse_amount(value, kind)
            except ValidationError as exc:
                raise UsageError(f"{flag} {exc}") from None
        if whole and math.isfinite(number):
            if not number.is_integer():
                raise UsageError(f"{flag} {value!r}: expected a whole number, e.g. 128k or 4096")
            return int(number)
        return number

    return parse
