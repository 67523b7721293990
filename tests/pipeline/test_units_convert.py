"""Compile converts units: a vocabulary unit change (Gb/s → GB/s) gives 50 GB/s, never a relabelled 400 GB/s."""

from __future__ import annotations

import json

import pytest
from conftest import ensure_database
from fabricref.compile import references
from fabricref.compile.stage import load_claims
from fabricref.core.paths import Layout
from fabricref.core.sources import load_sources
from fabricref.errors import CompileError
from fabricref.extract import stage as extract_stage

SPEED = "scale_out.nic.speed"
REFERENCE = "nvidia-dgx-h100"


def set_unit(lay: Layout, key: str, unit: str) -> None:
    path = lay.schemas_dir / "vocabulary.json"
    data = json.loads(path.read_text())
    data["fields"][key]["unit"] = unit
    path.write_text(json.dumps(data, indent=2) + "\n")


def records(lay: Layout) -> dict[str, dict]:
    """Field records of the one reference, compiled from the claims extract wrote (no DuckDB needed)."""
    claims = load_claims(lay, load_sources(lay))
    (ref,) = [r for r in references.load_references(lay) if r.id == REFERENCE]
    return references.resolve(ref, claims)


@pytest.mark.slow
def test_a_vocabulary_unit_change_converts_the_value_and_never_relabels_it(repo):
    extract_stage.run(repo, load_sources(repo))
    before = records(repo)[SPEED]
    assert (before["value_number"], before["unit"], before["direction"]) == (400.0, "Gb/s", "per_direction")

    set_unit(repo, SPEED, "GB/s")
    extract_stage.run(repo, load_sources(repo))
    after = records(repo)[SPEED]
    # 400 Gb/s per direction = 400e9 / 8 bytes/s = 50 GB/s per direction.
    assert (after["value_number"], after["unit"], after["direction"]) == (50.0, "GB/s", "per_direction")
    # A derived field built on it is in consistent units too: 8 NICs x 50 GB/s / 8 GPUs, stored in Gb/s.
    per_gpu = records(repo)["scale_out.bandwidth_per_accelerator"]
    assert (per_gpu["value_number"], per_gpu["unit"], per_gpu["status"]) == (400.0, "Gb/s", "derived")


@pytest.mark.slow
def test_compile_converts_a_claim_stated_in_another_unit_even_from_stale_claims(extracted):
    """Claims written under the old vocabulary (400 Gb/s) read with the new one (GB/s): converted, not relabelled."""
    repo = extracted  # extract already run (the module's copy)
    set_unit(repo, SPEED, "GB/s")
    record = records(repo)[SPEED]
    assert (record["value_number"], record["unit"], record["direction"]) == (50.0, "GB/s", "per_direction")


@pytest.mark.slow
def test_a_claim_of_another_dimension_is_a_compile_error_naming_everything(extracted):
    repo = extracted  # extract already run (the module's copy)
    set_unit(repo, SPEED, "GB")
    claims = load_claims(repo, load_sources(repo))
    # Only the reference under test: another model's labelled assumption in Gb/s is refused at load time against
    # the corrupted vocabulary, before the claim this test is about is resolved.
    ref = references.load_reference(repo.references_dir / f"{REFERENCE}.yaml", repo)
    with pytest.raises(CompileError) as err:
        references.resolve(ref, claims)
    text = str(err.value)
    assert f"{ref.path}: at $.fields.{SPEED}" in text
    cite = ref.fields[SPEED].cite[0]
    assert f"{cite!r} states Gb/s per_direction" in text
    assert "stored in GB" in text and "cannot convert Gb/s to GB" in text


@pytest.mark.slow
def test_the_issue_reproduction_through_the_cli_reads_50_gb_per_s(repo, cli):
    """Issue 11 case 1 as a user runs it: extract, change the unit, `fabricref extract && fabricref compile`."""
    import duckdb

    assert cli("extract", root=repo.root).code == 0
    set_unit(repo, SPEED, "GB/s")
    extracted = cli("extract", root=repo.root)
    assert extracted.code == 0
    assert cli("compile", root=repo.root).code == 0
    con = duckdb.connect(str(ensure_database(repo)), read_only=True)
    try:
        row = con.execute(
            "SELECT value_number, unit, direction FROM fields WHERE reference_id = ? AND field = ?", [REFERENCE, SPEED]
        ).fetchone()
    finally:
        con.close()
    assert row == (50.0, "GB/s", "per_direction")
