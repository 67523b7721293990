"""`python -m fabricref.<stage>`: how dvc.yaml runs a stage without the CLI, so its import closure stays small."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
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
        sys.stderr.write(f"error: {exc}\n{_under_dvc()}")
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


def _under_dvc() -> str:
    """What to run after a stage DVC ran has failed: DVC removed its outputs first, `dvc exp run -S` changed
    params.yaml."""
    stage = os.environ.get("DVC_STAGE")
    if not stage:
        return ""
    return (
        f"the workspace is as it was but for what DVC removed before running {stage}: fix the cause and rerun, or "
        "put it all back with `git checkout -- params.yaml && dvc checkout` (undoing a `dvc exp run -S`)\n"
    )
