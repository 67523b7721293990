"""A wall-clock limit on every command and stage (`bounded`), counted from its start.

The stop is a `TimeLimitError` raised in the main thread (SIGALRM), so every `with` block unwinds; a commit in
progress (`critical`) finishes first. C code holding the interpreter past the limit is ended by a watchdog GRACE
seconds later, which writers survive as they survive kill -9. A server calls `unbounded` once it serves."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

from ..errors import FabricrefError, UsageError

ENV = "FABRICREF_TIME_LIMIT"
DEFAULT_LIMIT = 3600.0
# No command is meant to run longer than a week; beyond it a limit is a typo.
MAX_LIMIT = 7 * 24 * 3600.0
GRACE = 5.0
OPTION = "--time-limit"


class TimeLimitError(FabricrefError):
    """The command ran past its time limit; nothing it was writing was left half-written."""


def parse_limit(text: str, how: str) -> float:
    """Seconds from `text` (given by `how`); UsageError unless positive, finite and at most MAX_LIMIT."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_LIMIT):
        raise UsageError(f"{how}={text}: expected a number of seconds above 0 and at most {MAX_LIMIT:g} (a week)")
    return value


class _Clock:
    def __init__(self) -> None:
        self.started = 0.0
        self.limit: float | None = None
        self.how = ENV
        self.depth = 0  # critical sections open
        self.pending = False
        self.watchdog: threading.Timer | None = None
        self.previous_handler: object = None
        self.armed = False
        self.fired = False  # the limit was reached and its stop raised


_CLOCK = _Clock()


def _message() -> str:
    limit = _CLOCK.limit or 0.0
    return (
        f"stopped at the time limit of {limit:g} s ({_CLOCK.how}), counted from the start of the command; nothing "
        f"was left half-written. Raise it with {ENV}=SECONDS or `fabricref {OPTION} SECONDS …` "
        f"(default {DEFAULT_LIMIT:g})"
    )


def _importing(frame: FrameType | None) -> bool:
    """An import is running: an exception raised in a C extension's module init aborts the process."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _on_alarm(_signum: int, frame: FrameType | None) -> None:
    if _CLOCK.depth:
        _CLOCK.pending = True
        return
    if _importing(frame):
        signal.setitimer(signal.ITIMER_REAL, 0.05)  # ring again once the import is done
        return
    _CLOCK.fired = True
    raise TimeLimitError(_message())


def _hard_stop() -> None:
    """The main thread did not come back to Python within GRACE of the limit: end the process."""
    waited = 0.0
    while _CLOCK.depth and waited < GRACE:
        time.sleep(0.05)
        waited += 0.05
    with contextlib.suppress(Exception):
        sys.stderr.write(f"error: {_message()}\n")
        sys.stderr.flush()
    os._exit(1)


def _arm(remaining: float) -> None:
    signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-3))
    if _CLOCK.watchdog is not None:
        _CLOCK.watchdog.cancel()
    _CLOCK.watchdog = threading.Timer(max(remaining, 1e-3) + GRACE, _hard_stop)
    _CLOCK.watchdog.daemon = True
    _CLOCK.watchdog.start()


def _disarm() -> None:
    if _CLOCK.armed:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if _CLOCK.watchdog is not None:
        _CLOCK.watchdog.cancel()
        _CLOCK.watchdog = None


@contextlib.contextmanager
def bounded() -> Iterator[None]:
    """The running command, limited to FABRICREF_TIME_LIMIT seconds; only the outermost main-thread block arms."""
    if _CLOCK.armed or threading.current_thread() is not threading.main_thread():
        yield
        return
    text = os.environ.get(ENV)
    limit = parse_limit(text, ENV) if text is not None and text != "" else DEFAULT_LIMIT
    _CLOCK.started, _CLOCK.limit, _CLOCK.how = time.monotonic(), limit, ENV if text else "the default"
    _CLOCK.pending, _CLOCK.depth = False, 0
    _CLOCK.previous_handler = signal.signal(signal.SIGALRM, _on_alarm)
    _CLOCK.armed, _CLOCK.fired = True, False
    try:
        _arm(limit)
        yield
    except TimeLimitError:
        raise
    except Exception as exc:
        # The stop raised inside a C extension that checks for signals (DuckDB scanning Python objects) comes
        # back as that library's own error ("Query interrupted"): it is still the limit that stopped the command.
        if _CLOCK.fired:
            raise TimeLimitError(_message()) from exc
        raise
    finally:
        _disarm()
        _CLOCK.armed = False
        _CLOCK.limit = None
        signal.signal(signal.SIGALRM, _CLOCK.previous_handler)  # type: ignore[arg-type]


def set_limit(seconds: float, how: str) -> None:
    """Another limit for the running command (`--time-limit`), still counted from its start."""
    if not _CLOCK.armed:
        return
    _CLOCK.limit, _CLOCK.how = seconds, how
    remaining = seconds - (time.monotonic() - _CLOCK.started)
    if remaining <= 0:
        _disarm()
        raise TimeLimitError(_message())
    _arm(remaining)


def unbounded() -> None:
    """The running command serves until it is stopped (a web application): no limit from here on."""
    if _CLOCK.armed:
        _disarm()
        _CLOCK.limit = None


@contextlib.contextmanager
def critical() -> Iterator[None]:
    """A step that must not be cut in two: a limit reached inside it stops the command right after it."""
    _CLOCK.depth += 1
    try:
        yield
    finally:
        _CLOCK.depth -= 1
    if not _CLOCK.depth and _CLOCK.pending:
        _CLOCK.pending = False
        raise TimeLimitError(_message())
