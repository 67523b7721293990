"""How many processes a stage may use: one rule for the three stages that fork (topology, traffic, report)."""

from __future__ import annotations

import os

from ..errors import UsageError


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, which taskset and containers narrow), not the
    machine's count: forking more workers than that only adds switching."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1


def env_count(name: str, expected: str) -> int | None:
    """A whole number from $NAME, None when unset or blank; anything else is a usage error that names the
    variable, its value and what was `expected`."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"${name}={text!r}: expected {expected}") from None
