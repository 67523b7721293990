"""Hostile declarative files and pins, round 2: bounded time and memory before anything is built, clear errors
(never a traceback) naming the file, line and JSON path, and nothing accepted that should not be."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from conftest import copy_checkout_with_sources
from fabricref.compile import stage
from fabricref.compile.references import load_reference
from fabricref.core import expr, patterns, pins
from fabricref.core.paths import Layout
from fabricref.core.schemas import load_json, load_yaml, validate
from fabricref.core.sources import load_source, load_sources
from fabricref.errors import CompileError, ExtractionError, ValidationError
from fabricref.estimate.workloads import load_workload
from fabricref.extract import rules
from fabricref.extract.stage import run as extract
from fabricref.topology.clusters import load_cluster
from test_compile import edit_model

ROOT = Path(__file__).resolve().parents[2]
BIG = "9" * 401


@pytest.fixture
def hgx_blog(tmp_path: Path) -> Layout:
    """A private copy of the checkout's data holding only the source whose rules these tests break."""
    return Layout(copy_checkout_with_sources(tmp_path / "repo", "nvidia-hgx-h100-blog"))


def _alias_bomb() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        prev, cur = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"{cur}: &{cur} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_before_anything_is_expanded(tmp_path):
    """Nine levels of nine aliases (9**9 strings once expanded) in 1.3 KB: refused at the first anchor."""
    path = tmp_path / "bomb.yaml"
    path.write_text(_alias_bomb())
    assert len(path.read_bytes()) < 1400
    started = time.monotonic()
    with pytest.raises(ValidationError, match=r"bomb\.yaml:1:4: YAML anchors and aliases .* are not allowed"):
        load_yaml(path)
    assert time.monotonic() - started < 2


def test_oversized_and_deeply_nested_yaml_are_refused(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ValidationError, match=r"deep\.yaml:1:\d+: nested deeper than 64 levels"):
        load_yaml(deep)
    big = tmp_path / "big.yaml"
    big.write_text("a: '" + "x" * (1 << 20) + "'\n")
    with pytest.raises(ValidationError, match=r"big\.yaml: larger than 1048576 bytes"):
        load_yaml(big)


def test_an_unquoted_impossible_date_is_a_clear_error(tmp_path):
    path = tmp_path / "dated.yaml"
    path.write_text("id: x\nread_on: 2026-02-30\n")
    with pytest.raises(ValidationError, match=r"dated\.yaml:2:10: '2026-02-30' is not a real date"):
        load_yaml(path)
    path.write_text("id: x\nread_on: 2026-02-28\n")
    assert load_yaml(path)[0] == {"id": "x", "read_on": "2026-02-28"}


def test_a_401_digit_integer_is_refused_in_parameters_assumptions_and_formulas(no_sources):
    models = no_sources.references_dir
    path = models / "illustrative-h100-4096.yaml"
    original = path.read_text()
    path.write_text(original.replace("value: 512", f"value: {BIG}", 1))
    with pytest.raises(
        ValidationError,
        match=r"illustrative-h100-4096\.yaml:11: at \$\.parameters\.servers\.value: "
        r"a 401-digit number is too large",
    ):
        load_reference(path, no_sources)
    with pytest.raises(ValidationError, match=r"number of 401 digits is out of range"):
        expr.parse(f"param.oversubscription * {BIG}")
    with pytest.raises(ValidationError, match=r"not a finite number \(overflow\)"):
        expr.evaluate("a * 9007199254740992 * 9007199254740992 * 9007199254740992", {"a": expr.Value(1e300)})
    validate_value = {"value": int(BIG), "unit": "count"}
    with pytest.raises(ValidationError, match=r"at \$\.assumptions\.x\.value: a 401-digit number is too large"):
        validate({"assumptions": {"x": validate_value}}, "reference.schema.json", "model.yaml")


