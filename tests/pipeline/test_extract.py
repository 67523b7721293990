"""extract: declarative rules over snapshots, with failures that name source, rule and selector."""

from __future__ import annotations

import pytest
from fabricref.core.sources import Rule
from fabricref.core.vocabulary import vocabulary
from fabricref.errors import ExtractionError
from fabricref.extract import rules
from fabricref.extract.stage import run

DOC = b"""<html><head><script>document.write('<td>999</td>')</script><style>td{}</style></head><body>
<table id="spec">
<tr><th>GPUs</th><td>Eight GPUs</td></tr>
<tr><th>NVLink</th><td>900 GB/s bidirectional</td></tr>
<tr><th>Port</th><td>400G OSFP</td></tr>
<tr><th>Port</th><td>200G QSFP</td></tr>
<tr><th>Memory</th><td>lots</td></tr>
</table>
<ul><li onclick="alert(1)">Model <b>X&lt;script&gt;</b></li></ul>
</body></html>"""


def rule(**kw) -> Rule:
    base = {
        "id": "r",
        "field": "accelerator.count",
        "subject": "Demo",
        "select": {"row": "GPUs"},
        "parse": {"type": "count"},
    }
    base.update(kw)
    return Rule.model_validate(base)


def apply(r: Rule) -> rules.Parsed:
    return rules.apply(rules.parse_document(DOC), r, vocabulary()[r.field], "doc-src", 3)


def test_row_label_and_pattern_give_value_locator_and_excerpt():
    parsed = apply(rule(parse={"type": "count", "pattern": r"(?P<value>\w+) GPUs"}))
    assert parsed.value_number == 8
    assert parsed.locator == "table#spec > tr:nth-of-type(1)"
    assert parsed.excerpt == "GPUs Eight GPUs"


def test_bandwidth_is_converted_to_the_vocabulary_unit_and_direction():
    r = rule(
        field="scale_out.nic.speed",
        select={"row": "NVLink"},
        parse={"type": "quantity", "pattern": r"(?P<value>\d+) (?P<unit>GB/s)", "direction": "bidirectional"},
    )
    parsed = apply(r)
    # 900 GB/s bidirectional = 450 GB/s per direction = 3600 Gb/s per direction
    assert (parsed.value_number, parsed.unit, parsed.direction) == (3600.0, "Gb/s", "per_direction")
    assert parsed.stated == "900 GB/s (bidirectional)"


def test_a_claim_records_the_unit_the_document_states_not_the_one_the_rule_expected():
    """A rule that declares Gb/s over a document that says GB/s is out of date: an error, never a relabel."""
    stated = {"type": "quantity", "pattern": r"(?P<value>\d+) (?P<unit>\S+)", "direction": "bidirectional"}
    with pytest.raises(ExtractionError) as err:
        apply(rule(field="scale_out.nic.speed", select={"row": "NVLink"}, parse={**stated, "unit": "Gb/s"}))
    assert "the document states 'GB/s' but the rule declares unit 'Gb/s'" in str(err.value)
    assert "rule r (table row 'NVLink')" in str(err.value)
    # The same unit under another spelling agrees: GBps is GB/s. 900 GB/s bidirectional = 3600 Gb/s per direction.
    same = apply(rule(field="scale_out.nic.speed", select={"row": "NVLink"}, parse={**stated, "unit": "GBps"}))
    assert (same.value_number, same.unit, same.value_text) == (3600.0, "Gb/s", "900 GB/s")


def test_rule_matching_nothing_names_source_rule_and_selector():
    with pytest.raises(ExtractionError) as err:
        apply(rule(id="missing-row", select={"row": "CPUs"}))
    assert str(err.value) == (
        "source doc-src revision 3 rule missing-row (table row 'CPUs'): matched nothing; expected one element"
    )


def test_rule_matching_several_elements_fails_unless_it_asks_for_the_first():
    speed = {"type": "quantity", "pattern": r"(?P<value>\d+)G", "unit": "Gb/s", "direction": "per_direction"}
    with pytest.raises(ExtractionError, match="matched 2 elements; expected exactly one"):
        apply(rule(field="scale_out.nic.speed", select={"row": "Port"}, parse=speed))
    first = apply(rule(field="scale_out.nic.speed", select={"row": "Port", "expect": "first"}, parse=speed))
    assert first.value_number == 400


def test_value_that_does_not_parse_is_an_error():
    with pytest.raises(ExtractionError, match="value does not parse"):
        apply(rule(select={"row": "Memory"}))
    with pytest.raises(ExtractionError, match="pattern .* not found"):
        apply(rule(select={"row": "Memory"}, parse={"type": "count", "pattern": r"(?P<value>\d+)"}))


def test_scripts_are_never_run_and_markup_stays_text():
    parsed = apply(rule(field="accelerator.model", select={"css": "li"}, parse={"type": "text"}))
    assert parsed.value_text == "Model X<script>"  # text, as data: escaped wherever it is rendered later
    doc = rules.parse_document(DOC)
    assert "document.write" not in doc.get_text()


@pytest.mark.slow
def test_a_failing_rule_fails_the_stage_with_a_per_field_report_and_writes_nothing(repo):
    from fabricref.core.sources import load_sources

    path = repo.source_file("nvidia-hgx-h100-blog")
    path.write_text(path.read_text().replace("select: {row: NVSwitch}", "select: {row: NVSwitches}"))
    with pytest.raises(ExtractionError) as err:
        run(repo, load_sources(repo))
    assert "nvidia-hgx-h100-blog revision 1 rule hgx-h100-nvswitch-count (table row 'NVSwitches')" in str(err.value)
    assert not repo.claims_dir.exists()
