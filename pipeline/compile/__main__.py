"""`python -m fabricref.compile` (the DVC stage): claims + reference models → registry/tables/*.parquet."""

from ..core.entry import run_stage
from ..core.paths import Layout
from . import stage


def main(lay: Layout) -> str:
    refs = stage.run(lay)
    return f"compiled {len(refs)} reference(s) into {lay.relative(lay.tables_dir)}/"


run_stage(main)
