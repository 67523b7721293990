"""`python -m fabricref.traffic PART`: one stage of the traffic work (dvc.yaml; people: `fabricref traffic`).

PART is `workload ID`, `sharing ID`, `curves` (the KV-transfer curve and the measured logs beside the model, which
no workload changes) or `combine` (the tables from the others' parts). Each part imports only what it runs: the
combine step none of the traffic library."""

import sys

from ..core.entry import run_stage
from ..core.paths import Layout
from ..errors import UsageError

USAGE = "usage: python -m fabricref.traffic workload ID | sharing ID | curves | combine"


def main(lay: Layout) -> str:
    args = sys.argv[1:]
    if args == ["combine"]:
        from .tables import run_combine

        return run_combine(lay)
    if args == ["curves"]:
        from . import comparison, stage

        return f"{stage.run_kv(lay)}; {comparison.run_stage(lay)}"
    if len(args) == 2 and args[0] in ("workload", "sharing"):
        from . import stage

        return getattr(stage, f"run_{args[0]}")(lay, args[1])
    if args in (["kv"], ["comparison"]):
        raise UsageError(f"`{args[0]}` is part of `curves` (the DVC stage traffic-curves); {USAGE}")
    raise UsageError(USAGE)


run_stage(main)
