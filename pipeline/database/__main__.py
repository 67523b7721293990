"""`python -m fabricref.database` (the DVC stage `database`): registry.duckdb's views and registry/views.json."""

from ..core.entry import run_stage
from ..core.paths import Layout
from ..core.registry import build_database


def main(lay: Layout) -> str:
    built = build_database(lay)
    return f"wrote {built.name}: views over the registry's Parquet tables (it holds no data of its own)"


run_stage(main)
