"""`python -m fabricref.report` (the DVC stage `report`): the static HTML report from the registry's outputs alone,
both parts in one process (as `fabricref report`).

Python's cyclic garbage collector is off for this short-lived process, from before the imports on: collections
walking matplotlib's import-time objects and each figure's took 0.15 s (models) and 0.3 s (pages) of CPU. The
figures' reference cycles are then freed only at exit; peak memory measured the same within 5 MB."""

import gc

gc.disable()

import sys  # noqa: E402

from ..core.entry import run_stage  # noqa: E402
from ..core.paths import Layout  # noqa: E402
from ..errors import UsageError  # noqa: E402
from . import stage  # noqa: E402


def main(lay: Layout) -> str:
    if sys.argv[1:]:
        raise UsageError("usage: python -m fabricref.report")
    return f"report written to {lay.relative(stage.run(lay) / 'index.html')}"


run_stage(main, collect_cycles=False)
