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
            out["fields"].append(
                (
                    ref.id,
                    key,
                    r["value_number"],
                    r["value_text"],
                    r["unit"],
                    r["direction"],
                    r["status"],
                    r["confidence"],
                    r.get("formula"),
                    r.get("reason"),
                    r.get("evidence_needed"),
                    r.get("chosen"),
                    r.get("choice_reason"),
                    vocab[key].description,
                    r.get("digits"),
                    r.get("conflict", False) if r["status"] in ("published", "preliminary") else None,
                    r.get("resolved_by"),
                    (r.get("check") or {}).get("formula"),
                    (r.get("check") or {}).get("value_number"),
                    (r.get("check") or {}).get("digits"),
                    (r.get("check") or {}).get("agrees"),
                )
            )
            weighed = {c["cite"]: c for c in r.get("claims", [])}
            for p in r.get("provenance", []):
                cite = f"{p['source_id']}#{p['rule_id']}"
                c = weighed[cite]
                out["field_citations"].append(
                    (
                        ref.id,
                        key,
                        p["source_id"],
                        p["rule_id"],
                        p["revision"],
                        p["sha256"],
                        p["retrieved_at"],
                        p["url"],
                        p["snapshot_path"],
                        p["locator"],
                        p["excerpt"],
                        p.get("stated"),
                        p["origin"],
                        p.get("carried_from_revision"),
                        r.get("chosen") in (None, cite),
                        c["value_number"],
                        c["value_text"],
                        c["unit"],
                        c["direction"],
                        c["status"],
                        c["digits"],
                        c["agrees"],
                        c["scope"],
                        c["published_on"],
                        c["publisher_kind"],
                        c["read_via"],
                    )
                )
            for position, name in enumerate(r.get("inputs", [])):
                out["field_inputs"].append((ref.id, key, position, name))
    out["model_revisions"] = model_revisions.rows(lay)
    for source in sources:
        out["sources"].append(
            (
                source.id,
                source.url,
                source.publisher,
                source.title,
                source.document_type,
                source.media_type,
                source.status,
                source.read_on,
                len(source.rules),
                source.publisher_kind,
                source.read_via,
                source.published_on,
            )
        )
        history = pins.load(lay, source.id)
        for rev in history.revisions if history else []:
            out["snapshots"].append(
                (
                    source.id,
                    rev.revision,
                    rev.retrieved_at,
                    rev.sha256,
                    rev.size,
                    rev.media_type,
                    rev.url,
                    rev.final_url,
                    rev.etag,
                    rev.last_modified,
                    rev.origin,
                    lay.relative(store.path_for(rev.sha256)),
                    rev.revision == history.current.revision,
                )
            )
    for claim in claims.values():
        p = claim["provenance"]
        out["claims"].append(
            (
                claim["source_id"],
                claim["rule_id"],
                claim["field"],
                claim["subject"],
                claim["value_number"],
                claim["value_text"],
                claim["unit"],
                claim["direction"],
                claim["status"],
                p["revision"],
                p["sha256"],
                p["locator"],
                p["excerpt"],
            )
        )
    return out
