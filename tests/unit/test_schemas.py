"""Declarative files: errors name the file, the line or JSON path, and what was expected."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from conftest import PROVENANCE, STATED, bare_checkout
from fabricref.core import schemas
from fabricref.core.generate import main as formats_main
from fabricref.core.paths import check_slug
from fabricref.core.sources import load_source, load_sources
from fabricref.errors import ValidationError
from fabricref.formats import generated

GOOD = """\
id: demo-doc
url: https://example.test/demo.html
publisher: Example
title: Demo document
document_type: datasheet
media_type: text/html
status: published
rules:
  - id: gpus
    field: accelerator.count
    subject: Demo
    select: {row: GPUs}
    parse: {type: count}
publisher_kind: vendor-document
"""


def write(tmp_path, text, name="demo-doc"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def test_good_source_loads(tmp_path):
    assert load_source(write(tmp_path, GOOD)).rules[0].field == "accelerator.count"


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, GOOD.replace("title: Demo document", "title: [unclosed"))
    with pytest.raises(ValidationError, match=rf"{path}:\d+:\d+: malformed YAML"):
        load_source(path)


def test_wrong_type_names_file_line_and_json_path(tmp_path):
    path = write(tmp_path, GOOD.replace("parse: {type: count}", "parse: {type: 7}"))
    with pytest.raises(ValidationError) as err:
        load_source(path)
    assert f"{path}:13: at $.rules[0].parse.type: Input should be 'quantity', 'count' or 'text' (got 7)" in str(
        err.value
    )


def test_missing_and_unknown_keys(tmp_path):
    path = write(
        tmp_path,
        GOOD.replace("publisher: Example\n", "publisher: Example\ncolour: red\n").replace(
            "media_type: text/html\n", ""
        ),
    )
    with pytest.raises(ValidationError) as err:
        load_source(path)
    text = str(err.value)
    assert "at $.media_type: Field required" in text
    assert "at $.colour: Extra inputs are not permitted; expected only " in text


def test_duplicate_yaml_keys_are_refused(tmp_path):
    path = write(tmp_path, GOOD + "title: again\n")
    with pytest.raises(ValidationError, match="malformed YAML"):
        load_source(path)


@pytest.mark.parametrize("bad", ["../etc", "a/b", "..", "UPPER", "has space", "-lead", "trail-", "a--b", ""])
def test_path_tricks_in_ids_are_refused_before_any_path_is_built(tmp_path, bad):
    with pytest.raises(ValidationError, match="invalid source id"):
        check_slug(bad, "source id")
    path = write(tmp_path, GOOD.replace("id: demo-doc", f"id: '{bad}'"))
    with pytest.raises(ValidationError):
        load_source(path)


def test_id_must_match_file_name(tmp_path):
    path = write(tmp_path, GOOD, name="other-name")
    with pytest.raises(ValidationError, match="must equal the file name"):
        load_source(path)


def test_unknown_vocabulary_key_and_missing_direction(tmp_path):
    with pytest.raises(ValidationError, match=r"at \$.rules\[0\].field: 'gpu.count' is not a key"):
        load_source(write(tmp_path, GOOD.replace("field: accelerator.count", "field: gpu.count")))
    bandwidth = GOOD.replace("field: accelerator.count", "field: scale_out.nic.speed").replace(
        "parse: {type: count}", "parse: {type: quantity, unit: Gb/s}"
    )
    with pytest.raises(ValidationError, match="say whether the document states it per_direction or bidirectional"):
        load_source(write(tmp_path, bandwidth))


def test_nan_is_refused(tmp_path):
    from fabricref.core.schemas import validate

    with pytest.raises(ValidationError, match=r"at \$.x: NaN or infinite"):
        validate({"x": float("nan")}, "pins.schema.json", "pins.json")


def test_shipped_sources_all_validate(repo):
    assert len(load_sources(repo)) >= 6


# --- One source of truth per format: models generate the schemas, both accept the same documents ---------------

ROOT = Path(__file__).resolve().parents[2]


def test_committed_schemas_are_the_ones_the_models_generate():
    """Edit pipeline/formats, then run `python -m fabricref.formats`: a hand edit of schemas/ fails here."""
    made = generated()
    committed = sorted(p.name for p in (ROOT / "schemas").glob("*.schema.json"))
    assert committed == sorted(made), "every schema file comes from a model, and every model has its file"
    for name, text in made.items():
        assert (ROOT / "schemas" / name).read_text(encoding="utf-8") == text, f"schemas/{name} is stale"


def test_generation_is_deterministic_and_check_mode_names_a_stale_schema(tmp_path, capsys):
    bare_checkout(tmp_path)
    assert formats_main(["--root", str(tmp_path)]) == 0
    first = {p.name: p.read_bytes() for p in (tmp_path / "schemas").iterdir()}
    assert formats_main(["--root", str(tmp_path)]) == 0
    assert {p.name: p.read_bytes() for p in (tmp_path / "schemas").iterdir()} == first
    assert formats_main(["--check", "--root", str(tmp_path)]) == 0
    stale = tmp_path / "schemas" / "workload.schema.json"
    stale.write_text(stale.read_text().replace('"minimum": 1', '"minimum": 0', 1))
    capsys.readouterr()
    assert formats_main(["--check", "--root", str(tmp_path)]) == 1
    assert "schemas/workload.schema.json: differs from the schema generated" in capsys.readouterr().out


@cache
def _committed_validator(schema_name: str):
    import json

    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads((ROOT / "schemas" / schema_name).read_text()))


def _both(schema_name: str, instance: dict) -> tuple[bool, bool]:
    """(JSON Schema accepts, pydantic model accepts) for one document, the schema read from the committed file."""
    from fabricref.formats import adapter
    from pydantic import ValidationError as PydanticError

    by_schema = _committed_validator(schema_name).is_valid(instance)
    try:
        adapter(schema_name).validate_python(instance)
        by_model = True
    except PydanticError:
        by_model = False
    return by_schema, by_model


def _rule(**changes):
    rule = {"id": "r", "field": "accelerator.count", "subject": "Demo", "select": {"row": "GPUs"}}
    rule["parse"] = {"type": "count"}
    rule.update(changes)
    return rule


def _source(**rule_changes):
    return {
        "id": "demo-doc",
        "url": "https://example.test/demo.html",
        "publisher": "Example",
        "publisher_kind": "vendor-document",
        "title": "Demo document",
        "document_type": "datasheet",
        "media_type": "text/html",
        "status": "published",
        "rules": [_rule(**rule_changes)],
    }


@pytest.mark.parametrize(
    "changes",
    [
        {"select": {}},
        {"select": {"within": "table"}},
        {"select": {"css": "td", "row": "GPUs"}},
        {"select": {"css": ""}},
        {"parse": {"type": "count", "pattern": ""}},
        {"subject": "D"},
        {"id": "a--b"},
        {"parse": {"type": "count", "colour": "red"}},
    ],
)
def test_a_bad_rule_is_refused_by_both_the_model_and_the_schema(changes):
    """Case 5 of issue 11: pydantic accepted `select: {}` and an empty pattern that the JSON Schema refused."""
    assert _both("source.schema.json", _source(**changes)) == (False, False)


@pytest.mark.parametrize(
    "changes", [{"select": {"css": "td.x", "within": "table"}}, {"select": {"row": "GPUs", "expect": "first"}}]
)
def test_a_good_rule_is_accepted_by_both(changes):
    assert _both("source.schema.json", _source(**changes)) == (True, True)


def _shipped(pattern: str) -> list[Path]:
    return sorted(ROOT.glob(pattern))


@pytest.mark.parametrize(
    ("schema_name", "pattern"),
    [
        ("source.schema.json", "sources/*.yaml"),
        ("reference.schema.json", "models/references/*.yaml"),
        ("cluster.schema.json", "models/clusters/*.yaml"),
        ("workload.schema.json", "models/workloads/*.yaml"),
        ("topology-defaults.schema.json", "models/topology/defaults.yaml"),
        ("pins.schema.json", "sources/pins/*.json"),
        ("model-revisions.schema.json", "models/revisions/*/*.json"),
        ("identities.schema.json", "models/identities.json"),
        ("vocabulary.schema.json", "schemas/vocabulary.json"),
        ("calibration.schema.json", "models/calibration/collectives.yaml"),
        ("throughput.schema.json", "models/calibration/throughput.yaml"),
        ("validation.schema.json", "models/validation/*.yaml"),
    ],
)
def test_every_shipped_file_is_accepted_by_both(schema_name, pattern):
    from fabricref.core.schemas import load_json, load_yaml

    paths = _shipped(pattern)
    assert paths
    for path in paths:
        data = load_json(path) if path.suffix == ".json" else load_yaml(path)[0]
        if schema_name == "workload.schema.json":  # its knobs live in params.yaml: the loader merges them in
            from fabricref.core.schemas import _parse_yaml
            from fabricref.estimate.workloads import standalone_text

            data = _parse_yaml(standalone_text(path), path)
        if schema_name == "topology-defaults.schema.json":  # its values live in params.yaml: merged in
            from fabricref.core.schemas import load_yaml as load_doc
            from fabricref.topology.facts import merge_params

            data, doc = load_doc(path)
            merge_params(data, doc, path)
        if schema_name == "calibration.schema.json":  # its assumed numbers live in params.yaml: merged in
            import yaml
            from fabricref.estimate.calibration import standalone_text

            data = yaml.safe_load(standalone_text(path))
        assert _both(schema_name, data) == (True, True), path


def test_every_calibration_file_has_its_schema():
    """models/calibration/ holds files of two schemas (collectives, throughput): a new file there must be named
    in the list above, so no calibration file goes unchecked."""
    checked = {"collectives.yaml", "throughput.yaml"}
    assert {p.name for p in _shipped("models/calibration/*.yaml")} == checked


REFERENCE = ROOT / "models" / "references" / "nvidia-dgx-h100.yaml"
SHORT = (
    "    unknown: The documents read name OSFP and QSFP112 ports but no document read states cage types per port as "
    "a specification of record.\n"
)


@pytest.mark.parametrize(
    ("replacement", "expected"),
    [
        (
            "    unknown: too short\n",
            "at $.fields.physical.cage_types.unknown: as `unknown`: String should have at least 10 characters "
            "(got 'too short')",
        ),
        (
            "    unknown: No document declared in this registry states it.\n    evidence: a datasheet\n",
            "at $.fields.physical.cage_types.evidence: as `unknown`: Extra inputs are not permitted; expected only "
            "evidence_needed, unknown",
        ),
        (
            "    cite: []\n",
            "at $.fields.physical.cage_types.cite: as `cite`: List should have at least 1 item after validation, "
            "not 0 (got [])",
        ),
        (
            "    formula: ''\n",
            "at $.fields.physical.cage_types.formula: as `formula`: String should have at least 1 character (got '')",
        ),
        (
            "    note: nobody says\n",
            "at $.fields.physical.cage_types: expected one of cite, formula, unknown (got {'note': 'nobody says', ",
        ),
    ],
)
def test_a_union_failure_names_the_alternative_meant_and_why(tmp_path, replacement, expected):
    """Case 5 of issue 11: a `oneOf` failure used to print the whole object "is not valid under any of the given
    schemas"; now the discriminating key picks the alternative, and its own error is reported with file:line."""
    from fabricref.compile.references import load_reference

    text = REFERENCE.read_text()
    assert SHORT in text
    path = tmp_path / REFERENCE.name
    path.write_text(text.replace(SHORT, replacement))
    line = text.splitlines().index(SHORT.rstrip("\n")) + 1
    with pytest.raises(ValidationError) as err:
        load_reference(path)
    message = str(err.value)
    # The line of the value at fault: the reason, the empty list, or (for an unexpected key) that key.
    at_line = line + 1 if "evidence:" in replacement else line if "note:" not in replacement else line - 1
    assert f"{path}:{at_line}: {expected}" in message
    assert "is not valid under any of the given schemas" not in message


