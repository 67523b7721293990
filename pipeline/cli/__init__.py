"""The command line: the only package that knows about argv, exit codes (0 success, 1 a check failed, 2 bad
usage) and printing.

One module per verb group, each registering its commands on `app` (app.py). Commands parse options, call a
library function and print through output.py. A stage package is imported inside its command, never at module
level, so each verb loads only the code its stage declares.
"""

from __future__ import annotations

import sys
from functools import cache

import click
import typer.main

from ..core.deadline import bounded
from ..core.paths import command
from ..core.text import visible
from ..errors import FabricrefError, os_error_message
from . import estimate, explore, inspect, measured, new, plan, stages, validate  # noqa: F401  (registers the verbs)
from .app import app
from .options import check_float_options
from .output import safe_streams, set_width

check_float_options(estimate.estimate_app)
check_float_options(plan.plan_app)

__all__ = ["app", "main"]


@cache
def _command() -> click.Command:
    """The click command Typer builds from `app`, once per process (`app(...)` rebuilds it on every call; click
    keeps no state in a command between invocations)."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; click reports bad usage itself (exit 2), our errors print one message (exit 1 or 2)."""
    set_width()
    safe_streams()
    try:
        with bounded(), command():
            _command()(args=argv, prog_name="fabricref")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except FabricrefError as exc:
        sys.stderr.write(f"error: {visible(str(exc))}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except Exception as exc:
        # A read-only checkout or a full disk under any verb: one line naming the file, not a traceback.
        message = os_error_message(exc)
        if message is None:
            raise
        sys.stderr.write(f"error: {visible(message)}\n")
        return 1
    return 0
