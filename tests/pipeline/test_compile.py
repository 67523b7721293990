"""compile: reference models bound to claims; the statuses hold their promises."""

from __future__ import annotations

import re

import pytest
from conftest import ensure_database
from fabricref.compile import stage
from fabricref.core.sources import load_sources
from fabricref.errors import CompileError, FabricrefError


def edit_model(lay, ref_id, old, new):
    path = lay.references_dir / f"{ref_id}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.slow
def test_disagreeing_documents_fail_when_the_rule_cannot_decide_and_no_take_is_named(extracted):
    # 288 GB (The Register, 2025-06-12) vs 288 GiB (ROCm's table, undated): both state the MI355X itself, and an
    # undated document cannot be ordered by date, so the declared rule cannot decide.
    path = edit_model(
        extracted,
        "amd-mi355x-pollara400",
        "    take: theregister-amd-mi355x-2025-06-12#mi355x-memory\n    why: >-",
        "    note: >-",
    )
    with pytest.raises(CompileError) as err:
        stage.run(extracted)
    text = str(err.value)
    assert f"{path}: at $.fields.accelerator.memory: cited documents disagree" in text
    assert "says 288 GB" in text and "says 309.238 GB" in text
    assert "cannot decide: amd-rocm-gpu-specs#mi355x-vram has no published_on" in text
    assert "take: and why:" in text


def _records(lay, ref_id):
    from fabricref.compile.references import load_reference, resolve
    from fabricref.compile.stage import load_claims

    sources = load_sources(lay)
    ref = load_reference(lay.references_dir / f"{ref_id}.yaml", lay)
    return resolve(ref, load_claims(lay, sources), {s.id: s for s in sources})


def _edit_source(lay, source_id, old, new):
    path = lay.source_file(source_id)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.mark.slow
def test_the_conflict_rule_takes_the_most_specific_product_then_the_latest(extracted):
    records = _records(extracted, "amd-helios")
    per_gpu, rack = records["accelerator.memory_bandwidth"], records["accelerator.memory_bandwidth_total"]
    # 19.6 TB/s is stated for the MI400 family (2025-06), 23.3 TB/s for the MI455X itself: the product's is taken.
    assert (per_gpu["value_number"], per_gpu["conflict"], per_gpu["resolved_by"]) == (23.3, True, "rule")
    assert "most specific product's document" in per_gpu["choice_reason"]
    # Two statements about the rack: the later one (2026-08-24 over June 2026) is taken; both are kept.
    assert (rack["value_number"], rack["conflict"], rack["resolved_by"]) == (1700.0, True, "rule")
    assert [(c["value_number"], c["published_on"], c["agrees"]) for c in rack["claims"]] == [
        (1400.0, "2026-06", False),
        (1700.0, "2026-08-24", True),
    ]
    # Dated earlier, the Hot Chips coverage loses the rack total to Computex; the product still beats the family.
    _edit_source(
        extracted, "servethehome-amd-mi400-hot-chips-2026", "published_on: '2026-08-24'", "published_on: '2026-01'"
    )
    records = _records(extracted, "amd-helios")
    assert records["accelerator.memory_bandwidth_total"]["value_number"] == 1400.0
    assert records["accelerator.memory_bandwidth"]["value_number"] == 23.3
    # Dates that do not order them (the same month) leave the rule undecided: the model must say which it takes.
    _edit_source(
        extracted, "servethehome-amd-mi400-hot-chips-2026", "published_on: '2026-01'", "published_on: '2026-06-20'"
    )
    with pytest.raises(CompileError, match="published on dates that do not order them"):
        _records(extracted, "amd-helios")


@pytest.mark.slow
def test_a_take_against_the_declared_rule_is_refused(extracted):
    edit_model(
        extracted,
        "amd-helios",
        "  accelerator.memory_bandwidth_total:\n    cite: [",
        "  accelerator.memory_bandwidth_total:\n"
        "    take: tomshardware-amd-helios-computex-2026#helios-memory-bandwidth-total\n"
        "    why: The Computex figure is preferred here.\n    cite: [",
    )
    with pytest.raises(CompileError, match="a take: settles only what the rule cannot decide"):
        _records(extracted, "amd-helios")