def test_a_workload_with_a_401_digit_sequence_length_is_refused(no_sources):
    """The knob lives in params.yaml (workloads.<id>.seq_len): the error names that file and line."""
    params = no_sources.root / "params.yaml"
    text = params.read_text()
    line = next(i for i, t in enumerate(text.splitlines(), start=1) if "seq_len:" in t)
    workload = next(
        t.strip().rstrip(":")
        for t in reversed(text.splitlines()[: line - 1])
        if t.startswith("  ") and not t.startswith("    ")
    )
    params.write_text(
        "\n".join(
            t.split("seq_len:")[0] + f"seq_len: {BIG}" if i == line else t
            for i, t in enumerate(text.splitlines(), start=1)
        )
        + "\n"
    )
    path = no_sources.root / "models" / "workloads" / f"{workload}.yaml"
    with pytest.raises(
        ValidationError, match=rf"params.yaml:{line}: at \$\.workloads\.{workload}\.seq_len: a 401-digit number"
    ):
        load_workload(path)
    # Written in a workload file of its own (no params.yaml beside it), the number is refused there.
    alone = no_sources.root / f"{workload}.yaml"
    kind_line = next(t for t in path.read_text().splitlines() if t in ("training:", "inference:"))
    alone.write_text(path.read_text().replace(kind_line + "\n", f"{kind_line}\n  seq_len: {BIG}\n", 1))
    with pytest.raises(ValidationError, match=rf"{alone.name}:\d+: at \$\.\w+\.seq_len: a 401-digit number"):
        load_workload(alone)


def test_a_cluster_of_50_million_building_blocks_is_refused_before_building(no_sources):
    path = no_sources.root / "models" / "clusters" / "meta-style-h100-24576.yaml"
    path.write_text(path.read_text().replace("building_blocks: 3072", "building_blocks: 50000000"))
    started = time.monotonic()
    with pytest.raises(CompileError, match=r"at \$\.building_blocks: 50000000 is too large; expected at most 65,536"):
        load_cluster(path, lambda _ref: {})
    assert time.monotonic() - started < 2


@pytest.mark.slow
def test_a_negative_derived_bandwidth_is_refused(repo):
    extract(repo, load_sources(repo))
    edit_model(
        repo,
        "illustrative-h100-4096",
        "/ 2 / param.oversubscription",
        "/ 2 / param.oversubscription * -1",
    )
    with pytest.raises(
        CompileError,
        match=r"fabric\.bisection_bandwidth\.formula: fabric\.bisection_bandwidth would be "
        r"-819.2 Tb/s; schemas/vocabulary\.json says it is at least 0",
    ):
        stage.run(repo)


def test_every_quantity_of_the_vocabulary_is_non_negative():
    vocab = json.loads((ROOT / "schemas" / "vocabulary.json").read_text())["fields"]
    quantities = {k: v for k, v in vocab.items() if v["type"] == "quantity"}
    assert quantities and all(v.get("minimum") == 0 for v in quantities.values())


@pytest.mark.parametrize(
    "schema_name, instance",
    [
        ("source.schema.json", {"id": "doc\n"}),
        ("pins.schema.json", {"source_id": "doc\n", "revisions": []}),
    ],
)
def test_ids_with_a_trailing_newline_fail_the_schema(schema_name, instance):
    with pytest.raises(
        ValidationError,
        match=r"at \$\.(id|source_id): expected lowercase letters, digits and single hyphens .* \(got 'doc\\n'\)",
    ):
        validate(instance, schema_name, "f.json")


def test_a_rule_id_with_a_trailing_newline_is_refused(hgx_blog):
    path = hgx_blog.sources_dir / "nvidia-hgx-h100-blog.yaml"
    path.write_text(
        path.read_text().replace("  - id: hgx-h100-nvswitch-count\n", '  - id: "hgx-h100-nvswitch-count\\n"\n')
    )
    with pytest.raises(
        ValidationError,
        match=r"at \$\.rules\[0\]\.id: expected lowercase letters.* \(got 'hgx-h100-nvswitch-count\\n'\)",
    ):
        load_source(path, hgx_blog)


@pytest.mark.parametrize("pattern", [r"(?P<value>(\d+)+) GPUs", r"(?P<value>(\w*,?)*)", r"(?P<value>\d+)("])
def test_rule_patterns_are_screened_at_load_with_file_line_and_path(hgx_blog, pattern):
    path = hgx_blog.sources_dir / "nvidia-hgx-h100-blog.yaml"
    text = path.read_text()
    old = r"'^(?P<value>\w+) third-generation NVSwitch'"
    assert old in text
    path.write_text(text.replace(old, json.dumps(pattern)))
    line = next(i for i, t in enumerate(text.splitlines(), start=1) if old in t)
    with pytest.raises(
        ValidationError,
        match=rf"nvidia-hgx-h100-blog\.yaml:{line}: at \$\.rules\[0\]\.parse\.pattern: "
        r"(.* nests unbounded quantifiers|invalid regular expression)",
    ):
        load_source(path, hgx_blog)