def test_a_workload_names_the_kind_it_was_meant_to_be(tmp_path):
    from fabricref.estimate.workloads import load_workload, standalone_text

    source = ROOT / "models" / "workloads" / "llama8b-fsdp-dp64.yaml"
    path = tmp_path / source.name
    path.write_text(standalone_text(source).replace("  sharded: true\n", "  sharded: true\n  tp_size: 2\n"))
    with pytest.raises(ValidationError) as err:
        load_workload(path)
    line = path.read_text().splitlines().index("  tp_size: 2") + 1
    # The message lists every key a training block may have: all of the committed schema's, in order.
    allowed = sorted(
        json.loads((ROOT / "schemas" / "workload.schema.json").read_text())["$defs"]["Training"]["properties"]
    )
    assert {"dp", "tp", "pp", "virtual_stages", "stage_layers", "zero"} <= set(allowed)
    assert str(err.value) == (
        f"{path}:{line}: at $.training.tp_size: as `training`: Extra inputs are not permitted; expected only "
        f"{', '.join(allowed)}"
    )


def test_workloads_and_clusters_are_typed_with_their_defaults():
    """Defaults live in pipeline/formats, not in the code that reads a workload."""
    from fabricref.core.paths import Layout
    from fabricref.estimate.workloads import load_workload, workload_paths

    loaded = {p.stem: load_workload(p) for p in workload_paths(Layout(ROOT))}
    assert loaded, "workloads are discovered under models/workloads"
    for w in loaded.values():
        if w.kind == "training":
            assert w.inference is None and w.training is not None
            assert w.accelerators == w.training.tp * w.training.pp * w.training.dp
            assert w.training.ep >= 1 and w.training.optimizer_layout
        else:
            assert w.training is None and w.inference is not None
            assert w.inference.bytes_per_token_on_frontend > 0
    fsdp = loaded["llama8b-fsdp-dp64"]
    assert fsdp.training.ep == 1  # not written in the file: the model's default
    assert fsdp.training.sharded is True


