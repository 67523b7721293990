"""`python -m fabricref.traffic PART`: one stage of the traffic work (dvc.yaml; people: `fabricref traffic`).

PART is `workload ID` (a workload on its targets), `sharing ID` (a workload beside its `shares_with`), `kv` (the
KV-transfer curve), `comparison` (the measured logs beside the model) or `combine` (the tables every reader knows,
from the parts the others wrote)."""

import sys

from ..core.entry import run_stage
from ..core.paths import Layout
from ..errors import UsageError

USAGE = "usage: python -m fabricref.traffic workload ID | sharing ID | kv | comparison | combine"


def main(lay: Layout) -> str:
    from . import stage

    args = sys.argv[1:]
    by_id = {"workload": stage.run_workload, "sharing": stage.run_sharing}
    alone = {"kv": stage.run_kv, "comparison": stage.run_comparison, "combine": stage.run_combine}
    if len(args) == 2 and args[0] in by_id:
        return by_id[args[0]](lay, args[1])
    if len(args) == 1 and args[0] in alone:
        return alone[args[0]](lay)
    raise UsageError(USAGE)


run_stage(main)
