"""Hostile input, round 3: text is data. Control characters (raw, or as character references once decoded) are
refused in what a user types and declares, and made visible in what documents and logs contain, before any of
it reaches a terminal, a page, a drawing or mathtext."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import env_with_venv
from fabricref.core.schemas import load_yaml, validate
from fabricref.core.text import control_problem, visible
from fabricref.errors import ValidationError

ESC_TITLES = [
    "\x1b]0;PWNED\x07\x1b[2J",
    "Acme \x1b[31mred\x1b[0m",
    "NVLink&#x1b;[2J",
    "NVLink&#27;[2J",
    "Acme&#X9B;2J",
    "Acme \u202egnp.exe",
    "Acme \x9b2J",
    "Acme\x00Nul",
]
# U+2028 / U+2029 end a line as a newline does (str.splitlines, JavaScript): a title of two lines too.
BAD_TITLES = [*ESC_TITLES, "   ", "\t\t\t", "Acme\nPar", "Acme\r\nPar", "Acme\tPar", "Acme\u2028Par", "Acme\u2029Par"]
# A layout character given as a character reference is one too, once a page decodes it; an invisible format
# character makes a title that looks like another and is not.
BAD_TITLES += ["Acme&#10;Par", "Acme&#x9;Par", "Acme&Tab;Par", "Acme&NewLine;Par", "Acme&#x2028;Par"]
BAD_TITLES += ["Acme&shyPar", "Acme&shy Par", "Acme&lrm;Par", "&nbsp;&nbsp;&nbsp;"]  # a page decodes `&shy` too
BAD_TITLES += ["\u3164\u3164\u3164", "\u2800\u2800\u2800", " \u115f\u1160 "]  # letters that draw nothing
BAD_TITLES += [
    "Acme\u200bPar",
    "Acme\u200ePar",
    "\ufeffAcme Par",
    "Acme\u2060Par",
    "Acme Par\U000e0041",
    "\u200b\u200b\u200b",
]


def models_state(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "models").rglob("*")) if p.is_file()}


@pytest.mark.parametrize("title", BAD_TITLES, ids=repr)
def test_a_title_with_control_characters_spaces_only_or_newlines_is_refused(no_sources, cli, title):
    before = models_state(no_sources.root)
    result = cli("new", "reference", "acme-ansi", "--form-factor", "nic", "--title", title, root=no_sources.root)
    assert result.code == 2, (result.out, result.err)
    assert "$.title" in result.err and "\x1b" not in result.err + result.out
    assert models_state(no_sources.root) == before


@pytest.mark.parametrize("title", ["Acme & Co — R&D <1>", "Partners: AT&T; Verizon", "Q&A; R&D", "Fish &amp; Chips"])
def test_a_plain_title_with_entities_of_printable_characters_is_kept(no_sources, cli, title):
    result = cli("new", "reference", "acme-ok", "--form-factor", "nic", "--title", title, root=no_sources.root)
    assert result.code == 0, result.err
    identities = json.loads((no_sources.root / "models" / "identities.json").read_text())["references"]
    assert identities["acme-ok"]["title"] == title


@pytest.mark.parametrize("title", ESC_TITLES, ids=repr)
def test_a_declaration_with_control_characters_is_refused_with_file_line_and_path(tmp_path, title):
    path = tmp_path / "c.yaml"
    path.write_text(f"id: c\ntitle: {json.dumps(title)}\nnote: |\n  two\n  lines are fine\n", encoding="utf-8")
    data, doc = load_yaml(path)
    with pytest.raises(ValidationError, match=r"c\.yaml:2: at \$\.title: .*control character U\+"):
        validate(data, "cluster.schema.json", path, doc)


def test_keys_are_checked_too(tmp_path):
    with pytest.raises(ValidationError, match="the key 'a\\\\x1bb' holds the control character"):
        validate({"a\x1bb": 1}, "cluster.schema.json", tmp_path / "x.yaml")


def test_layout_in_declared_notes_is_kept():
    assert control_problem("two\nlines\tand a tab") is None
    assert control_problem("two\nlines", layout_ok=False) is not None


def test_document_text_has_its_control_characters_made_visible_at_extraction():
    from fabricref.core.sources import Rule
    from fabricref.core.vocabulary import FieldSpec
    from fabricref.extract.rules import apply, parse_document

    html = b"<table><tr><th>Interconnect</th><td>NVLink&#x1b;[2J\x1b]0;x\x07 5</td></tr></table>"
    rule = Rule.model_validate(
        {
            "id": "ic",
            "field": "scale_up.technology",
            "subject": "Demo",
            "select": {"row": "Interconnect"},
            "parse": {"type": "text"},
        }
    )
    spec = FieldSpec.model_validate({"type": "text", "description": "d", "applies_to": ["server"]})
    parsed = apply(parse_document(html), rule, spec, "demo-doc", 1)
    for text in (parsed.value_text, parsed.excerpt):
        assert "\x1b" not in text and "\x07" not in text
        assert "NVLink␛[2J␛]0;x␇ 5" in text


def test_what_reaches_the_terminal_has_no_control_characters(cli, monkeypatch, capsys):
    """`show` of a value holding ESC (a registry built before the rule, or a query's own text): the table, CSV
    and JSON carry no raw control character; JSON keeps the data exact as escapes."""
    from fabricref.cli.output import emit, out, write_csv_batches

    cell = "NVLink\x1b[2J\x9b1m\u202eevil"
    emit(["field", "value"], [("a", cell)], as_json=False)
    out.print(f"message {cell}")
    write_csv_batches(["v"], [[(cell,)]])
    table = capsys.readouterr().out
    assert not any(c in table for c in "\x1b\x9b\u202e") and "NVLink␛[2J" in table
    emit(["v"], [(cell,)], as_json=True)
    text = capsys.readouterr().out
    assert not any(c in text for c in "\x1b\x9b\u202e")
    assert json.loads(text) == [{"v": cell}]


def test_sql_that_builds_escapes_cannot_reach_the_terminal(built_registry, cli):
    for fmt in ("table", "csv", "json"):
        result = cli("query", "SELECT chr(27) || '[2J' || chr(155) AS x", "--format", fmt, root=built_registry.root)
        assert result.code == 0 and "\x1b" not in result.out and "\x9b" not in result.out, result.out


def test_an_error_message_has_its_control_characters_made_visible(built_registry, cli):
    result = cli("show", "\x1b[2Jnope", root=built_registry.root)
    assert result.code == 2 and "\x1b" not in result.err


@pytest.mark.slow
def test_output_in_an_encoding_without_every_character_is_escaped_not_a_traceback(built_registry):
    """LC_ALL=en_US.ISO-8859-1 `fabricref show nvidia-gb300-nvl72` failed with UnicodeEncodeError."""
    env = {**env_with_venv(), "PYTHONIOENCODING": "iso-8859-1", "LC_ALL": "C"}
    for args in (["show", "nvidia-gb300-nvl72"], ["show", "nvidia-gb300-nvl72", "--json"], ["references"]):
        done = subprocess.run(["fabricref", *args, "--root", str(built_registry.root)], env=env, capture_output=True)
        assert done.returncode == 0, done.stderr.decode("latin-1")
        assert b"Traceback" not in done.stderr
        if "--json" in args:
            assert json.loads(done.stdout.decode("latin-1"))


def test_a_dollar_in_a_plotted_title_is_drawn_as_written(tmp_path):
    """`imp 'run_$1_$2.log'` or a cluster titled `Helios at $\\alphabet$ scale` failed the report stage in
    matplotlib's mathtext parser on every later run."""
    from fabricref.report import measured
    from fabricref.views.charts import line_chart

    svg = line_chart("Helios at $\\alphabet$ scale", [1.0, 2.0], {"x": [1.0, 2.0]}, "tokens", "s").decode()
    assert "Helios at $\\alphabet$ scale" in svg
    rows = [
        {
            "bytes": 2**k,
            "model_busbw_gb_per_s": 1.0 + k,
            "measured_busbw_gb_per_s": 1.0 + k,
            "algorithm": "ring",
            "protocol": "LL",
        }
        for k in range(10, 14)
    ]
    log = {"op": "all-reduce", "topology_id": "t", "ranks": 8, "file_name": "run_$1_$2.log", "sha256": "a" * 64,
           "rows": rows}  # fmt: skip
    svg = measured.plot(log).decode()
    assert "run_$1_$2.log" in svg and "1 KiB" in svg


@pytest.mark.parametrize("name", ["run\x1b[2J.log", "run\u2028two.log", "run\u200b.log", "run\u202e.gol"], ids=repr)
def test_a_measured_log_whose_name_holds_control_characters_is_refused(built_copy, cli, tmp_path, name):
    from test_measured import FIXTURES

    named = tmp_path / name
    named.write_bytes((FIXTURES / "dgx-h100-8gpu-all-reduce-ring.log").read_bytes())
    result = cli("measured", "import", str(named), "--topology", "nvidia-dgx-h100", root=built_copy.root)
    assert result.code == 2 and ("control character" in result.err or "invisible format character" in result.err)
    assert "\x1b" not in result.err and "\u2028" not in result.err


def test_visible_stand_ins():
    assert visible("a\x1bb\x7f\x9b\u202e\n\t") == "a␛b␡<U+009B><U+202E>\n\t"
    assert visible("a\nb\tc", keep_layout=False) == "a␊b␉c"
    assert os.linesep not in visible("x\r", keep_layout=False)