# --- The vocabulary is the one of the checkout in use (case 8 of issue 11) -------------------------------------


def _mini_checkout(root: Path, count_type: str = "count") -> Path:
    import json

    (root / "sources").mkdir(parents=True)
    (root / "schemas").mkdir()
    vocab = json.loads((ROOT / "schemas" / "vocabulary.json").read_text())
    vocab["fields"]["accelerator.count"]["type"] = count_type
    if count_type == "quantity":
        vocab["fields"]["accelerator.count"]["unit"] = "GB"
    (root / "schemas" / "vocabulary.json").write_text(json.dumps(vocab))
    (root / "sources" / "demo-doc.yaml").write_text(GOOD)
    return root


def test_the_vocabulary_is_read_from_the_root_in_use_and_follows_its_content(tmp_path, monkeypatch):
    import json

    from fabricref.core.paths import Layout
    from fabricref.core.vocabulary import vocabulary

    other = Layout(_mini_checkout(tmp_path / "other", count_type="quantity"))
    assert vocabulary(Layout(ROOT))["accelerator.count"].type == "count"
    assert vocabulary(other)["accelerator.count"].type == "quantity"
    # A source of that checkout is checked against that checkout's vocabulary, not the installed one.
    with pytest.raises(ValidationError, match=r"accelerator.count takes a quantity, the rule parses a count"):
        load_sources(other)
    # FABRICREF_ROOT names the checkout when no layout is passed.
    monkeypatch.setenv("FABRICREF_ROOT", str(other.root))
    monkeypatch.chdir(tmp_path)
    assert vocabulary()["accelerator.count"].type == "quantity"
    # The same path with new content is read again: cached by path and content, never served stale.
    path = other.root / "schemas" / "vocabulary.json"
    data = json.loads(path.read_text())
    data["fields"]["accelerator.count"] = {**data["fields"]["accelerator.count"], "type": "count"}
    path.write_text(json.dumps(data))
    assert vocabulary(other)["accelerator.count"].type == "count"
    assert load_sources(other)[0].rules[0].field == "accelerator.count"


