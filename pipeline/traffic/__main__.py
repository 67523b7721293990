"""`python -m pipeline.traffic [workload ID | sharing ID | kv | combine]` (the DVC stages, see dvc.yaml).

With no argument, everything in one process (as `fabricref traffic`)."""

import sys

from ..core.entry import run_stage
from ..core.errors import UsageError
from ..core.paths import Layout

USAGE = "usage: python -m pipeline.traffic [workload ID | sharing ID | kv | combine]"


def main(lay: Layout) -> str:
    args = sys.argv[1:]
    if args not in ([], ["kv"], ["combine"]) and not (len(args) == 2 and args[0] in ("workload", "sharing")):
        raise UsageError(USAGE)
    if args == ["combine"]:  # concatenating the parts needs DuckDB only, none of the estimating code
        from .combine import combine

        counts = combine(lay)
        return "combined " + ", ".join(f"{n} {name} rows" for name, n in counts.items()) + " into registry/traffic/"
    # Imported once the arguments are known good: the stage's libraries (numpy, scipy, networkx, DuckDB,
    # pydantic) are most of a short run's CPU, and a usage error needs none of them.
    from . import stage

    if not args:
        metrics = stage.run(lay)
        return f"estimated {len(metrics) - 1} workload × topology pairs into registry/traffic/"
    if args[0] == "workload":
        metrics = stage.run_workload(lay, args[1])
        return f"estimated {args[1]} on {len(metrics)} targets into {lay.relative(stage.workload_dir(lay, args[1]))}/"
    if args[0] == "sharing":
        n = stage.run_sharing(lay, args[1])
        return f"{n} shared phases into {lay.relative(stage.sharing_file(lay, args[1]))}"
    stage.run_kv(lay)
    return "KV-transfer curve into registry/traffic/plots/kv_transfer.csv"


run_stage(main, collect_cycles=False)
