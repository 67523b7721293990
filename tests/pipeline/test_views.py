"""Every view shows the record as it is (issue 30): stated figures with the digits the document states, derived ones
to the precision of their inputs, the kind of evidence and whether a page was read via a copy wherever a source is
cited, a stated figure's check, and conflicting sources with every value."""

from __future__ import annotations

import json

import pytest
from fabricref.core.paths import Layout
from fabricref.core.registry import open_tables
from fabricref.inspect.fields import reference_fields
from fabricref.report import stage as report_stage


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables as wide as their longest line: a cell's text is asserted whole, not as the terminal wraps it."""
    monkeypatch.setenv("COLUMNS", "1000")


def field_of(shown: list[dict], key: str) -> dict:
    return next(r for r in shown if r["field"] == key)


def show_json(cli, lay: Layout, reference: str) -> list[dict]:
    result = cli("show", reference, "--json", root=lay.root)
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_a_stated_figure_is_shown_with_the_digits_the_document_states(built_registry, cli):
    # AMD's MI300X page: 1307.4 TFLOPS dense BF16 (and 2614.9 FP8): never "1,310 TFLOP/s".
    table = cli("show", "amd-mi300x-pollara400", root=built_registry.root).out
    assert "1,307.4 TFLOP/s" in table and "2,614.9 TFLOP/s" in table
    assert "1,310" not in table
    bf16 = field_of(show_json(cli, built_registry, "amd-mi300x-pollara400"), "accelerator.peak_dense_bf16")
    assert (bf16["value"], bf16["stated"], bf16["digits"]) == (1307.4, "1307.4 TFLOPS", 5)
    tree = cli("audit", "amd-mi300x-pollara400", "accelerator.peak_dense_bf16", root=built_registry.root).out
    assert tree.splitlines()[0].startswith("amd-mi300x-pollara400 accelerator.peak_dense_bf16 = 1,307.4 TFLOP/s")


def test_a_derived_figure_is_shown_to_the_precision_of_its_inputs(built_registry, cli):
    # 13.4 TB over 72 GPUs: three digits from "13.4", the count is exact: 186 GB, not 186.111 GB.
    memory = field_of(show_json(cli, built_registry, "nvidia-gb200-nvl72"), "accelerator.memory")
    assert memory["status"] == "derived" and memory["digits"] == 3
    assert memory["value"] == pytest.approx(13_400 / 72)  # the exact number stays for machines
    table = cli("show", "nvidia-gb200-nvl72", root=built_registry.root).out
    line = next(x for x in table.splitlines() if "accelerator.memory " in x)
    assert "186 GB" in line and "186.1" not in line


def test_show_and_audit_name_the_publisher_kind_and_a_copy(built_registry, cli):
    shown = show_json(cli, built_registry, "amd-helios")
    scale_up = field_of(shown, "scale_up.bandwidth_per_accelerator")
    assert (
        scale_up["source"]
        == "servethehome-amd-mi400-hot-chips-2026 (press, 2026-08-24, transcription, read via a copy)"
    )
    (citation,) = scale_up["citations"]
    assert citation["publisher_kind"] == "press" and citation["read_via"].startswith("a copy of the article")
    table = cli("show", "amd-helios", root=built_registry.root).out
    assert "read via a copy" in table and "(press, 2026-08-24" in table
    # A vendor's own document read from its publisher says so too (no copy).
    h100 = field_of(show_json(cli, built_registry, "nvidia-dgx-h100"), "accelerator.count")
    assert "nvidia-hgx-h100-blog (vendor-document, transcription)" in h100["source"]

    tree = cli("audit", "amd-helios", "scale_up.bandwidth_per_accelerator", root=built_registry.root).out
    assert "publisher kind: press" in tree and "published on: 2026-08-24" in tree
    assert "read via a copy: a copy of the article reproduced in full in a public repository" in tree
    audited = json.loads(
        cli("audit", "amd-helios", "scale_up.bandwidth_per_accelerator", "--json", root=built_registry.root).out
    )
    (p,) = audited["provenance"]
    assert (p["publisher_kind"], p["published_on"]) == ("press", "2026-08-24") and p["read_via"]


def test_the_report_reference_page_names_the_publisher_kind_a_copy_and_a_conflict(built_registry):
    """The reference page's template with the context the report stage gives it (fields and citations from the
    registry, values and evidence worded by the stage's helpers)."""
    with open_tables(built_registry, "tables") as t:
        ref = t.rows("SELECT * FROM reference_models WHERE reference_id = 'amd-helios'")[0]
        fields = t.rows("SELECT * FROM fields WHERE reference_id = 'amd-helios' ORDER BY field")
        cites = t.rows("SELECT * FROM field_citations WHERE reference_id = 'amd-helios' ORDER BY field, source_id")
    for f in fields:
        f["value"] = report_stage._value(f)
        f["citations"] = [c for c in cites if c["field"] == f["field"]]
        report_stage._evidence(f)
    page = (
        report_stage._env()
        .get_template("reference.html.j2")
        .render(
            title=ref["title"],
            root="../",
            caveats=[],
            ref={**ref, "published": 0, "preliminary": 0, "derived": 0, "unknown": 0},
            fields=fields,
            drawn=None,
            assumptions=[],
            summary=None,
        )
    )
    assert "press · published 2026-08-24" in page
    assert "read via a copy</span>: a copy of the article reproduced in full in a public repository" in page
    assert "conflicting sources: 23.3 TB/s from servethehome-amd-mi400-hot-chips-2026 (2026-08-24, taken)" in page
    assert "19.6 TB/s from turtlesai-amd-mi400-advancing-ai-2025-06-12 (2025-06)" in page
    assert "check: scale_up.aggregate_bandwidth / accelerator.count = 3.61 TB/s bidirectional, agrees" in page


