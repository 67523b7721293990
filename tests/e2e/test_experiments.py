"""Experiments end to end, in a copy of the session's `dvc repro` clone: `dvc exp run -S <knob>=<value>` reruns
exactly the stages that read the knob and moves their metrics; `dvc metrics show` reads what the stages wrote
(`dvc plots show`: test_dvc_plots_offline.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, env_with_venv

WORKLOADS = sorted(p.stem for p in (ROOT / "models" / "workloads").glob("*.yaml"))


def _raw_stages() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def _metric_files(root: Path, wid: str) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((root / "metrics" / wid).glob("*.json"))}


def _ran(out: str) -> list[str]:
    """The stages `dvc repro` / `dvc exp run` ran, sorted."""
    return sorted(line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage"))


def _sh(cmd: list[str], cwd: Path) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env_with_venv(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
def test_dvc_metrics_show_is_a_narrow_table_of_numbers():
    """The workloads' metrics (`dvc metrics show metrics`): one row per workload × target, columns the short keys,
    at most ~160 characters wide (the path is most of it), under 140 for one workload, every cell a number or
    DVC's '-' for a figure left out."""
    out = _sh(["dvc", "metrics", "show", "metrics"], ROOT)
    lines = [line for line in out.splitlines() if line.strip()]
    header, rows = lines[0].split(), lines[1:]
    assert header[0] == "Path" and sorted(header[1:]) == header[1:]
    assert len(rows) == sum(len(_metric_files(ROOT, wid)) for wid in WORKLOADS)
    assert max(len(line) for line in lines) <= 160, max(len(line) for line in lines)
    for row in rows:
        path, *cells = row.split()
        assert path.startswith("metrics/") and len(cells) == len(header) - 1, row
        for cell in cells:
            assert cell == "-" or float(cell) == float(cell), row
    one = _sh(["dvc", "metrics", "show", "metrics/llama70b-train-tp8-dp512"], ROOT)
    assert max(len(line) for line in one.splitlines()) <= 140
    assert "ttft_s" not in one  # a training workload's table has no inference columns


@pytest.mark.slow
def test_dvc_exp_run_set_param_reruns_only_that_workload_and_moves_its_metric(pipeline_copy: Path):
    built_pipeline = pipeline_copy  # a copy of its own (conftest): nothing to put back
    wid = "llama70b-train-tp8-dp512"
    before = _metric_files(built_pipeline, wid)
    try:
        out = _sh(["dvc", "exp", "run", "-S", f"workloads.{wid}.dp=256"], built_pipeline)
        # Not the other workloads, the sharing pair, the reference and cluster pages or the views file (the
        # traffic tables' columns did not move: registry/traffic/schema.json).
        assert _ran(out) == ["report", "traffic", f"traffic-workload@{wid}"], out
        after = _metric_files(built_pipeline, wid)
        assert sorted(after) == sorted(before)
        for target in before:
            assert after[target]["comm_s"] != before[target]["comm_s"]
        diff = json.loads(_sh(["dvc", "params", "diff", "--json"], built_pipeline))
        moved = diff["params.yaml"][f"workloads.{wid}.dp"]
        assert (moved["old"], moved["new"]) == (512, 256) and list(diff["params.yaml"]) == [f"workloads.{wid}.dp"]
        shown = json.loads(_sh(["dvc", "metrics", "diff", "--json"], built_pipeline))
        assert sorted(shown) == sorted(f"metrics/{wid}/{t}.json" for t in before)
    finally:
        _sh(["git", "checkout", "--", "params.yaml"], built_pipeline)
        _sh(["dvc", "repro"], built_pipeline)  # back as built (the run cache restores the outputs)
    assert "up to date" in _sh(["dvc", "status"], built_pipeline)
    assert _metric_files(built_pipeline, wid) == before


def _stale(root: Path, edits: dict[str, tuple[str, str]]) -> list[str]:
    """The stages `dvc status` names stale, each for a changed params.yaml entry, once params.yaml carries `edits`
    (key: text before, text after); params.yaml is put back afterwards."""
    params = root / "params.yaml"
    text = params.read_text()
    try:
        edited = text
        for old, new in edits.values():
            assert edited.count(old) == 1, old
            edited = edited.replace(old, new)
        params.write_text(edited)
        status = json.loads(_sh(["dvc", "status", "--json"], root))
    finally:
        params.write_text(text)
    for stage, changes in status.items():  # each for the edited params and nothing else
        assert changes == [{"changed deps": {"params.yaml": dict.fromkeys(edits, "modified")}}], (stage, changes)
    return sorted(status)