def test_cli_root_reads_the_vocabulary_of_that_checkout(tmp_path, cli):
    """`fabricref retrieve --root X` loads X's sources against X's vocabulary (it used to use the installed one)."""
    other = _mini_checkout(tmp_path / "other", count_type="text")
    result = cli("retrieve", root=other)
    assert result.code == 1
    assert "accelerator.count takes a text, the rule parses a count" in result.err + result.out


def test_generated_schemas_use_only_json_schema_keywords():
    """A constraint pydantic writes under a non-standard name (e.g. `ge` on a union) would be ignored by the JSON
    Schema validator while the model enforces it: the two would disagree again."""
    from fabricref.formats import TITLES, schema
    from jsonschema import Draft202012Validator

    keywords = set(Draft202012Validator.VALIDATORS) | {"then", "else", "$schema", "$id", "$defs", "$ref"}
    keywords |= {"title", "description", "default", "discriminator"}
    named = {"properties", "$defs", "mapping", "dependentRequired"}  # their keys are names, not keywords

    def walk(node, parent: str, where: str) -> list[str]:
        found = []
        if isinstance(node, dict):
            for key, value in node.items():
                if parent not in named and parent != "discriminator" and key not in keywords:
                    found.append(f"{where}/{key}")
                found += walk(value, key, f"{where}/{key}")
        elif isinstance(node, list):
            for item in node:
                found += walk(item, parent if parent == "mapping" else "", where)
        return found

    for name in TITLES:
        assert walk(schema(name), "", name) == []