@pytest.mark.slow
def test_documents_agreeing_within_their_digits_are_no_conflict(extracted):
    # DGX B200: the user guide's 1,440 GB and the BasePOD page's 1.4 TB (1.35-1.45 TB) agree; the more precise
    # figure gives the value, with no take needed.
    edit_model(
        extracted,
        "nvidia-dgx-b200",
        "    take: nvidia-dgx-b200-user-guide-introduction#gpu-memory-total\n    why:",
        "    note:",
    )
    record = _records(extracted, "nvidia-dgx-b200")["accelerator.memory_total"]
    assert (record["value_number"], record["value_text"], record["conflict"], record["digits"]) == (
        1440.0,
        "1,440 GB",
        False,
        4,
    )
    assert record["chosen"] == "nvidia-dgx-b200-user-guide-introduction#gpu-memory-total"
    assert "agree within the digits each states" in record["choice_reason"]
    assert all(c["agrees"] for c in record["claims"])


@pytest.mark.slow
def test_citing_a_missing_source_or_rule_is_an_error(extracted):
    edit_model(extracted, "nvidia-dgx-h100", "nvidia-hgx-h100-blog#hgx-h100-nvlink-bandwidth]", "no-such-doc#x]")
    with pytest.raises(CompileError, match="'no-such-doc#x' does not exist \\(no source 'no-such-doc'\\)"):
        stage.run(extracted)


@pytest.mark.slow
def test_a_left_out_key_must_be_declared(extracted):
    edit_model(
        extracted,
        "nvidia-dgx-h100",
        "  commercial.price:\n    unknown: No vendor document read states a price; "
        "third-party prices are not vendor facts.\n",
        "",
    )
    with pytest.raises(CompileError, match="left out: commercial.price"):
        stage.run(extracted)


@pytest.mark.slow
def test_cycles_among_derived_fields_are_named(extracted):
    edit_model(
        extracted,
        "nvidia-dgx-h100",
        "  accelerator.memory:\n    cite: [nvidia-h100-product-page#h100-sxm-memory]\n"
        "    check_formula: accelerator.memory_total / accelerator.count",
        "  accelerator.memory:\n    formula: accelerator.memory_total / accelerator.count",
    )
    edit_model(
        extracted,
        "nvidia-dgx-h100",
        "  accelerator.memory_total:\n    cite: [nvidia-dgx-basepod-core-components#dgx-h100-gpu-memory-total]",
        "  accelerator.memory_total:\n    formula: accelerator.memory * 8",
    )
    with pytest.raises(
        CompileError, match="cycle: accelerator.memory -> accelerator.memory_total -> accelerator.memory"
    ):
        stage.run(extracted)


@pytest.mark.slow
def test_unit_mismatch_in_a_formula(extracted):
    edit_model(
        extracted,
        "nvidia-dgx-h100",
        "formula: scale_out.nic.count * scale_out.nic.speed / accelerator.count",
        "formula: scale_out.nic.speed + accelerator.memory_total",
    )
    with pytest.raises(CompileError, match="unit mismatch"):
        stage.run(extracted)


@pytest.mark.slow
def test_a_formula_result_never_gains_or_loses_a_bandwidth_direction(extracted):
    """8 NICs x 400 Gb/s per direction is not a memory bandwidth: the direction would be silently dropped."""
    path = edit_model(
        extracted,
        "nvidia-dgx-h100",
        "  accelerator.memory_bandwidth_total:\n    formula: accelerator.memory_bandwidth * accelerator.count",
        "  accelerator.memory_bandwidth_total:\n    formula: scale_out.nic.count * scale_out.nic.speed",
    )
    with pytest.raises(CompileError) as err:
        stage.run(extracted)
    assert str(err.value) == (
        f"{path}: at $.fields.accelerator.memory_bandwidth_total.formula: result is per_direction, "
        "but accelerator.memory_bandwidth_total is stored without direction"
    )