def test_a_stated_figure_stays_the_value_and_the_derivation_is_its_check(built_registry, cli):
    # NVIDIA states 1.8 TB/s per GB300 GPU; 130 TB/s ÷ 72 is the check, not the value.
    audited = json.loads(
        cli("audit", "nvidia-gb300-nvl72", "scale_up.bandwidth_per_accelerator", "--json", root=built_registry.root).out
    )
    assert (audited["value"], audited["status"], audited["digits"]) == (1800.0, "published", 2)
    assert audited["check"]["formula"] == "scale_up.aggregate_bandwidth / accelerator.count"
    assert audited["check"]["value"] == pytest.approx(130_000 / 72) and audited["check"]["agrees"] is True
    tree = cli("audit", "nvidia-gb300-nvl72", "scale_up.bandwidth_per_accelerator", root=built_registry.root).out
    assert "= 1.81 TB/s bidirectional, agrees with the stated 1.8 TB/s bidirectional" in tree
    # Helios: AMD's 1.8 TB/s per direction (3.6 bidirectional) stays the value; 260 TB/s ÷ 72 agrees.
    helios = field_of(show_json(cli, built_registry, "amd-helios"), "scale_up.bandwidth_per_accelerator")
    assert (helios["value"], helios["status"]) == (3600.0, "preliminary") and helios["check"]["agrees"] is True
    # An agreeing check is not repeated in the show table; it is in the audit (above) and the JSON.
    table = cli("show", "nvidia-gb300-nvl72", root=built_registry.root).out
    assert "check:" not in table


@pytest.mark.slow
def test_a_check_that_disagrees_is_shown_in_every_view(extracted, cli):
    path = extracted.references_dir / "nvidia-gb300-nvl72.yaml"
    text = path.read_text()
    assert "check_formula: scale_up.aggregate_bandwidth / accelerator.count" in text
    path.write_text(
        text.replace(
            "check_formula: scale_up.aggregate_bandwidth / accelerator.count",
            "check_formula: scale_up.aggregate_bandwidth / 36",
        )
    )
    assert cli("compile", root=extracted.root).code == 0  # a disagreeing check is recorded, not an error
    (f,) = [
        r
        for r in reference_fields(extracted, "nvidia-gb300-nvl72")
        if r["field"] == "scale_up.bandwidth_per_accelerator"
    ]
    assert f["value_number"] == 1800.0 and f["check_agrees"] is False  # the stated figure stays the value
    table = cli("show", "nvidia-gb300-nvl72", root=extracted.root).out
    assert "check: scale_up.aggregate_bandwidth / 36 = 3.61 TB/s bidirectional, DISAGREES with the stated 1.8" in table
    tree = cli("audit", "nvidia-gb300-nvl72", "scale_up.bandwidth_per_accelerator", root=extracted.root).out
    assert "DISAGREES with the stated 1.8 TB/s bidirectional" in tree
    assert cli("pin-model", root=extracted.root).code == 0
    status = cli("status", root=extracted.root)
    assert status.code == 0, status.out
    assert "check disagrees (information): nvidia-gb300-nvl72 scale_up.bandwidth_per_accelerator" in status.out


@pytest.mark.slow
def test_a_conflict_keeps_both_values_and_dates_and_status_lists_it_with_exit_0(built_registry, cli):
    bandwidth = field_of(show_json(cli, built_registry, "amd-helios"), "accelerator.memory_bandwidth")
    assert bandwidth["conflict"] is True and bandwidth["resolved_by"] == "rule" and bandwidth["value"] == 23.3
    claims = {c["source_id"]: (c["value_number"], c["published_on"], c["taken"]) for c in bandwidth["citations"]}
    assert claims == {
        "servethehome-amd-mi400-hot-chips-2026": (23.3, "2026-08-24", True),
        "turtlesai-amd-mi400-advancing-ai-2025-06-12": (19.6, "2025-06", False),
    }
    table = cli("show", "amd-helios", root=built_registry.root).out
    assert "conflicting sources" in table and "19.6 TB/s" in table
    tree = cli("audit", "amd-helios", "accelerator.memory_bandwidth", root=built_registry.root).out
    assert tree.splitlines()[1].startswith(
        "├── conflicting sources: 23.3 TB/s from servethehome-amd-mi400-hot-chips-2026"
    )
    assert "states: 19.6 TB/s (disagrees)" in tree
    # SQL sees every claim of the field with its value and date.
    sql = (
        "SELECT source_id, value_number, published_on, agrees FROM field_citations WHERE reference_id = 'amd-helios' "
        "AND field = 'accelerator.memory_bandwidth_total' ORDER BY published_on"
    )
    rows = json.loads(cli("query", "--format", "json", sql, root=built_registry.root).out)
    assert [(r["value_number"], r["published_on"], r["agrees"]) for r in rows] == [
        (1400.0, "2026-06", False),
        (1700.0, "2026-08-24", True),
    ]
    status = cli("status", root=built_registry.root)
    assert status.code == 0, status.out  # information, not attention
    assert "conflicting sources" in status.out
    listed = json.loads(cli("status", "--json", root=built_registry.root).out)
    conflicts = {(c["reference_id"], c["field"]): c for c in listed["conflicts"]}
    assert {("amd-helios", "accelerator.memory_bandwidth"), ("nvidia-dgx-b300", "scale_out.nic.speed")} <= set(
        conflicts
    )
    b300 = conflicts[("nvidia-dgx-b300", "scale_out.nic.speed")]
    assert b300["resolved_by"] == "take" and "400 Gb/s" in b300["text"] and "800 Gb/s" in b300["text"]
    assert listed["attention"] == []
