"""`python -m fabricref.topology` (the DVC stage): every reference and shipped cluster → registry/topology/."""

from ..core.entry import run_stage
from ..core.paths import Layout
from . import stage


def main(lay: Layout) -> str:
    summaries = stage.run(lay)
    return f"built {len(summaries)} topologies into {lay.relative(stage.topology_dir(lay))}/"


run_stage(main)
