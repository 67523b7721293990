"""`python -m fabricref.<stage>`: how dvc.yaml runs a stage, without the CLI.

Each stage package has a `__main__.py` that calls `run_stage`, so a stage's import closure is its own package
plus pipeline/core (tests/unit/test_dvc_deps.py computes it and checks dvc.yaml declares it). The CLI verbs call the
same library functions; they are for people, DVC runs these.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from ..errors import FabricrefError, os_error_message
from .deadline import bounded
from .files import checkout_lock
from .paths import command, layout, settle


def run_stage(work: Callable[..., str]) -> NoReturn:
    """Run `work(layout)` in the checkout found from the working directory; print its one-line summary.

    Exit codes as the CLI: 0 done, 1 a check failed, 2 bad usage. The stage holds the checkout's writer lock
    (the one `fabricref compile`, `measured import`, `new`, `pin` and `retrieve --refresh` take), so no two
    writers interleave, and runs within the command time limit (pipeline/core/deadline.py)."""
    try:
        with bounded(), command():
            lay = settle(layout())
            with checkout_lock(lay.root):
                message = work(lay)
    except FabricrefError as exc:
        sys.stderr.write(f"error: {exc}\n")
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
