"""`python -m pipeline.traffic` (the DVC stage): shipped workloads on the topology stage's graphs."""

from ..core.entry import run_stage
from ..core.paths import Layout
from . import stage


def main(lay: Layout) -> str:
    metrics = stage.run(lay)
    return f"estimated {len(metrics) - 1} workload × topology pairs into registry/traffic/"


run_stage(main)
