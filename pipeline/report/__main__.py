"""`python -m pipeline.report [models | pages]` (the DVC stages report-models and report): the static HTML report
from the registry's outputs alone. With no argument, both parts in one process (as `fabricref report`).

Python's cyclic garbage collector is off for this short-lived process, from before the imports on: collections
walking matplotlib's import-time objects and each figure's took 0.15 s (models) and 0.3 s (pages) of CPU. The
figures' reference cycles are then freed only at exit; peak memory measured the same within 5 MB."""

import gc

gc.disable()

import sys  # noqa: E402

from ..core.entry import run_stage  # noqa: E402
from ..core.errors import UsageError  # noqa: E402
from ..core.paths import Layout  # noqa: E402
from . import stage  # noqa: E402


def main(lay: Layout) -> str:
    args = sys.argv[1:]
    if args == ["models"]:
        return f"reference and cluster pages with drawings written to {lay.relative(stage.run_models(lay))}/"
    if args == ["pages"]:
        return f"workload pages, plots and index written to {lay.relative(stage.run_pages(lay) / 'index.html')}"
    if args:
        raise UsageError("usage: python -m pipeline.report [models | pages]")
    return f"report written to {lay.relative(stage.run(lay) / 'index.html')}"


run_stage(main, collect_cycles=False)
