"""`python -m fabricref.extract` (the DVC stage): every source's rules over its current snapshot."""

from ..core.entry import run_stage
from ..core.paths import Layout
from ..core.sources import load_sources
from . import stage


def main(lay: Layout) -> str:
    return f"extracted {len(stage.run(lay, load_sources(lay)))} source(s)"


run_stage(main)
