"""`python -m pipeline.report [models | pages]` (the DVC stages report-models and report): the static HTML report
from the registry's outputs alone. With no argument, both parts in one process (as `fabricref report`)."""

import sys

from ..core.entry import run_stage
from ..core.errors import UsageError
from ..core.paths import Layout
from . import stage


def main(lay: Layout) -> str:
    args = sys.argv[1:]
    if args == ["models"]:
        return f"reference and cluster pages with drawings written to {lay.relative(stage.run_models(lay))}/"
    if args == ["pages"]:
        return f"workload pages, plots and index written to {lay.relative(stage.run_pages(lay) / 'index.html')}"
    if args:
        raise UsageError("usage: python -m pipeline.report [models | pages]")
    return f"report written to {lay.relative(stage.run(lay) / 'index.html')}"


run_stage(main)
