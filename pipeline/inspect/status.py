"""Status at a glance: sources (revision, hashes, rules), references (fields by status, unknowns), models.
Anything that needs attention makes the command exit non-zero, so it can guard CI."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..core import model_revisions, pins
from ..core.paths import Layout
from ..core.sources import load_sources
from ..core.store import SnapshotStore
from ..errors import FabricrefError
from ..extract.claims import claim_status, parse_snapshot


def status(lay: Layout) -> dict[str, Any]:
    attention: list[str] = []
    sources = []
    store = SnapshotStore(lay.store_dir)
    for source in load_sources(lay):
        history = pins.load(lay, source.id)
        row: dict[str, Any] = {"source_id": source.id}
        if history is None:
            attention.append(f"source {source.id}: no pin")
            sources.append({**row, "revision": None})
            continue
        rev = history.current
        row.update(revision=rev.revision, retrieved_at=rev.retrieved_at, origin=rev.origin, sha256=rev.sha256)
        try:
            store.read(rev.sha256, size=rev.size)
            row["hash_ok"] = True
        except FabricrefError as exc:
            row["hash_ok"] = False
            attention.append(f"source {source.id} revision {rev.revision}: {exc}")
            sources.append(row)
            continue
        edited = pins.edited_transcription(lay, source.id, rev)
        row["transcription_ok"] = edited is None
        if edited:
            attention.append(f"source {source.id} revision {rev.revision}: {edited}")
        parsed, errors = parse_snapshot(lay, source, rev)
        failing = [r.id for r in source.rules if r.id not in parsed and r.on_no_match == "fail"]
        kept = [r.id for r in source.rules if r.id not in parsed and r.on_no_match == "keep-previous"]
        for rule_id in failing:
            attention.append(errors[rule_id])
        counts = Counter(claim_status(source, r, parsed[r.id]) for r in source.rules if r.id in parsed)
        row.update(
            rules_ok=not failing,
            failing_rules=failing,
            kept_from_previous=kept,
            fields_by_status=dict(sorted(counts.items())),
        )
        sources.append(row)
    model_rows = []
    for model, revision, _sha, changed_on, is_current, pinned in model_revisions.rows(lay):
        if is_current:
            model_rows.append({"model": model, "revision": revision, "changed_on": changed_on, "pinned": pinned})
            if not pinned:
                attention.append(f"model {model} changed since its last pinned revision; run `fabricref pin-model`")
    references = _references(lay, attention)
    return {"sources": sources, "references": references, "models": model_rows, "attention": attention}


def _references(lay: Layout, attention: list[str]) -> list[dict[str, Any]]:
    from ..core.registry import open_tables

    try:
        con = open_tables(lay, "tables")
    except FabricrefError as exc:
        attention.append(f"registry not built: {exc}")
        return []
    try:
        _, rows = con.tuples("SELECT reference_id, status, field FROM fields ORDER BY 1, 3")
    finally:
        con.close()
    out: dict[str, dict[str, Any]] = {}
    for ref, st, field in rows:
        entry = out.setdefault(ref, {"reference_id": ref, "by_status": Counter(), "unknowns": []})
        entry["by_status"][st] += 1
        if st == "unknown":
            entry["unknowns"].append(field)
    return [{**e, "by_status": dict(sorted(e["by_status"].items()))} for e in out.values()]
