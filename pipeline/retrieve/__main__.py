"""`python -m fabricref.retrieve` (the DVC stage): re-hash every pinned snapshot, write registry/snapshots.json."""

from ..core.entry import run_stage
from ..core.paths import Layout
from ..core.sources import load_sources
from . import stage


def main(lay: Layout) -> str:
    entries = stage.verify(lay, load_sources(lay))
    stage.write_manifest(lay, entries)
    return f"verified {len(entries)} pinned snapshot(s) against their SHA-256"


run_stage(main)
