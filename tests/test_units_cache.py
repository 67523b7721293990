"""The extraction cache is keyed by all that shapes its output and verified on read; compile converts units.

Regression tests for issue 11 case 1: a vocabulary unit change (Gb/s → GB/s) must give 50 GB/s, never a
relabelled 400 GB/s, and an edited cache entry must never reach the registry.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import copy_checkout

from pipeline.compile import references
from pipeline.compile.stage import load_claims
from pipeline.core.errors import CompileError
from pipeline.core.paths import Layout
from pipeline.core.registry import ensure_database
from pipeline.core.sources import load_sources
from pipeline.extract import stage as extract_stage

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


def cache_entries(lay: Layout) -> list[Path]:
    return sorted((lay.cache_dir / "extract").glob("*.json"))


@pytest.fixture(scope="module")
def _extracted_once(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """The checkout copied and run through extract once per module (xdist worker): its claims and its extraction
    cache, as a first `extract` leaves them, for the tests that start from there."""
    lay = Layout(copy_checkout(tmp_path_factory.mktemp("extracted") / "repo"))
    extract_stage.run(lay, load_sources(lay))
    return lay


@pytest.fixture
def extracted(_extracted_once: Layout, tmp_path: Path) -> Layout:
    """A private copy of the extracted checkout (claims and cache entries included), for a test that changes it:
    the state a fresh `extract` of the shipped data leaves, without running it again per test (~0.3 CPU s)."""
    return Layout(shutil.copytree(_extracted_once.root, tmp_path / "repo"))


def test_a_vocabulary_unit_change_converts_the_value_and_never_relabels_it(repo):
    first = extract_stage.run(repo, load_sources(repo))
    assert first.parsed and not first.reused
    before = records(repo)[SPEED]
    assert (before["value_number"], before["unit"], before["direction"]) == (400.0, "Gb/s", "per_direction")

    set_unit(repo, SPEED, "GB/s")
    second = extract_stage.run(repo, load_sources(repo))
    # Every source whose rules read the changed key is parsed again; the others may be reused.
    reads_speed = sorted({s.id for s in load_sources(repo) if any(r.field == SPEED for r in s.rules)})
    assert reads_speed and sorted(second.parsed) == reads_speed
    after = records(repo)[SPEED]
    # 400 Gb/s per direction = 400e9 / 8 bytes/s = 50 GB/s per direction.
    assert (after["value_number"], after["unit"], after["direction"]) == (50.0, "GB/s", "per_direction")
    # A derived field built on it is in consistent units too: 8 NICs x 50 GB/s / 8 GPUs, stored in Gb/s.
    per_gpu = records(repo)["scale_out.bandwidth_per_accelerator"]
    assert (per_gpu["value_number"], per_gpu["unit"], per_gpu["status"]) == (400.0, "Gb/s", "derived")


def test_compile_converts_a_claim_stated_in_another_unit_even_from_stale_claims(extracted):
    """Claims written under the old vocabulary (400 Gb/s) read with the new one (GB/s): converted, not relabelled."""
    repo = extracted  # extract already run (the module's copy)
    set_unit(repo, SPEED, "GB/s")
    record = records(repo)[SPEED]
    assert (record["value_number"], record["unit"], record["direction"]) == (50.0, "GB/s", "per_direction")


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
    cite = ref.fields[SPEED]["cite"][0]
    assert f"{cite!r} states Gb/s per_direction" in text
    assert "stored in GB" in text and "cannot convert Gb/s to GB" in text


def _edit_speed_in_cache(lay: Layout, new_number: float) -> Path:
    for path in cache_entries(lay):
        text = path.read_text()
        if '"value_number": 400.0' in text and "Gb/s" in text:
            path.write_text(text.replace('"value_number": 400.0', f'"value_number": {new_number}', 1))
            return path
    raise AssertionError("no cache entry holds a 400 Gb/s value")


def test_an_edited_cache_entry_never_reaches_the_claims(extracted):
    repo = extracted  # extract already run (the module's copy)
    edited = _edit_speed_in_cache(repo, 4000.0)
    stats = extract_stage.run(repo, load_sources(repo))
    assert stats.parsed == stats.rejected and len(stats.parsed) == 1, "the edited entry is recomputed, not reused"
    claims = load_claims(repo, load_sources(repo))
    numbers = {c["value_number"] for c in claims.values() if c["field"] == SPEED}
    assert 4000.0 not in numbers and 400.0 in numbers
    assert records(repo)[SPEED]["value_number"] == 400.0
    # The entry was overwritten with the recomputed result: the next run reuses it again.
    assert '"value_number": 4000.0' not in edited.read_text()
    third = extract_stage.run(repo, load_sources(repo))
    assert not third.parsed


def test_a_damaged_entry_is_recomputed(extracted):
    repo = extracted  # extract already run (the module's copy)
    damaged = cache_entries(repo)[0]
    damaged.write_text(damaged.read_text()[:100])
    stats = extract_stage.run(repo, load_sources(repo))
    assert len(stats.parsed) == 1 and stats.rejected == stats.parsed
    assert json.loads(damaged.read_text())["payload_sha256"]


def test_an_entry_written_under_another_key_is_not_reused(extracted):
    """Copying an entry to the file name of another key (or a stale format without a key) is recomputed."""
    repo = extracted  # extract already run (the module's copy)
    entries = cache_entries(repo)
    assert len(entries) >= 2
    a, b = entries[0], entries[1]
    b.write_bytes(a.read_bytes())
    stats = extract_stage.run(repo, load_sources(repo))
    assert len(stats.parsed) == 1
    assert a.read_bytes() != b.read_bytes()


def test_the_code_version_is_hashed_from_the_files_the_extractor_imports(tmp_path):
    """Editing the unit code changes the version (every entry is recomputed); editing compile does not."""
    package = Path(extract_stage.__file__).resolve().parents[1]
    copy = tmp_path / "pipeline"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    names = {p.relative_to(tmp_path).as_posix() for p in extract_stage.code_files(copy)}
    assert {"pipeline/extract/rules.py", "pipeline/extract/stage.py", "pipeline/core/units.py"} <= names
    assert not any(n.startswith(("pipeline/compile/", "pipeline/traffic/", "pipeline/cli")) for n in names)
    original = extract_stage.code_version(copy)
    assert original == extract_stage.code_version(package)
    (copy / "compile" / "references.py").write_text("# not read by extraction\n")
    assert extract_stage.code_version(copy) == original
    units = copy / "core" / "units.py"
    units.write_text(units.read_text().replace('"G": 1e9', '"G": 1e9 * 8'))
    assert extract_stage.code_version(copy) != original


@pytest.mark.slow
def test_the_issue_reproduction_through_the_cli_reads_50_gb_per_s(repo, cli):
    """Issue 11 case 1 as a user runs it: extract, change the unit, `fabricref extract && fabricref compile`."""
    import duckdb

    assert cli("extract", root=repo.root).code == 0
    set_unit(repo, SPEED, "GB/s")
    extracted = cli("extract", root=repo.root)
    assert extracted.code == 0 and f"reused {len(load_sources(repo))} " not in extracted.out
    assert cli("compile", root=repo.root).code == 0
    con = duckdb.connect(str(ensure_database(repo)), read_only=True)
    try:
        row = con.execute(
            "SELECT value_number, unit, direction FROM fields WHERE reference_id = ? AND field = ?", [REFERENCE, SPEED]
        ).fetchone()
    finally:
        con.close()
    assert row == (50.0, "GB/s", "per_direction")


def test_the_code_version_changes_with_the_libraries_that_read_the_snapshot(monkeypatch):
    """bs4 and soupsieve find the elements; `regex` runs every rule's parse.pattern (pipeline/core/patterns.py):
    another version of any of them may read other values, so each is part of the key."""
    real = extract_stage.importlib.metadata.version
    original = extract_stage.code_version()
    for library in ("beautifulsoup4", "soupsieve", "regex"):
        monkeypatch.setattr(
            extract_stage.importlib.metadata,
            "version",
            lambda name, library=library: "0.0.0-other" if name == library else real(name),
        )
        assert extract_stage.code_version() != original, library
