"""One check for every floating-point option of a command group: click parses `nan`, `inf` and `-1` as floats,
and a calculator given them printed invalid JSON (NaN) or a traceback. Every float option of the group must be
a finite, non-negative number; anything else is bad usage (exit 2) naming the option."""

from __future__ import annotations

import functools
import math
import typing
from collections.abc import Callable
from typing import Any

import typer

from ..core.errors import UsageError


def _float_options(fn: Callable[..., Any]) -> dict[str, str]:
    """Parameter name → its option flag, for every parameter typed float (or float | None)."""
    hints = typing.get_type_hints(fn, include_extras=True)
    found: dict[str, str] = {}
    for name, hint in hints.items():
        if typing.get_origin(hint) is not typing.Annotated:
            continue
        base, *extras = typing.get_args(hint)
        kinds = set(typing.get_args(base)) - {type(None)} if typing.get_args(base) else {base}
        if kinds != {float}:
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


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    floats = _float_options(fn)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        for name, flag in floats.items():
            check_value(flag, kwargs.get(name))
        return fn(*args, **kwargs)

    return run


def check_float_options(group: typer.Typer) -> None:
    """Wrap every command of `group` (call once, after its commands are registered)."""
    for command in group.registered_commands:
        if command.callback is not None and not getattr(command.callback, "_floats_checked", False):
            command.callback = _guarded(command.callback)
            command.callback._floats_checked = True  # type: ignore[attr-defined]
