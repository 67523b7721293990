"""YAML read by libyaml (the fast path) gives exactly what ruamel's round-trip load gives, and whatever the fast
path does not build exactly goes to ruamel, so data, errors and line numbers stay as they were."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from conftest import document_paths
from fabricref.core import schemas
from fabricref.errors import ValidationError
from fabricref.estimate.calibration import load_calibration_file

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(
    p for p in [*ROOT.glob("models/**/*.yaml"), *ROOT.glob("sources/**/*.yaml"), ROOT / "params.yaml"] if p.is_file()
)


def _ruamel(text: str) -> Any:
    return schemas.to_plain(schemas._parse_yaml(text, Path("x.yaml")))


def _same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (1 is not 1.0 is not True; -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _paths(value: Any) -> list[list[Any]]:
    """Every path into a document, and one step off each (a missing key or index: the nearest ancestor's line)."""
    return [[*p, *off] for p in document_paths(value) for off in ((), ("no-such-key",), (10**6,))]


def test_lines_are_ruamels_in_flow_and_block_forms():
    text = "a:\n  - x\n  -\n    b: 1\n    c: [2, {d: 3}]\ne: {f: [4,\n  5]}\n"
    fast = schemas._fast_yaml(text)
    assert fast.line_of(["a", 1, "c", 1, "d"]) == 5
    assert fast.line_of(["e", "f", 1]) == 7
    assert fast.line_of(["e", "g"]) == 6  # a missing key: its mapping's key
    document = schemas._parse_yaml(text, Path("x.yaml"))
    for parts in _paths(fast.data):
        assert fast.line_of(parts) == schemas._line_of(document, parts), parts


def test_the_shipped_files_take_the_fast_path_and_read_as_ruamel_reads_them():
    assert len(SHIPPED) > 20
    for path in SHIPPED:
        text = path.read_text(encoding="utf-8")
        fast = schemas._fast_yaml(text)
        assert fast is not schemas._SLOW, path
        document = schemas._parse_yaml(text, path)  # read by ruamel once (2 passes), for the data and the lines
        assert _same(fast.data, schemas.to_plain(document)), path
        for parts in _paths(fast.data):
            assert fast.line_of(parts) == schemas._line_of(document, parts), (path, parts)


@pytest.mark.parametrize(
    ("scalar", "expected"),
    [
        ("512", 512),
        ("-0", 0),
        ("+7", 7),
        ("0.85", 0.85),
        ("-0.0", -0.0),
        ("1e3", 1000.0),  # a float in YAML 1.2 (ruamel); text in YAML 1.1 (PyYAML's own resolver)
        (".5", 0.5),
        ("true", True),
        ("False", False),
        ("yes", "yes"),  # a bool only in YAML 1.1
        ("on", "on"),
        ("~", None),
        ("null", None),
        ("2026-02-28", "2026-02-28"),
        ("1:20", "1:20"),  # sexagesimal only in YAML 1.1
        ("0.1e", "0.1e"),
        ("400G", "400G"),
    ],
)
def test_plain_scalars_read_as_yaml_1_2(scalar, expected):
    text = f"k: {scalar}\n"
    fast = schemas._fast_yaml(text).data
    assert _same(fast, {"k": expected})
    assert _same(fast, _ruamel(text))


@pytest.mark.parametrize(
    "text",
    [
        "k: 0o17\n",  # octal, hex, underscores, .inf: ruamel builds them
        "k: 0x1F\n",
        "k: 1_000\n",
        "k: 012\n",
        "k: .inf\n",
        "k: 2026-02-28T10:00:00\n",
        "k: 2026-2-8\n",
        "1: x\n",  # a key that is not text
        "true: x\n",
        "k: !!str 5\n",  # a tag
        "a: &x 1\nb: *x\n",  # anchors and aliases (refused by ruamel's screen)
        "k: 1\nk: 2\n",  # a duplicate key (refused by ruamel)
        "k:\tv\n",  # tabs: libyaml accepts some that ruamel refuses
        "%YAML 1.1\n---\nk: yes\n",  # a directive
        "a: 1\n---\nb: 2\n",  # two documents
        "",
        "k: [1, 2\n",  # malformed
    ],
)
def test_forms_outside_the_fast_path_go_to_ruamel(text):
    assert schemas._fast_yaml(text) is schemas._SLOW


def test_errors_keep_file_line_and_message_after_the_fast_path(tmp_path):
    """The same file reads fast; the error it gets (an impossible date, a duplicate key, a bad value in a valid
    document) still names file:line from ruamel's document."""
    path = tmp_path / "dated.yaml"
    path.write_text("id: x\nread_on: 2026-02-30\n")
    with pytest.raises(ValidationError, match=r"dated\.yaml:2:10: '2026-02-30' is not a real date"):
        schemas.load_yaml(path)
    path.write_text("id: x\nid: y\n")
    with pytest.raises(ValidationError, match=r"dated\.yaml:2:1: malformed YAML: .*duplicate key"):
        schemas.load_yaml(path)
    calibration = ROOT / "models" / "calibration" / "collectives.yaml"
    text = calibration.read_text(encoding="utf-8")
    lines = text.splitlines()
    line = lines.index("      status: published") + 1  # link_classes.nvlink4.efficiency.status
    lines[line - 1] = "      status: rumoured"
    bad = tmp_path / "collectives.yaml"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert schemas._fast_yaml(bad.read_text(encoding="utf-8")) is not schemas._SLOW
    with pytest.raises(
        ValidationError,
        match=rf"collectives\.yaml:{line}: at \$\.link_classes\.nvlink4\.efficiency\.status: 'rumoured' is not one of",
    ):
        load_calibration_file(bad)


def test_a_byte_order_mark_after_the_start_goes_to_ruamel():
    """A BOM anywhere but the first character is read differently by the two parsers (libyaml drops it, YAML
    1.2 allows it only where a document starts): ruamel's reading, data or error, is the one kept."""
    nested = "a:\n  b: 1\n\ufeff c: 2\n"  # libyaml: c inside a; ruamel: a top-level key '\ufeff c'
    assert schemas._fast_yaml(nested) is schemas._SLOW
    assert _ruamel(nested) == {"a": {"b": 1}, "\ufeff c": 2}
    refused = "a: 1\n\ufeff\nb: 2\n"  # libyaml reads {a: 1, b: 2}; ruamel refuses it
    assert schemas._fast_yaml(refused) is schemas._SLOW
    with pytest.raises(ValidationError, match=r"x\.yaml:3:1: malformed YAML"):
        _ruamel(refused)
    assert schemas._fast_yaml("\ufeffa: 1\n").data == {"a": 1}  # a BOM that starts the file is read alike


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