def test_a_count_below_its_minimum_says_so_without_naming_a_bare_type(tmp_path):
    from fabricref.core.schemas import validate

    with pytest.raises(ValidationError) as err:
        validate({"revision": 0}, "model-revisions.schema.json", "m.json")
    assert "at $.model: Field required" in str(err.value)
    workload = {
        "id": "w",
        "title": "A workload",
        "kind": "inference",
        "model": {"params": 1, "layers": 1, "hidden": 1, "kv_heads": 1, "head_dim": 1, "dtype": "bf16"},
        "targets": ["x"],
        "inference": {"mode": "aggregated", "prompt_tokens": 1, "output_tokens": 1, "requests_per_second": -1},
    }
    with pytest.raises(ValidationError) as err:
        validate(workload, "workload.schema.json", "w.yaml")
    assert (
        str(err.value)
        == "w.yaml: at $.inference.requests_per_second: as `inference`: Input should be greater than or equal to 0 "
        "(got -1)"
    )


DERIVED = {**STATED, "status": "derived", "formula": "a.b * 2", "inputs": ["a.b"], "provenance": []}
UNKNOWN = {
    **STATED,
    "status": "unknown",
    "confidence": "unknown",
    "value_number": None,
    "value_text": None,
    "reason": "no document read states it",
    "provenance": [],
}


