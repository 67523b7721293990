"""`python -m fabricref.report PART` (the DVC stages `report-models` and `report`): one part of the static HTML
report (report/stage.py: PARTS)."""

import sys

from ..core.entry import run_stage
from ..core.paths import Layout
from ..errors import UsageError
from . import stage


def main(lay: Layout) -> str:
    if len(sys.argv) != 2 or sys.argv[1] not in stage.PARTS:
        raise UsageError(f"usage: python -m fabricref.report {' | '.join(stage.PARTS)}")
    out = stage.run(lay, (sys.argv[1],))
    return f"report ({sys.argv[1]}) written to {lay.relative(out)}/"


run_stage(main)
