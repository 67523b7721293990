"""Declarative files: errors name the file, the line or JSON path, and what was expected."""

from __future__ import annotations

import pytest

from pipeline.core.errors import ValidationError
from pipeline.core.paths import check_slug
from pipeline.core.sources import load_source, load_sources

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
    assert f"{path}:13: at $.rules[0].parse.type: 7 is not one of 'quantity', 'count', 'text'" in str(err.value)


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
    assert "at $: 'media_type' is a required property" in text
    assert "Additional properties are not allowed ('colour' was unexpected)" in text


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
    from pipeline.core.schemas import validate

    with pytest.raises(ValidationError, match=r"at \$.x: NaN or infinite"):
        validate({"x": float("nan")}, "pins.schema.json", "pins.json")


def test_shipped_sources_all_validate(repo):
    assert len(load_sources(repo)) >= 6