@pytest.mark.parametrize(
    ("record", "valid"),
    [
        (STATED, True),
        (DERIVED, True),
        (UNKNOWN, True),
        ({**STATED, "provenance": []}, False),  # published without a snapshot hash
        ({**STATED, "provenance": [{**PROVENANCE, "sha256": "abc"}]}, False),
        ({**STATED, "reason": "no document read states it"}, False),
        ({**DERIVED, "inputs": []}, False),  # derived without inputs
        ({**DERIVED, "value_number": None}, False),
        ({**UNKNOWN, "value_number": 8.0}, False),  # unknown with a value
        ({**UNKNOWN, "reason": "short"}, False),
        ({**UNKNOWN, "formula": "a.b"}, False),
        ({**STATED, "status": "guessed"}, False),
        ({**STATED, "value_number": "8"}, False),  # nothing is coerced
    ],
)
def test_field_record_promises_are_kept_alike_by_model_and_schema(record, valid):
    assert _both("field.schema.json", record) == (valid, valid)


def test_a_record_error_names_the_status_form():
    from fabricref.core.schemas import validate

    with pytest.raises(ValidationError) as err:
        validate({**UNKNOWN, "reason": "short"}, "field.schema.json", "record")
    assert "record: at $.reason: as `unknown`: String should have at least 10 characters (got 'short')" in str(
        err.value
    )


def test_a_json_file_error_names_its_line_too(tmp_path):
    from fabricref.core.schemas import load_json, validate

    path = tmp_path / "vocabulary.json"
    text = (ROOT / "schemas" / "vocabulary.json").read_text()
    path.write_text(text.replace('"unit": "TB/s"', '"unit": 7', 1))
    line = next(n for n, row in enumerate(path.read_text().splitlines(), start=1) if '"unit": 7' in row)
    with pytest.raises(ValidationError) as err:
        validate(load_json(path), "vocabulary.schema.json", path)
    assert str(err.value) == (
        f"{path}:{line}: at $.fields.accelerator.memory_bandwidth.unit: as `quantity`: Input should be a valid string "
        "(got 7)"
    )
    inference = {"mode": "aggregated", "prompt_tokens": 1, "output_tokens": 1, "requests_per_second": "many"}
    workload = {
        "id": "w",
        "title": "A workload",
        "kind": "inference",
        "model": {"params": 1, "layers": 1, "hidden": 1, "kv_heads": 1, "head_dim": 1, "dtype": "bf16"},
        "targets": ["x"],
        "inference": inference,
    }
    with pytest.raises(ValidationError) as err:
        validate(workload, "workload.schema.json", "w.yaml")
    assert str(err.value) == (
        "w.yaml: at $.inference.requests_per_second: as `inference`: Input should be a valid integer or Input should "
        "be a valid number (got 'many')"
    )


def test_a_calibrated_number_keeps_the_promise_of_its_status(tmp_path):
    """published needs a source, measured a pinned hash, assumed a note: the tagged union names the form."""
    from fabricref.estimate.calibration import load_calibration_file, standalone_text

    source = ROOT / "models" / "calibration" / "collectives.yaml"
    text = standalone_text(source)  # the assumed numbers params.yaml sets written back in
    good = {"value": 0.5, "status": "assumed", "note": "a teaching value"}
    assert _both(
        "calibration.schema.json",
        {"version": 1, "sources": {}, "link_classes": {}, "algorithms": {}, "pipeline": {"chunk_bytes": good}},
    ) == (True, True)
    for bad in ({**good, "note": None}, {"value": 0.5, "status": "published"}, {"value": 0.5, "status": "measured"}):
        doc = {"version": 1, "sources": {}, "link_classes": {}, "algorithms": {}, "pipeline": {"chunk_bytes": bad}}
        assert _both("calibration.schema.json", doc) == (False, False), bad
    first = next(line for line in text.splitlines() if line.strip().startswith("status: assumed"))
    path = tmp_path / "collectives.yaml"
    path.write_text(text.replace(first, first.replace("assumed", "measured"), 1))
    status_line = path.read_text().splitlines().index(first.replace("assumed", "measured")) + 1
    with pytest.raises(ValidationError) as err:
        load_calibration_file(path)
    # The first status in the file is nvlink5's efficiency: `efficiency:` two lines above its status.
    assert str(err.value) == (
        f"{path}:{status_line - 2}: at $.link_classes.nvlink5.efficiency.measured_sha256: as `measured`: Field required"
    )


