"""`python -m fabricref.<stage>`: how dvc.yaml runs a stage without the CLI, so its import closure stays small."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ..errors import FabricrefError, os_error_message
from .deadline import bounded
from .files import checkout_lock
from .paths import command, layout, settle


def run_stage(work: Callable[..., str]) -> NoReturn:
    """Run `work(layout)` under the checkout's writer lock and the time limit; print its one-line summary. Exit
    codes as the CLI: 0 done, 1 a check failed, 2 bad usage."""
    try:
        with bounded(), command():
            lay = settle(layout())
            with checkout_lock(lay.root):
                message = work(lay)
    except FabricrefError as exc:
        sys.stderr.write(f"error: {exc}\n{_under_dvc(str(exc))}")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as exc:
        message = os_error_message(exc)  # a read-only checkout or a full disk: one line naming the file
        if message is None:
            raise
        sys.stderr.write(f"error: {message}\n")
        sys.exit(1)
    sys.stdout.write(message + "\n")
    sys.exit(0)


def _under_dvc(error: str) -> str:
    """What to run after a stage DVC ran has failed: DVC removed its outputs first; the file the error names (a
    workload file edited by hand, params.yaml changed by `dvc exp run -S`) is what to put back."""
    stage = os.environ.get("DVC_STAGE")
    if not stage:
        return ""
    named = Path(error.split(":", 1)[0])  # DVC runs the stage at the checkout's root
    here = Path.cwd()
    inside = named.is_relative_to(here) if named.is_absolute() else ".." not in named.parts
    edited = (named.relative_to(here) if named.is_absolute() else named).as_posix() if inside else None
    edited = edited if edited and named.is_file() else None
    back = f"`git checkout -- {edited or 'params.yaml'} && dvc checkout`"
    why = "undoing the edit" if edited not in (None, "params.yaml") else "undoing a `dvc exp run -S` or an edit"
    return (
        f"the workspace is as it was but for what DVC removed before running {stage}: fix the cause and rerun, or "
        f"put it all back with {back} ({why})\n"
    )
