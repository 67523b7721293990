"""Readable CLI output (#17): "did you mean" for a misspelt id, nested values as sub-tables (never a dict or JSON
in a cell), and identifiers that wrap instead of being cut when the terminal is narrow."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from fabricref.cli.output import cell, make_table
from fabricref.errors import FabricrefError, UnknownIdError, did_you_mean
from rich.console import Console

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = sorted(p.stem for p in (ROOT / "models" / "references").glob("*.yaml"))
WORKLOADS = sorted(p.stem for p in (ROOT / "models" / "workloads").glob("*.yaml"))
CLUSTERS = sorted(p.stem for p in (ROOT / "models" / "clusters").glob("*.yaml"))


def test_did_you_mean_names_the_closest_ids():
    known = ["nvidia-dgx-h100", "nvidia-dgx-b200", "amd-helios"]
    assert did_you_mean("nvidia-dgx-h10", known)[0] == "nvidia-dgx-h100"
    assert did_you_mean("NVIDIA-DGX-H100", known)[0] == "nvidia-dgx-h100"  # case alone comes first
    assert did_you_mean("zzz", known) == []
    err = UnknownIdError("reference", "zzz", known)
    assert str(err) == "no reference 'zzz' (known: amd-helios, nvidia-dgx-b200, nvidia-dgx-h100)"
    assert err.exit_code == 2
    many = [f"field.k{i:02d}" for i in range(40)]
    text = str(UnknownIdError("field", "field.k1", many, "see show", "x"))
    assert text.startswith("no field 'field.k1' in x; did you mean 'field.k") and text.endswith("(40 known); see show")
    assert text.count("'field.k") == 1 + 3  # the name, then the three closest (not all forty)


# The fast tier misspells a representative few ids (a server, a rack, a switch, a NIC, a cluster's reference; a
# system topology and a cluster); the whole suite (CI) every shipped one.
FAST = {
    "nvidia-dgx-h100",
    "nvidia-gb200-nvl72",
    "broadcom-tomahawk-5",
    "nvidia-connectx-7",
    "meta-genai-24k-roce",
    "illustrative-h100-4096",
}


def _tier(ids: list[str]) -> list[object]:
    assert not FAST - set(REFERENCES), FAST - set(REFERENCES)  # a renamed one is not silently dropped
    return [i if i in FAST else pytest.param(i, marks=pytest.mark.slow) for i in ids]


@pytest.mark.parametrize("reference", _tier(REFERENCES))
def test_a_misspelt_reference_is_bad_usage_naming_the_closest(built_registry, cli, reference):
    r = cli("show", reference[:-1], root=built_registry.root)
    assert r.code == 2 and "did you mean" in r.err and f"'{reference}'" in r.err, r.err


@pytest.mark.parametrize("topology", _tier([*CLUSTERS, "nvidia-dgx-h100"]))
def test_a_misspelt_topology_names_the_closest(built_registry, cli, topology):
    wrong = topology.replace("-", "_", 1)
    r = cli("estimate", "collective", "--topology", wrong, "--ranks", "8", "--op", "all-reduce", "--bytes", "1G",
            root=built_registry.root)  # fmt: skip
    assert r.code == 2 and f"did you mean '{topology}'" in r.err, r.err
    r = cli("topology", wrong, root=built_registry.root)
    assert r.code == 2 and f"did you mean '{topology}'" in r.err, r.err


def test_misspelt_workload_and_field_name_the_closest(built_registry, cli):
    root = built_registry.root
    for workload in WORKLOADS:
        r = cli("estimate", "workload", "nvidia-dgx-h100", workload + "x", root=root)
        assert r.code == 2 and f"did you mean '{workload}'" in r.err, r.err
    r = cli("audit", "nvidia-dgx-h100", "scale_up.bandwidth_per_acelerator", root=root)
    assert r.code == 2 and "did you mean 'scale_up.bandwidth_per_accelerator'" in r.err, r.err
    assert "fabricref show nvidia-dgx-h100" in r.err


def _render(renderable, width: int = 80) -> str:
    console = Console(file=io.StringIO(), width=width, highlight=False, markup=False)
    console.print(renderable)
    return console.file.getvalue()


def test_nested_values_are_sub_tables_never_dicts_or_json():
    text = _render(cell({"published": 3, "nested": {"a": [1, 2]}, "rows": [{"x": 1, "y": "two"}]}))
    assert "{" not in text and "[" not in text and '"' not in text
    lines = [line.split() for line in text.splitlines()]
    assert ["published", "3"] in lines and ["rows", "x", "y"] in lines and ["1", "two"] in lines
    assert ["nested", "a", "1"] in lines and ["2"] in lines


@pytest.mark.slow
def test_topology_and_status_print_no_raw_dicts(built_registry, cli):
    r = cli("topology", "nvidia-dgx-h100", root=built_registry.root)
    assert r.code == 0, r.err
    assert "{" not in r.out and '"' not in r.out
    assert any(
        line.split()[-2:] == ["scale_up_switch", "4"] for line in r.out.replace("│", " ").splitlines() if line.split()
    )
    r = cli("status", root=built_registry.root)
    assert "{" not in r.out and '"' not in r.out


@pytest.mark.parametrize("columns", [80, 140])
def test_ids_are_never_cut_in_a_narrow_terminal(built_registry, cli, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    r = cli("references", root=built_registry.root)
    assert r.code == 0, r.err
    assert all(len(line) <= columns for line in r.out.splitlines())
    assert "…" not in r.out and all(ref in r.out for ref in REFERENCES)
    r = cli("estimate", "workload", "nvidia-dgx-h100", "llama70b-serve-aggregated", root=built_registry.root)
    assert r.code == 0, r.err
    assert all(len(line) <= columns for line in r.out.splitlines())
    assert "…" not in r.out
    for phase in ("prefill-tp-all-reduce", "decode-tp-all-reduce"):
        assert phase in r.out


def test_a_key_column_too_long_for_the_terminal_wraps_whole():
    """An id longer than half an 80-column terminal folds onto the next line: every character is printed."""
    long_id = "a-very-long-identifier-" * 4 + "end"
    text = _render(make_table("id", "a", "b", "c", "d", "e", rows=[[long_id, 1, 2, 3, 4, 5]]), 60)
    assert "…" not in text
    assert "".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")) == long_id


def test_a_path_or_hash_longer_than_the_line_is_printed_whole():
    """Messages wrap between words; a word wider than the terminal (a store path, a SHA-256) keeps one line of its
    own, so it can be copied or searched for, and the words around it still wrap."""
    from fabricref.cli.output import out

    path, sha = "/tmp/" + "store/" * 15 + "85", "8594987a1b4c" * 5 + "bd1a"
    width = out.width
    out.width = 60
    try:
        with out.capture() as captured:
            out.print(
                f"needs attention: a measured log {path}: hash mismatch: pinned sha256 {sha}, stored bytes differ"
            )
    finally:
        out.width = width
    lines = captured.get().splitlines()
    assert f"{path}:" in lines and f"{sha}," in lines
    assert all(len(line) <= 60 for line in lines if path not in line and sha not in line)
    assert (
        " ".join(lines).split()
        == f"needs attention: a measured log {path}: hash mismatch: pinned sha256 {sha}, stored bytes differ".split()
    )


def test_query_results_show_structs_and_lists_as_sub_tables(built_registry, cli):
    r = cli("query", "SELECT 'a' AS id, {'published': 3, 'derived': [1, 2]} AS s, [{'x': 1, 'y': 'two'}] AS l",
            root=built_registry.root)  # fmt: skip
    assert r.code == 0, r.err
    assert "{" not in r.out and "'" not in r.out and "[" not in r.out
    lines = [line.replace("│", " ").split() for line in r.out.splitlines()]
    assert ["a", "published", "3", "x", "y"] in lines and ["derived", "1", "1", "two"] in lines, r.out


def test_a_failed_stage_under_dvc_says_to_put_back_the_file_its_error_names(no_sources, monkeypatch):
    """A workload file edited by hand broke its stage; the hint said `git checkout -- params.yaml`, which left the
    edit in place. The file the error names is what to put back; params.yaml when none is named."""
    from fabricref.core.entry import _under_dvc

    monkeypatch.setenv("DVC_STAGE", "traffic-workload@w")
    monkeypatch.chdir(no_sources.root)
    path = no_sources.root / "models" / "workloads" / "llama8b-fsdp-dp64.yaml"
    for named in (str(path), "models/workloads/llama8b-fsdp-dp64.yaml"):
        hint = _under_dvc(f"{named}:8: at $.model.hidden: expected at least 1")
        assert "`git checkout -- models/workloads/llama8b-fsdp-dp64.yaml && dvc checkout` (undoing the edit)" in hint
    for error in ("params.yaml:60: at $.workloads.w.seq_len: ...", "no file named here", "/etc/passwd: odd"):
        assert "`git checkout -- params.yaml && dvc checkout` (undoing a `dvc exp run -S` or an edit)" in _under_dvc(
            error
        ), error
    monkeypatch.delenv("DVC_STAGE")
    assert _under_dvc(str(path)) == ""


WORKLOADS = sorted(p.stem for p in (ROOT / "models" / "workloads").glob("*.yaml"))


@pytest.mark.parametrize("wid", WORKLOADS)
def test_a_workload_whose_knobs_params_yaml_lost_is_named_there_not_in_its_file(no_sources, wid):
    """Deleting `workloads.<id>` from params.yaml gave one "Field required" per knob at the workload file's line,
    where the knobs are never written."""
    import yaml
    from fabricref.estimate.workloads import KNOBS, find_workload

    params = no_sources.root / "params.yaml"
    data = yaml.safe_load(params.read_text(encoding="utf-8"))
    knobs = list(data["workloads"].pop(wid))
    params.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(FabricrefError) as caught:
        find_workload(no_sources, wid)
    said = str(caught.value)
    assert said.startswith(f"{params}: at $.workloads.{wid}: "), said
    assert "a workload's knobs live in params.yaml" in said and "\n" not in said, said
    kind = yaml.safe_load((no_sources.root / "models" / "workloads" / f"{wid}.yaml").read_text())["kind"]
    assert set(knobs) <= set(KNOBS[kind])
    # Those the model cannot do without are named (a knob with a default may go unnamed).
    named = said.split(": ", 2)[2].split(" missing")[0].split(", ")
    assert named and set(named) <= set(knobs), said


def test_a_knob_set_for_one_estimate_is_named_as_given_not_as_the_workload_file(built_registry, cli):
    """`--set tp=0` was refused as `models/workloads/….yaml: at $.inference.tp …`: a file that says no such thing."""
    wid = "llama70b-serve-aggregated"
    done = cli("estimate", "workload", "nvidia-dgx-h100", wid, "--set", "tp=0", root=built_registry.root)
    assert done.code == 2 and "tp=0: Input should be greater than or equal to 1 (got 0)" in done.said, done.said
    assert ".yaml" not in done.said, done.said
