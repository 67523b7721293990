"""The extract stage: every source's rules over its pinned snapshot → registry/claims/<source>.json."""

from __future__ import annotations

from ..core.files import atomic_write_json
from ..core.paths import Layout
from ..core.sources import Source
from ..errors import ExtractionError
from .claims import extract_source


def run(lay: Layout, sources: list[Source]) -> list[str]:
    """Write registry/claims/<source>.json for every source; fail with a per-field report if any rule fails.
    Returns the ids of the sources written."""
    results, report = {}, []
    for source in sources:
        claims, failures = extract_source(lay, source)
        report.extend(failures)
        results[source.id] = claims
    if report:
        raise ExtractionError("rules that do not match (nothing written):\n" + "\n".join(f"  - {r}" for r in report))
    lay.claims_dir.mkdir(parents=True, exist_ok=True)
    for stale in lay.claims_dir.glob("*.json"):
        if stale.stem not in results:
            stale.unlink()
    for source_id, claims in results.items():
        atomic_write_json(
            lay.claims_dir / f"{source_id}.json",
            {"source_id": source_id, "claims": sorted(claims, key=lambda c: c["rule_id"])},
        )
    return list(results)
