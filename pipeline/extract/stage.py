"""Run every source's rules over its pinned snapshot and write claims, reusing work by snapshot hash."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core import pins
from ..core.errors import ExtractionError, FabricrefError
from ..core.files import atomic_write_json
from ..core.paths import Layout
from ..core.schemas import validate
from ..core.sources import Source
from ..core.store import SnapshotStore
from ..core.vocabulary import vocabulary
from . import rules as rule_engine


@dataclass
class ExtractStats:
    parsed: list[str] = field(default_factory=list)  # snapshots actually parsed this run
    reused: list[str] = field(default_factory=list)  # snapshots whose results came from the cache


def _cache_path(lay: Layout, sha256: str, rules_hash: str):
    return lay.cache_dir / "extract" / f"{sha256}-{rules_hash[:16]}.json"


def parse_snapshot(
    lay: Layout, source: Source, rev: pins.Revision, stats: ExtractStats | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Rule id → parsed value for one revision's bytes, plus rule id → error for rules that failed.

    Results are cached by (snapshot sha256, rules hash): an unchanged snapshot is not parsed again.
    """
    cache = _cache_path(lay, rev.sha256, source.rules_hash)
    if cache.exists():
        try:
            cached = json.loads(cache.read_text())
            if stats is not None:
                stats.reused.append(source.id)
            return cached["parsed"], cached["errors"]
        except (ValueError, KeyError):
            pass  # a damaged cache entry is simply recomputed
    data = SnapshotStore(lay.store_dir).read(rev.sha256)
    soup = rule_engine.parse_document(data)
    vocab = vocabulary(lay)
    parsed: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    for rule in source.rules:
        try:
            parsed[rule.id] = asdict(rule_engine.apply(soup, rule, vocab[rule.field], source.id, rev.revision))
        except ExtractionError as exc:
            errors[rule.id] = str(exc)
    if stats is not None:
        stats.parsed.append(source.id)
    with contextlib.suppress(FabricrefError):  # the cache is an optimisation; a read-only checkout still extracts
        atomic_write_json(cache, {"parsed": parsed, "errors": errors})
    return parsed, errors


def _provenance(
    lay: Layout,
    source: Source,
    rev: pins.Revision,
    rule_id: str,
    value: dict[str, Any],
    carried_from: int | None = None,
) -> dict[str, Any]:
    return {
        "source_id": source.id,
        "rule_id": rule_id,
        "revision": rev.revision,
        "sha256": rev.sha256,
        "retrieved_at": rev.retrieved_at,
        "url": rev.url,
        "snapshot_path": lay.relative(SnapshotStore(lay.store_dir).path_for(rev.sha256)),
        "locator": value["locator"],
        "excerpt": value["excerpt"],
        "origin": rev.origin,
        "stated": value["stated"],
        "carried_from_revision": carried_from,
    }


def extract_source(
    lay: Layout, source: Source, revision: int | None = None, stats: ExtractStats | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Claims for one source at its current (or a given) revision, and the per-field failure report."""
    history = pins.load(lay, source.id)
    if history is None:
        return [], [f"source {source.id}: no pin; run `fabricref retrieve` first"]
    rev = history.get(revision) if revision is not None else history.current
    parsed, errors = parse_snapshot(lay, source, rev, stats)
    claims, failures = [], []
    for rule in source.rules:
        value, carried_from, used_rev = parsed.get(rule.id), None, rev
        if value is None and rule.on_no_match == "keep-previous":
            value, used_rev = _previous_value(lay, source, history, rev.revision, rule.id, stats)
            carried_from = used_rev.revision if value is not None else None
        if value is None:
            failures.append(errors[rule.id])
            continue
        claim = {
            "record": "claim",
            "source_id": source.id,
            "rule_id": rule.id,
            "field": rule.field,
            "subject": rule.subject,
            "value_number": value["value_number"],
            "value_text": value["value_text"],
            "unit": value["unit"],
            "direction": value["direction"],
            "status": claim_status(source, rule, value),
            "provenance": _provenance(lay, source, used_rev, rule.id, value, carried_from),
        }
        if carried_from is not None:
            # The record rests on the older revision, and says so next to the revision it failed on.
            claim["provenance"]["stated"] = (
                f"{value['stated']} (kept from revision {carried_from}: rule no longer matches revision "
                f"{rev.revision}, sha256 {rev.sha256})"
            )
        validate(claim, "field.schema.json", f"claim {source.id}#{rule.id}")
        claims.append(claim)
    return claims, failures


def _previous_value(
    lay: Layout, source: Source, history: pins.PinHistory, before: int, rule_id: str, stats: ExtractStats | None
) -> tuple[dict[str, Any] | None, pins.Revision]:
    for older in reversed(history.revisions[: before - 1]):
        parsed, _ = parse_snapshot(lay, source, older, stats)
        if rule_id in parsed:
            return parsed[rule_id], older
    return None, history.current


def claim_status(source: Source, rule: Any, value: dict[str, Any]) -> str:
    """A rule may read the status from the text itself ("expected", "up to"): it moves when the document does."""
    if rule.preliminary_when and re.search(rule.preliminary_when, value["excerpt"]):
        return "preliminary"
    return rule.status or source.status


def claims_at(
    lay: Layout, source: Source, revision: int, stats: ExtractStats | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, str], pins.Revision]:
    """Parsed values (with status) of every rule at one revision, the rules that failed, and the revision."""
    history = pins.load(lay, source.id)
    if history is None:
        raise ExtractionError(f"source {source.id}: no pin")
    rev = history.get(revision)
    parsed, errors = parse_snapshot(lay, source, rev, stats)
    out = {}
    for rule in source.rules:
        if rule.id in parsed:
            out[rule.id] = {
                **parsed[rule.id],
                "field": rule.field,
                "status": claim_status(source, rule, parsed[rule.id]),
            }
    return out, errors, rev


def run(lay: Layout, sources: list[Source]) -> ExtractStats:
    """Write registry/claims/<source>.json for every source; fail with a per-field report if any rule fails."""
    stats = ExtractStats()
    results, report = {}, []
    for source in sources:
        claims, failures = extract_source(lay, source, stats=stats)
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
    return stats
