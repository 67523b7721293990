"""Run every source's rules over its pinned snapshot and write claims, reusing verified cached parses."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core import patterns, pins
from ..core.code import import_statements
from ..core.errors import ExtractionError, FabricrefError
from ..core.files import atomic_write_json, canonical_json, new_file_mode
from ..core.paths import Layout
from ..core.schemas import validate
from ..core.sources import Source
from ..core.store import SnapshotStore
from ..core.vocabulary import FieldSpec, vocabulary
from . import rules as rule_engine

CACHE_FORMAT = 2
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the `pipeline` package


@dataclass
class ExtractStats:
    parsed: list[str] = field(default_factory=list)  # snapshots actually parsed this run
    reused: list[str] = field(default_factory=list)  # snapshots whose results came from the cache
    rejected: list[str] = field(default_factory=list)  # cache entries that failed verification (then parsed)


def _sha256_json(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _imports(path: Path, package_root: Path) -> set[Path]:
    """Files of the `pipeline` package that one module imports (relative imports and `pipeline.` imports)."""
    here = path.relative_to(package_root).parent.parts
    found: set[Path] = set()
    for level, name, names in import_statements(path.read_text(encoding="utf-8"), str(path)):
        targets: list[tuple[str, ...]] = []
        if level >= 0:  # from ... import ...
            if level:
                base = here[: len(here) - (level - 1)] if level > 1 else here
            elif name and name.split(".")[0] == package_root.name:
                base = ()
            else:
                continue
            module = tuple(name.split(".")) if name else ()
            if not level:
                module = module[1:]
            targets = [(*base, *module)] + [(*base, *module, alias) for alias in names]
        else:
            targets = [tuple(alias.split("."))[1:] for alias in names if alias.split(".")[0] == package_root.name]
        for parts in targets:
            for candidate in (
                package_root.joinpath(*parts).with_suffix(".py"),
                package_root.joinpath(*parts, "__init__.py"),
            ):
                if parts and candidate.is_file():
                    found.add(candidate)
    return found


def code_files(package_root: Path = PACKAGE_ROOT) -> list[Path]:
    """pipeline/extract/*.py and every module of the package they import, transitively: the extractor's code."""
    todo = sorted((package_root / "extract").glob("*.py"))
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(sorted(_imports(path, package_root) - seen))
    return sorted(seen)


def code_version(package_root: Path = PACKAGE_ROOT) -> str:
    """Hash of the extractor's source files and of the libraries that read a snapshot (the HTML parser, the CSS
    selectors, `regex`, which runs the rules' patterns): any edit or upgrade recomputes every entry."""
    parts = {
        p.relative_to(package_root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in code_files(package_root)
    }
    libraries = {name: importlib.metadata.version(name) for name in ("beautifulsoup4", "soupsieve", "regex")}
    return _sha256_json({"files": parts, "libraries": libraries, "python": list(sys.version_info[:2])})


_CODE_VERSION: str | None = None


def _code_version() -> str:
    global _CODE_VERSION
    if _CODE_VERSION is None:
        _CODE_VERSION = code_version()
    return _CODE_VERSION


def cache_key(source: Source, rev: pins.Revision, vocab: dict[str, FieldSpec]) -> dict[str, Any]:
    """Everything that shapes a parse result: snapshot, rules, the vocabulary entries they use, code."""
    used = {rule.field: vocab[rule.field].model_dump(mode="json") for rule in source.rules if rule.field in vocab}
    return {
        "format": CACHE_FORMAT,
        "source_id": source.id,
        "revision": rev.revision,
        "snapshot_sha256": rev.sha256,
        "rules_sha256": source.rules_hash,
        "vocabulary_sha256": _sha256_json(used),
        "code_version": _code_version(),
    }


def _cache_path(lay: Layout, key: dict[str, Any]) -> Path:
    return lay.cache_dir / "extract" / f"{key['snapshot_sha256']}-{_sha256_json(key)[:32]}.json"


def _read_cache(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The cached payload if the entry is for exactly this key and its digest matches; else None."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    payload = entry.get("payload")
    if not isinstance(payload, dict) or entry.get("payload_sha256") != _sha256_json(payload):
        return None
    if not isinstance(payload.get("parsed"), dict) or not isinstance(payload.get("errors"), dict):
        return None
    return payload


def _write_cache_entry(path: Path, entry: dict[str, Any]) -> None:
    """A cache entry, renamed into place (a reader sees a whole entry or none) but not fsync'ed: the cache is an
    optimisation whose every entry is checked against its key and digest when read, so one lost or torn by a
    crash is parsed again. Two fsyncs per entry were a third of a cold extract's wall time (issue 16). A
    read-only checkout or a full disk still extracts."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), new_file_mode())
            handle.write(canonical_json(entry))
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def parse_snapshot(
    lay: Layout, source: Source, rev: pins.Revision, stats: ExtractStats | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Rule id → parsed value for one revision's bytes, plus rule id → error for rules that failed.

    Results are cached under a key of everything that shapes them (snapshot sha256, rules, the vocabulary
    entries the rules use, the extractor's code). An entry is used only if it stores exactly that key and
    its payload still matches its digest; anything else (stale, edited, damaged) is recomputed and replaced.
    """
    vocab = vocabulary(lay)
    key = cache_key(source, rev, vocab)
    cache = _cache_path(lay, key)
    if cache.exists():
        payload = _read_cache(cache, key)
        if payload is not None:
            if stats is not None:
                stats.reused.append(source.id)
            return payload["parsed"], payload["errors"]
        if stats is not None:
            stats.rejected.append(source.id)
    data = SnapshotStore(lay.store_dir).read(rev.sha256)
    soup = rule_engine.parse_document(data)
    parsed: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    for rule in source.rules:
        try:
            parsed[rule.id] = asdict(rule_engine.apply(soup, rule, vocab[rule.field], source.id, rev.revision))
        except ExtractionError as exc:
            errors[rule.id] = str(exc)
    if stats is not None:
        stats.parsed.append(source.id)
    payload = {"parsed": parsed, "errors": errors}
    _write_cache_entry(cache, {"key": key, "payload": payload, "payload_sha256": _sha256_json(payload)})
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
