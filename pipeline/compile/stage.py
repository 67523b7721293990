"""Compile: claims + reference models + pins → field records → registry tables."""

from __future__ import annotations

from typing import Any

from ..core import evidence, model_revisions, pins
from ..core.paths import Layout
from ..core.schemas import load_json
from ..core.sources import Source, load_sources
from ..core.store import SnapshotStore
from ..core.units import Quantity
from ..core.vocabulary import vocabulary
from ..errors import CompileError
from . import registry
from .references import Reference, load_references, resolve


def load_claims(lay: Layout, sources: list[Source]) -> dict[str, dict[str, Any]]:
    claims: dict[str, dict[str, Any]] = {}
    for source in sources:
        path = lay.claims_dir / f"{source.id}.json"
        if not path.exists():
            raise CompileError(f"{lay.relative(path)} is missing: run the extract stage first")
        for claim in load_json(path)["claims"]:
            claims[f"{claim['source_id']}#{claim['rule_id']}"] = claim
    return claims


def check_evidence(lay: Layout, sources: list[Source], claims: dict[str, dict[str, Any]]) -> None:
    """The evidence policy (core/evidence.py): each source's and rule's status, then each claim as extracted."""
    kinds = {}
    for source in sources:
        evidence.check_source(source, lay.relative(source.path) if source.path else source.id)
        kinds[source.id] = source.publisher_kind
    for cite, claim in sorted(claims.items()):
        kind = kinds.get(claim["source_id"])
        if kind is not None and claim["status"] not in evidence.MAY_STATE[kind]:
            path = lay.relative(lay.claims_dir / f"{claim['source_id']}.json")
            raise CompileError(
                f"{path}: claim {cite}: status {claim['status']!r}, but its source's publisher_kind {kind!r} may "
                f"make a field only {' or '.join(evidence.MAY_STATE[kind])}; rerun extract"
            )


def run(lay: Layout) -> list[Reference]:
    sources = load_sources(lay)
    claims = load_claims(lay, sources)
    check_evidence(lay, sources, claims)
    refs = load_references(lay)
    by_id = {s.id: s for s in sources}
    for ref in refs:
        resolve(ref, claims, by_id)
    registry.write_tables(lay, rows(lay, sources, claims, refs))
    return refs


def _row(table: str, values: dict[str, Any]) -> tuple[Any, ...]:
    """`values` in the order of `table`'s columns (registry.TABLES), a column missing from them empty."""
    return tuple(values.get(name) for name, _ in registry.TABLES[table][0])


def rows(
    lay: Layout, sources: list[Source], claims: dict[str, dict[str, Any]], refs: list[Reference]
) -> dict[str, list[tuple[Any, ...]]]:
    vocab = vocabulary(lay)
    out: dict[str, list[tuple[Any, ...]]] = {name: [] for name in registry.TABLES}
    store = SnapshotStore(lay.store_dir)
    for ref in refs:
        out["reference_models"].append(
            (ref.id, ref.kind, ref.title, ref.form_factor, ref.summary, lay.relative(ref.path), ref.model_sha256)
        )
        for name, p in sorted(ref.parameters.items()):
            out["parameters"].append((ref.id, name, p.value, p.unit, p.direction, p.why))
        for key, a in sorted(ref.assumptions.items()):
            spec = vocab[key]
            value = Quantity(float(a.value), a.unit, a.direction).to(spec.stored_unit or "count", spec.direction)
            out["assumptions"].append((ref.id, key, value.value, value.unit, value.direction, a.why))
        for key, r in sorted(ref.records.items()):
            check = {f"check_{k}": v for k, v in (r.get("check") or {}).items()}
            stated = r["status"] in ("published", "preliminary")
            out["fields"].append(
                _row(
                    "fields",
                    {
                        **r,
                        **check,
                        "check_value": check.get("check_value_number"),
                        "description": vocab[key].description,
                        "conflict": r.get("conflict", False) if stated else None,
                    },
                )
            )
            weighed = {c["cite"]: c for c in r.get("claims", [])}
            for p in r.get("provenance", []):
                cite = f"{p['source_id']}#{p['rule_id']}"
                row = {**p, **weighed[cite], "reference_id": ref.id, "field": key}
                out["field_citations"].append(
                    _row("field_citations", {**row, "chosen": r.get("chosen") in (None, cite)})
                )
            for position, name in enumerate(r.get("inputs", [])):
                out["field_inputs"].append((ref.id, key, position, name))
    out["model_revisions"] = model_revisions.rows(lay)
    for source in sources:
        own = {"source_id": source.id, "rule_count": len(source.rules)}
        described = {name: getattr(source, name) for name, _ in registry.TABLES["sources"][0] if name not in own}
        out["sources"].append(_row("sources", {**described, **own}))
        history = pins.load(lay, source.id)
        for rev in history.revisions if history else []:
            snapshot = {"source_id": source.id, "snapshot_path": lay.relative(store.path_for(rev.sha256))}
            current = rev.revision == history.current.revision
            out["snapshots"].append(_row("snapshots", {**rev.model_dump(), **snapshot, "is_current": current}))
    for claim in claims.values():
        out["claims"].append(_row("claims", {**claim["provenance"], **claim}))
    return out