def test_a_quantity_without_its_unit_is_refused_by_both_and_named():
    from fabricref.core.schemas import validate

    spec = {"type": "quantity", "applies_to": ["server"], "description": "Memory per accelerator."}
    assert _both("vocabulary.schema.json", {"fields": {"accelerator.memory": spec}}) == (False, False)
    assert _both("vocabulary.schema.json", {"fields": {"accelerator.memory": {**spec, "unit": "GB"}}}) == (True, True)
    with pytest.raises(ValidationError) as err:
        validate({"fields": {"accelerator.memory": spec}}, "vocabulary.schema.json", "vocabulary.json")
    assert str(err.value) == ("vocabulary.json: at $.fields.accelerator.memory.unit: as `quantity`: Field required")


def test_errors_name_file_and_line_for_an_impossible_date_a_duplicate_key_and_a_bad_value(tmp_path):
    """An impossible date, a duplicate key, and a bad value in a valid document each name file:line."""
    from fabricref.estimate.calibration import load_calibration_file

    path = tmp_path / "dated.yaml"
    path.write_text("id: x\nread_on: 2026-02-30\n")
    with pytest.raises(ValidationError, match=r"dated\.yaml:2:10: '2026-02-30' is not a real date"):
        schemas.load_yaml(path)
    path.write_text("id: x\nid: y\n")
    with pytest.raises(ValidationError, match=r"dated\.yaml:2:1: malformed YAML: .*duplicate key"):
        schemas.load_yaml(path)
    calibration = Path(__file__).resolve().parents[2] / "models" / "calibration" / "collectives.yaml"
    lines = calibration.read_text(encoding="utf-8").splitlines()
    line = lines.index("      status: published") + 1  # link_classes.nvlink4.efficiency.status
    lines[line - 1] = "      status: rumoured"
    bad = tmp_path / "collectives.yaml"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(
        ValidationError,
        match=rf"collectives\.yaml:{line}: at \$\.link_classes\.nvlink4\.efficiency\.status: Input tag 'rumoured' "
        "found using 'status' does not match",
    ):
        load_calibration_file(bad)


def test_a_byte_order_mark_is_read_as_yaml_1_2_reads_it(tmp_path):
    """At the start of the file it is skipped; after it, it is text (or, where a document cannot hold it, an
    error naming the line)."""
    path = tmp_path / "bom.yaml"
    path.write_text("\ufeffa: 1\n", encoding="utf-8")
    assert schemas.load_yaml(path)[0] == {"a": 1}
    path.write_text("a:\n  b: 1\n\ufeff c: 2\n", encoding="utf-8")
    assert schemas.load_yaml(path)[0] == {"a": {"b": 1}, "\ufeff c": 2}
    path.write_text("a: 1\n\ufeff\nb: 2\n", encoding="utf-8")
    with pytest.raises(ValidationError, match=r"bom\.yaml:3:1: malformed YAML"):
        schemas.load_yaml(path)


@pytest.mark.parametrize(
    "text", ["a:\n  1: x\n  '1': y\n", "2026-01-01: x\n'2026-01-01': y\n", "true: x\n'True': y\n", "null: x\nNone: y\n"]
)
def test_keys_that_read_as_the_same_text_are_a_duplicate_not_the_last_one(tmp_path, text):
    """ruamel keeps 1 and '1' apart (an int and a str), but the plain data keys everything by its text: the
    second would silently replace the first. Refused like any duplicate key, naming the file."""
    path = tmp_path / "keys.yaml"
    path.write_text(text)
    with pytest.raises(ValidationError, match=r"keys\.yaml: malformed YAML: .*duplicate key"):
        schemas.load_yaml(path)
