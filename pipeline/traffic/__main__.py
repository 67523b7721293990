"""`python -m fabricref.traffic [-n JOBS]`: the traffic stage (dvc.yaml `traffic`; people: `fabricref traffic`).

Every workload on its targets, every sharing pair, the KV curve and the measured-vs-model comparison, in one
process; each item read from the item cache (.fabricref-cache/traffic/) when nothing that shapes it moved, the
others computed by JOBS worker processes (default: $FABRICREF_JOBS, else one per usable CPU)."""

import sys

from ..core.entry import run_stage
from ..core.paths import Layout
from ..errors import UsageError

USAGE = "usage: python -m fabricref.traffic [-n JOBS]   (JOBS: worker processes, a whole number ≥ 1)"


def main(lay: Layout) -> str:
    args = sys.argv[1:]
    jobs = None
    if args:
        if len(args) != 2 or args[0] not in ("-n", "--jobs") or not args[1].isdigit() or int(args[1]) < 1:
            raise UsageError(USAGE)
        jobs = int(args[1])
    # Imported once the arguments are known good: a usage error needs none of the stage's libraries (and a run
    # whose items all come from the cache none of the estimating code: pipeline/traffic/batch.py).
    from . import batch

    return batch.summary(batch.run(lay, jobs))


run_stage(main, collect_cycles=False)
