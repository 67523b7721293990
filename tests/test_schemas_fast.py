"""The fast validator (jsonschema-rs, `pipeline.core.schemas._fast_valid`) says "valid" exactly where jsonschema
does: on every shipped file and on broken variants of them (a key removed, a value of another type or form, an
unknown key). jsonschema keeps the last word and writes every message; these tests guard that a "valid" from the
fast path is never one jsonschema would refuse."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import PROVENANCE, STATED, document_paths

# A venv made before jsonschema-rs joined the dependencies validates with jsonschema alone (correct, slower);
# `pip install -c constraints.txt -e '.[test]'` brings it (CI installs it).
pytest.importorskip("jsonschema_rs", reason="jsonschema-rs not installed: pip install -c constraints.txt -e .")

from fabricref.core.schemas import _fast_valid, _fast_validator, load_json, load_yaml, schema, validate
from fabricref.errors import ValidationError

ROOT = Path(__file__).resolve().parents[1]

# Every declarative format with its shipped files (discovered by glob).
SHIPPED = [
    ("source.schema.json", "sources/*.yaml"),
    ("reference.schema.json", "models/references/*.yaml"),
    ("cluster.schema.json", "models/clusters/*.yaml"),
    ("workload.schema.json", "models/workloads/*.yaml"),
    ("pins.schema.json", "sources/pins/*.json"),
    ("model-revisions.schema.json", "models/revisions/*/*.json"),
    ("identities.schema.json", "models/identities.json"),
    ("vocabulary.schema.json", "schemas/vocabulary.json"),
]

FIELD = STATED
CLAIM = {
    "record": "claim",
    "source_id": "demo-doc",
    "rule_id": "gpus",
    "field": "accelerator.count",
    "subject": "Demo",
    "value_number": 8.0,
    "value_text": "8",
    "unit": "count",
    "direction": None,
    "status": "published",
    "provenance": {**PROVENANCE, "stated": "8", "carried_from_revision": None},
}


@cache
def _jsonschema(name: str) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema(name), format_checker=Draft202012Validator.FORMAT_CHECKER)


def _documents(every: bool) -> list[tuple[str, str, Any]]:
    """(schema, label, plain data): the shipped files (the first and last of each format unless `every`), and
    a field record and a claim (the registry's records are outputs, not shipped)."""
    out: list[tuple[str, str, Any]] = [("field.schema.json", "field", FIELD), ("field.schema.json", "claim", CLAIM)]
    for name, pattern in SHIPPED:
        paths = sorted(ROOT.glob(pattern))
        assert paths, pattern
        for path in paths if every else sorted({paths[0], paths[-1]}):
            data = load_json(path) if path.suffix == ".json" else load_yaml(path)[0]
            if name == "workload.schema.json":  # its knobs live in params.yaml: the loader merges them in
                from fabricref.estimate.workloads import knobs_for

                data[data["kind"]].update(knobs_for(data["id"], ROOT / "params.yaml")[0])
            out.append((name, str(path.relative_to(ROOT)), data))
    return out


def _get(value: Any, parts: tuple[Any, ...]) -> Any:
    for part in parts:
        value = value[part]
    return value


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# Replacements for a value: other JSON types, edge numbers, and strings of forms the patterns and lengths tell
# apart (a Unicode separator Python's \s matches and ECMA's does not; a trailing newline `$` would let through).
REPLACEMENTS: list[Any] = [None, True, 0, -1, 1.5, 1.0, "", "x", "a\x1cb", "ok-id\n", "Ünïcode ٣", [], {}]


def _variants(data: Any, every: bool) -> list[Any]:
    """Broken copies of `data` at about 4 of its paths (8 with `every`), spread over the document."""
    paths = document_paths(data)
    paths = paths[:: max(1, len(paths) // (8 if every else 4))]
    out = []
    for parts in paths:
        target = _get(data, parts)
        for new in REPLACEMENTS:
            if parts and new != target:
                changed = _copy(data)
                _get(changed, parts[:-1])[parts[-1]] = new
                out.append(changed)
        if parts and isinstance(_get(data, parts[:-1]), dict):
            removed = _copy(data)
            del _get(removed, parts[:-1])[parts[-1]]
            out.append(removed)
        if isinstance(target, dict):
            extra = _copy(data)
            _get(extra, parts)["zz_unknown"] = 1
            out.append(extra)
        if isinstance(target, list) and target:
            doubled = _copy(data)
            _get(doubled, parts).append(_copy(target[0]))
            out.append(doubled)
    return out


def _check(every: bool) -> int:
    compared = 0
    for name, label, data in _documents(every):
        assert _fast_validator(name) is not None, f"{name} no longer takes the fast path"
        assert _fast_valid(data, name), label
        for variant in _variants(data, every):
            fast, slow = _fast_valid(variant, name), _jsonschema(name).is_valid(variant)
            assert fast == slow, (label, variant)
            compared += 1
    return compared


def test_fast_and_jsonschema_agree_on_shipped_files_and_broken_variants():
    assert _check(every=False) > 500


@pytest.mark.slow
def test_fast_and_jsonschema_agree_on_every_shipped_file_and_every_variant():
    assert _check(every=True) > 5000


def test_python_patterns_decide_not_rusts():
    # Python's \s matches U+001C (a separator); ECMA's, which Rust engines follow, does not: the URL must fail.
    source = load_yaml(ROOT / "sources" / sorted(p.name for p in (ROOT / "sources").glob("*.yaml"))[0])[0]
    assert _fast_valid(source, "source.schema.json")
    bad = {**source, "url": "https://example.test/a\x1cb"}
    assert not _jsonschema("source.schema.json").is_valid(bad)
    assert not _fast_valid(bad, "source.schema.json")
    # validate names the control character before the schema's pattern is tried (pipeline/core/text.py).
    with pytest.raises(ValidationError, match=r"s\.yaml: at \$\.url: .* holds the control character U\+001C"):
        validate(bad, "source.schema.json", "s.yaml")


def test_what_is_not_plain_json_goes_to_jsonschema():
    # jsonschema reads a tuple as no array; the fast path must not answer for it, nor for what it cannot read.
    record = {**FIELD, "provenance": (PROVENANCE,)}
    assert not _fast_valid(record, "field.schema.json")
    with pytest.raises(ValidationError, match=r"record: at \$\.provenance: .*is not of type 'array'"):
        validate(record, "field.schema.json", "record")
    # A lone surrogate is text to jsonschema; the fast path agrees, or cannot read it and leaves it to jsonschema.
    surrogate = {**FIELD, "value_text": "\ud800"}
    assert _jsonschema("field.schema.json").is_valid(surrogate)
    assert _fast_valid(surrogate, "field.schema.json")
    bad_id = {**FIELD, "reference_id": "demo\ud800"}
    assert not _fast_valid(bad_id, "field.schema.json")
    with pytest.raises(ValidationError, match=r"record: at \$\.reference_id: .* does not match the expected pattern"):
        validate(bad_id, "field.schema.json", "record")


def test_a_schema_with_a_keyword_not_vetted_takes_jsonschema_alone():
    from fabricref.core.schemas import _fast_schema, _NotFast

    for keyword, value in (("format", "date"), ("patternProperties", {"^a": {}}), ("$ref", "https://x.test/s")):
        with pytest.raises(_NotFast):
            _fast_schema({"type": "object", "properties": {"a": {keyword: value}}})
