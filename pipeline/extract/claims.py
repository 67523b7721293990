"""What a source's rules read from one pinned revision (the extract stage's library; audit, diff and status read
through it too). Every call parses the snapshot afresh; DVC caches the stage."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..core import patterns, pins
from ..core.paths import Layout
from ..core.schemas import validate
from ..core.sources import Source
from ..core.store import SnapshotStore
from ..core.vocabulary import vocabulary
from ..errors import ExtractionError, FabricrefError
from . import rules as rule_engine


def parse_snapshot(lay: Layout, source: Source, rev: pins.Revision) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Rule id → parsed value for one revision's bytes, plus rule id → error for rules that failed."""
    vocab = vocabulary(lay)
    data = SnapshotStore(lay.store_dir).read(rev.sha256)
    soup = rule_engine.parse_document(data)
    parsed: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    for rule in source.rules:
        try:
            parsed[rule.id] = asdict(rule_engine.apply(soup, rule, vocab[rule.field], source.id, rev.revision))
        except ExtractionError as exc:
            errors[rule.id] = str(exc)
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
        **rev.model_dump(include={"revision", "sha256", "retrieved_at", "url", "origin"}),
        "snapshot_path": lay.relative(SnapshotStore(lay.store_dir).path_for(rev.sha256)),
        **{k: value[k] for k in ("locator", "excerpt", "stated")},
        "carried_from_revision": carried_from,
    }


def extract_source(lay: Layout, source: Source, revision: int | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Claims for one source at its current (or a given) revision, and the per-field failure report."""
    history = pins.load(lay, source.id)
    if history is None:
        return [], [f"source {source.id}: no pin; run `fabricref retrieve` first"]
    rev = history.get(revision) if revision is not None else history.current
    parsed, errors = parse_snapshot(lay, source, rev)
    claims, failures = [], []
    for rule in source.rules:
        value, carried_from, used_rev = parsed.get(rule.id), None, rev
        if value is None and rule.on_no_match == "keep-previous":
            value, used_rev = _previous_value(lay, source, history, rev.revision, rule.id)
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
            **{k: value[k] for k in ("value_number", "value_text", "unit", "direction")},
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
    lay: Layout, source: Source, history: pins.PinHistory, before: int, rule_id: str
) -> tuple[dict[str, Any] | None, pins.Revision]:
    for older in reversed(history.revisions[: before - 1]):
        parsed, _ = parse_snapshot(lay, source, older)
        if rule_id in parsed:
            return parsed[rule_id], older
    return None, history.current


def claim_status(source: Source, rule: Any, value: dict[str, Any]) -> str:
    """A rule may read the status from the text itself ("expected", "up to"): it moves when the document does."""
    if rule.preliminary_when:
        where = f"source {source.id} rule {rule.id}: preliminary_when"
        try:
            found = patterns.search(rule.preliminary_when, value["excerpt"], where)
        except FabricrefError as exc:
            raise ExtractionError(str(exc)) from None
        if found:
            return "preliminary"
    return rule.status or source.status


def claims_at(
    lay: Layout, source: Source, revision: int
) -> tuple[dict[str, dict[str, Any]], dict[str, str], pins.Revision]:
    """Parsed values (with status) of every rule at one revision, the rules that failed, and the revision."""
    history = pins.load(lay, source.id)
    if history is None:
        raise ExtractionError(f"source {source.id}: no pin")
    rev = history.get(revision)
    parsed, errors = parse_snapshot(lay, source, rev)
    out = {
        rule.id: {**parsed[rule.id], "field": rule.field, "status": claim_status(source, rule, parsed[rule.id])}
        for rule in source.rules
        if rule.id in parsed
    }
    return out, errors, rev