@pytest.mark.slow
def test_a_claim_read_under_a_key_of_another_dimension_names_reference_field_source_and_units(extracted):
    path = edit_model(
        extracted,
        "illustrative-h100-4096",
        "    reads: scale_out.nic.speed",
        "    reads: accelerator.memory_total",
    )
    edit_model(
        extracted,
        "illustrative-h100-4096",
        "nvidia-dgx-basepod-core-components#dgx-h100-nic-speed]",
        "nvidia-dgx-basepod-core-components#dgx-h100-gpu-memory-total]",
    )
    with pytest.raises(CompileError) as err:
        stage.run(extracted)
    assert str(err.value) == (
        f"{path}: at $.fields.cluster.endpoint_speed.cite: "
        "'nvidia-dgx-basepod-core-components#dgx-h100-gpu-memory-total' states GB, but cluster.endpoint_speed "
        "is stored in Gb/s per_direction: cannot convert GB to Gb/s: different dimensions"
    )


@pytest.mark.slow
def test_formula_outside_the_language_is_refused(extracted):
    edit_model(
        extracted,
        "nvidia-dgx-b200",
        "formula: accelerator.memory_total / accelerator.count",
        "formula: __import__('os').getcwd()",
    )
    with pytest.raises(FabricrefError, match="not allowed"):
        stage.run(extracted)


@pytest.mark.slow
def test_deriving_from_an_unknown_is_refused(extracted):
    edit_model(
        extracted,
        "amd-mi355x-pollara400",
        "  accelerator.peak_sparse_bf16_total:\n    unknown: Not transcribed (see accelerator.peak_sparse_bf16).",
        "  accelerator.peak_sparse_bf16_total:\n    formula: accelerator.peak_dense_bf16 * 2",
    )
    with pytest.raises(CompileError, match="input accelerator.peak_dense_bf16 is unknown"):
        stage.run(extracted)


def test_statuses_hold_their_promises(built_registry):
    import duckdb

    con = duckdb.connect(str(ensure_database(built_registry)), read_only=True)
    broken = con.execute("""
        SELECT reference_id, field, status FROM fields f WHERE
          (status IN ('published', 'preliminary') AND NOT EXISTS (
              SELECT 1 FROM field_citations c WHERE c.reference_id = f.reference_id AND c.field = f.field
                AND regexp_full_match(c.sha256, '[0-9a-f]{64}') AND c.locator <> '' AND c.excerpt <> ''))
          OR (status = 'unknown' AND (value_number IS NOT NULL OR value_text IS NOT NULL OR coalesce(reason, '') = ''))
          OR (status = 'derived' AND (formula IS NULL OR NOT EXISTS (
              SELECT 1 FROM field_inputs i WHERE i.reference_id = f.reference_id AND i.field = f.field)))
          OR status NOT IN ('published', 'preliminary', 'derived', 'unknown')
    """).fetchall()
    statuses = {row[0] for row in con.execute("SELECT DISTINCT status FROM fields").fetchall()}
    con.close()
    assert broken == []
    assert {"published", "derived", "unknown"} <= statuses


def test_physical_facts_nobody_states_stay_unknown(built_registry):
    import duckdb

    con = duckdb.connect(str(ensure_database(built_registry)), read_only=True)
    rows = con.execute("""SELECT DISTINCT status FROM fields WHERE field IN ('physical.cable_lengths',
        'physical.cage_types', 'physical.rack_positions', 'commercial.price', 'oem.board_population',
        'physical.nic_gpu_pairing')""").fetchall()
    con.close()
    assert rows == [("unknown",)]


def test_every_network_bandwidth_carries_unit_and_direction(built_registry):
    """Link bandwidths say per direction or bidirectional; memory bandwidth and arithmetic throughput are not
    links and have none."""
    import duckdb

    con = duckdb.connect(str(ensure_database(built_registry)), read_only=True)
    rows = con.execute(
        "SELECT field, unit, direction FROM fields "
        "WHERE unit LIKE '%/s' AND field NOT LIKE 'accelerator.memory_bandwidth%' "
        "AND field NOT LIKE 'accelerator.peak_%'"
    ).fetchall()
    con.close()
    assert rows and all(re.fullmatch(r"[GT][bB]/s", u) and d in ("per_direction", "bidirectional") for _, u, d in rows)
