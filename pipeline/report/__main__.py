"""`python -m pipeline.report` (the DVC stage): the static HTML report from the registry's outputs alone."""

from ..core.entry import run_stage
from ..core.paths import Layout
from . import stage


def main(lay: Layout) -> str:
    return f"report written to {lay.relative(stage.run(lay) / 'index.html')}"


run_stage(main)