@pytest.mark.slow
def test_dvc_exp_run_set_a_step_choice_and_a_calibration_number_reruns_the_stages_that_read_them(
    pipeline_copy: Path,
) -> None:
    """The stages each knob makes stale are the ones that read it, as `dvc status` names them: `step` every
    workload's stage and validate, not the sharing pair or the KV curve; a calibration number (NVLink 5's
    efficiency) every stage that costs collectives. One `dvc exp run` with both then reruns those and what reads
    their outputs (topology does not rerun), and the metrics move by the hand-computed amounts: every fit headroom
    on the 80 GB H100s drops by 10 % of the memory (8 GB) with their step time unmoved (no NVLink 5 there), and
    the KV transfer over NVLink 5 takes longer."""
    built_pipeline = pipeline_copy  # a copy of its own (conftest): nothing to put back
    step_key, calibration_key = "step.memory_headroom", "calibration.link_classes.nvlink5.efficiency"
    step_edit = ("memory_headroom: 0.0\n", "memory_headroom: 0.1\n")
    sharing = [f"traffic-sharing@{k}" for k in _raw_stages()["traffic-sharing"]["foreach"]]
    workloads = [f"traffic-workload@{w}" for w in WORKLOADS]
    assert _stale(built_pipeline, {"step": step_edit}) == sorted([*workloads, "validate"])
    calibration = yaml.safe_load((built_pipeline / "params.yaml").read_text())["calibration"]
    assert calibration["link_classes"]["nvlink5"]["efficiency"] == 0.822
    calibration_stale = sorted([*sharing, *workloads, "traffic-curves", "validate"])
    assert _stale(built_pipeline, {"calibration": ("efficiency: 0.822", "efficiency: 0.7")}) == calibration_stale

    wid, target = "llama70b-serve-disaggregated", "nvidia-gb200-nvl72"
    before = {w: _metric_files(built_pipeline, w) for w in WORKLOADS}
    out = _sh(["dvc", "exp", "run", "-S", f"{step_key}=0.1", "-S", f"{calibration_key}=0.7"], built_pipeline)
    # The KV-transfer curve and the measured comparison move too, so report-models redraws their plots.
    expected = ["report", "report-models", "traffic", "traffic-curves", *sharing, *workloads, "validate"]
    assert _ran(out) == sorted(expected), out  # every stage that reads a knob, and what reads their outputs
    for w in WORKLOADS:
        after = _metric_files(built_pipeline, w)
        for t in ("illustrative-h100-4096", "meta-style-h100-24576"):
            if t in after:
                assert after[t]["free_gb"] == pytest.approx(before[w][t]["free_gb"] - 8.0, abs=1e-6)
                assert after[t].get("step_s") == before[w][t].get("step_s")
    moved = 1_342_177_280 / (900e9 * 0.7) - 1_342_177_280 / (900e9 * 0.822)  # the KV transfer over NVLink 5
    assert _metric_files(built_pipeline, wid)[target]["ttft_s"] - before[wid][target]["ttft_s"] >= moved - 3e-8
    diff = json.loads(_sh(["dvc", "params", "diff", "--json"], built_pipeline))["params.yaml"]
    assert sorted(diff) == sorted([step_key, calibration_key])
    assert (diff[step_key]["old"], diff[step_key]["new"]) == (0.0, 0.1)
    assert (diff[calibration_key]["old"], diff[calibration_key]["new"]) == (0.822, 0.7)


@pytest.mark.slow
def test_a_failed_dvc_exp_run_leaves_the_workspace_as_it_was_and_says_what_to_run(pipeline_copy: Path):
    """A knob set to a value the stages refuse (`-S`): the run fails naming the knob, every file git tracks but
    the params.yaml `-S` edited is as it was (the metrics and dvc.lock included), and the message names the
    commands that put the rest back; after them nothing is left to reproduce."""
    root = pipeline_copy  # a copy of its own (conftest): nothing to put back
    tracked = {p: (root / p).read_bytes() for p in _sh(["git", "ls-files"], root).splitlines() if (root / p).is_file()}
    for knob in ("step.memory_headroom=1.5", "workloads.llama70b-train-tp8-dp512.dp=0"):
        done = subprocess.run(
            ["dvc", "exp", "run", "-S", knob], cwd=root, env=env_with_venv(), capture_output=True, text=True
        )
        said = done.stdout + done.stderr
        assert done.returncode != 0, said
        assert knob.split("=")[0].rsplit(".", 1)[-1] in said, said
        assert "git checkout -- params.yaml" in said and "dvc checkout" in said, said
        now = {p: (root / p).read_bytes() if (root / p).is_file() else None for p in tracked}
        changed = sorted(p for p, data in tracked.items() if now[p] != data)
        assert changed == ["params.yaml"], knob
        _sh(["bash", "-ec", "git checkout -- params.yaml && dvc checkout"], root)
        assert "up to date" in _sh(["dvc", "status"], root)