def test_preliminary_when_is_screened_too(hgx_blog):
    path = hgx_blog.sources_dir / "nvidia-hgx-h100-blog.yaml"
    text = path.read_text()
    line = next(i for i, t in enumerate(text.splitlines(), start=1) if "third-generation NVSwitch'}" in t)
    path.write_text(
        text.replace(
            "    parse: {type: count, pattern: '^(?P<value>\\w+) third-generation NVSwitch'}\n",
            "    parse: {type: count, pattern: '^(?P<value>\\w+) third-generation NVSwitch'}\n"
            "    preliminary_when: 'up to ('\n",
            1,
        )
    )
    with pytest.raises(
        ValidationError, match=rf"\.yaml:{line + 1}: at \$\.rules\[0\]\.preliminary_when: invalid regular"
    ):
        load_source(path, hgx_blog)


def test_a_pathological_pattern_finishes_within_the_time_limit():
    """`^(a+)+$` over 41 characters backtracks 2**40 times in `re`; here it is bounded (and screened at load)."""
    started = time.monotonic()
    try:
        assert patterns.search(r"^(a+)+$", "a" * 40 + "b", "rule x") is None
    except ValidationError as exc:
        assert "took longer than" in str(exc)
    assert time.monotonic() - started < patterns.MATCH_TIMEOUT_SECONDS + 2
    with pytest.raises(ValidationError, match="longer than 100000"):
        patterns.search("x", "a" * 100_001, "rule x")


def test_extract_runs_rule_patterns_through_the_bounded_matcher(hgx_blog):
    (source,) = load_sources(hgx_blog, "nvidia-hgx-h100-blog")
    rule = source.rules[0].model_copy(
        update={"parse": source.rules[0].parse.model_copy(update={"pattern": r"^(?P<value>(a+)+)$"})}
    )
    soup = BeautifulSoup("<table><tr><th>NVSwitch</th><td>" + "a" * 40 + "b</td></tr></table>", "html.parser")
    from fabricref.core.vocabulary import vocabulary

    started = time.monotonic()
    with pytest.raises(ExtractionError, match=r"rule hgx-h100-nvswitch-count .*(not found|took longer)"):
        rules.apply(soup, rule, vocabulary(hgx_blog)[rule.field], source.id)
    assert time.monotonic() - started < patterns.MATCH_TIMEOUT_SECONDS + 2


def test_duplicate_json_keys_are_refused_in_pins_and_declarative_json(tmp_path):
    path = tmp_path / "pins.json"
    path.write_text('{\n  "source_id": "a",\n  "source_id": "b",\n  "revisions": []\n}\n')
    with pytest.raises(ValidationError, match=r"pins\.json:3: invalid JSON: duplicate key 'source_id'"):
        load_json(path)
    with pytest.raises(ValidationError, match="duplicate key"):
        pins.load_file(path, "a")


def test_non_utf8_and_100000_deep_json_are_clear_errors(tmp_path):
    bad = tmp_path / "latin1.json"
    bad.write_bytes('{"source_id": "caf\u00e9"}'.encode("latin-1"))
    with pytest.raises(ValidationError, match=r"latin1\.json: not UTF-8 text"):
        pins.load_file(bad, "x")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValidationError, match=r"deep\.json: nested deeper than 64 levels"):
        load_json(deep)
    folder = tmp_path / "dir.json"
    folder.mkdir()
    with pytest.raises(ValidationError, match=r"dir\.json: is a directory"):
        load_json(folder)


@pytest.mark.slow
def test_the_shipped_files_stay_within_the_limits():
    lay = Layout(ROOT)
    for path in sorted((ROOT / "models").rglob("*.yaml")) + sorted(lay.sources_dir.glob("*.yaml")):
        load_yaml(path)
    for path in [*sorted(ROOT.glob("sources/**/*.json")), ROOT / "schemas" / "vocabulary.json"]:
        load_json(path)
