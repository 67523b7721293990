"""Status at a glance: sources (revision, hashes, rules), references (fields by status, unknowns), models.
Anything that needs attention makes the command exit non-zero, so it can guard CI; conflicting sources and checks
that disagree with a stated figure are information: the record as it is, not a fault to fix."""

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
    attention += pins.measured_problems(lay)
    attention += _damaged_outputs(lay) + _gutted_outputs(lay) + _stale_topology(lay)
    model_rows = []
    for model, revision, _sha, changed_on, is_current, pinned in model_revisions.rows(lay):
        if is_current:
            model_rows.append({"model": model, "revision": revision, "changed_on": changed_on, "pinned": pinned})
            if not pinned:
                attention.append(f"model {model} changed since its last pinned revision; run `fabricref pin-model`")
    references, conflicts, checks = _references(lay, attention)
    return {
        "sources": sources,
        "references": references,
        "models": model_rows,
        "conflicts": conflicts,
        "disagreeing_checks": checks,
        "attention": attention,
    }


def _damaged_outputs(lay: Layout) -> list[str]:
    """Every Parquet file the stages wrote beside registry/tables checked against its recorded hash (the tables
    are verified as `_references` opens them; a killed build's leftovers, `.tables.<pid>`, are no output)."""
    from ..core.registry import verify_file

    problems = []
    for path in sorted(lay.registry_dir.rglob("*.parquet")):
        parts = path.relative_to(lay.registry_dir).parts[:-1]
        if parts[:1] == ("tables",) or any(part.startswith(".") for part in parts):
            continue
        try:
            verify_file(path)
        except FabricrefError as exc:
            problems.append(f"registry: {exc}")
    return problems


def _stale_topology(lay: Layout) -> list[str]:
    """The `topology` knobs params.yaml changed since the topology was built (the estimates use the old wiring)."""
    from ..topology.facts import stale_defaults

    try:
        return [f"params.yaml: {m}" for m in stale_defaults(lay)]
    except FabricrefError as exc:  # params.yaml itself refused: said where it is read
        return [f"params.yaml: {exc}"]


# registry/<directory> → the directory its stage reads (dvc.yaml): a stage that failed midway under DVC leaves its
# output directory removed or empty while what was built from it is still there.
_BUILT_FROM = {"topology": "tables", "traffic": "topology", "validation": "topology"}


def _gutted_outputs(lay: Layout) -> list[str]:
    """A stage's table directory without its tables while a directory built from it holds some: every reader of
    it fails until `dvc repro` (or `dvc checkout`) puts it back."""

    def built(sub: str) -> bool:
        return any((lay.registry_dir / sub).rglob("*.parquet"))

    problems = []
    for sub, source in _BUILT_FROM.items():
        if built(sub) and not built(source):
            problems.append(
                f"registry: registry/{source}/ holds no table while registry/{sub}/, built from it, does; run "
                "`dvc repro` (or `dvc checkout`)"
            )
    return problems


def _references(lay: Layout, attention: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Any]]:
    """Fields by status per reference; the conflicts (every claim with its value, date and source); the checks that
    disagree with the stated figure."""
    from ..core.citing import check_of, check_text, conflict_text
    from ..core.format import format_field
    from ..core.registry import open_tables

    try:
        con = open_tables(lay, "tables")
    except FabricrefError as exc:
        attention.append(f"registry not built: {exc}")
        return [], [], []
    with con:
        _, rows = con.tuples("SELECT reference_id, status, field FROM fields ORDER BY 1, 3")
        conflicted = con.rows("SELECT * FROM fields WHERE conflict ORDER BY reference_id, field")
        cites = con.rows(
            "SELECT * FROM field_citations WHERE (reference_id, field) IN (SELECT (reference_id, field) FROM fields "
            "WHERE conflict) ORDER BY reference_id, field, source_id, rule_id"
        )
        checked = con.rows("SELECT * FROM fields WHERE NOT check_agrees ORDER BY reference_id, field")
    out: dict[str, dict[str, Any]] = {}
    for ref, st, field in rows:
        entry = out.setdefault(ref, {"reference_id": ref, "by_status": Counter(), "unknowns": []})
        entry["by_status"][st] += 1
        if st == "unknown":
            entry["unknowns"].append(field)
    references = [{**e, "by_status": dict(sorted(e["by_status"].items()))} for e in out.values()]
    conflicts = []
    for f in conflicted:
        claims = [c for c in cites if (c["reference_id"], c["field"]) == (f["reference_id"], f["field"])]
        conflicts.append(
            {
                "reference_id": f["reference_id"],
                "field": f["field"],
                "value": format_field(f),
                "resolved_by": f["resolved_by"],
                "text": conflict_text(claims, f["resolved_by"]),
                "claims": [
                    {
                        "cite": f"{c['source_id']}#{c['rule_id']}",
                        "value_number": c["value_number"],
                        "value_text": c["value_text"],
                        "unit": c["unit"],
                        "published_on": c["published_on"],
                        "taken": bool(c["chosen"]),
                    }
                    for c in claims
                ],
            }
        )
    checks = [
        {"reference_id": f["reference_id"], "field": f["field"], "text": check_text(check_of(f) or {}, f)}
        for f in checked
    ]
    return references, conflicts, checks
