"""What each stage really touches, and what `dvc status` says after an edit.

- Data: every stage process of the session's cold `dvc repro` (conftest.built_pipeline) runs under an audit hook
  (tests/stage_audit); every file it opens to read (and every Parquet file it reads through DuckDB) must be under a
  declared dep or its own outputs, every file it writes under its outputs, and every module it loaded in the static
  import closure tests/unit/test_dvc_deps.py checks against dvc.yaml.
- `dvc status` names every stage an edited module makes stale.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fabricref
import pytest
from closure import covered, dvc_stages, entry_argv, entry_module, import_closure, params_files
from conftest import env_with_venv, stage_audit_dir, stage_audit_env
from fabricref.core.files import LOCK

PACKAGE = os.path.dirname(os.path.realpath(fabricref.__file__))

# -- data deps: every stage of the shared cold `dvc repro`, as recorded by tests/stage_audit -----------------------


@pytest.mark.slow
def test_every_stage_reads_only_what_it_declares_and_writes_only_its_outputs(built_pipeline: Path):
    """On the session's cold `dvc repro` (conftest.built_pipeline), every stage process recorded what it opened,
    renamed and removed (tests/stage_audit): exactly one `python -m` per stage, the one dvc.yaml names."""
    root = Path(os.path.realpath(built_pipeline))
    audit = stage_audit_dir(built_pipeline)
    stages = dvc_stages(root)
    ran = {json.loads(p.read_text())["stage"] for p in audit.glob("*.json")}
    for stage in [s for s in stages if s not in ran]:
        # A stage without outputs whose deps came out as dvc.lock records them (the database stage) is up to date
        # for DVC even on a cold run: run it here as DVC would (same command, DVC_STAGE set), on the built tree.
        module, args = entry_argv(stages[stage]["cmd"])
        assert not stages[stage].get("outs"), f"stage {stage} has outputs, yet the cold dvc repro did not run it"
        done = subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=root,
            env={**stage_audit_env(audit), "DVC_STAGE": stage},
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, f"stage {stage} failed:\n{done.stdout}\n{done.stderr}"
    records: dict[str, list[dict]] = {}
    for path in sorted(audit.glob("*.json")):
        record = json.loads(path.read_text())
        records.setdefault(record["stage"], []).append(record)
    assert sorted(records) == sorted(stages), "the cold dvc repro audited other stages than dvc.yaml lists"
    problems: list[str] = []
    for stage in stages:
        spec = stages[stage]
        module, args = entry_argv(spec["cmd"])
        assert [r["argv"] for r in records[stage]] == [["-m", module, *args]], (stage, records[stage])
        (record,) = records[stage]
        deps = [str(d) for d in spec["deps"]] + params_files(spec)
        outs = [str(next(iter(o))) if isinstance(o, dict) else str(o) for o in spec.get("outs", [])]
        outs += [str(next(iter(m))) if isinstance(m, dict) else str(m) for m in spec.get("metrics", [])]
        closure = import_closure(entry_module(spec["cmd"]))
        for loaded in record["loaded"]:
            # The package is the one installed (the editable install maps `fabricref` to its checkout's
            # pipeline/), which may be another checkout than the clone DVC runs in: relative to that package.
            rel = "pipeline/" + os.path.relpath(os.path.realpath(loaded), PACKAGE)
            if rel not in closure:
                problems.append(f"{stage} loaded {rel}, which the static import closure misses")
        for kind, logged, was_file in record["log"]:  # was_file: when the stage exited
            path = os.path.realpath(logged)
            if not path.startswith(str(root) + "/"):
                continue
            rel = os.path.relpath(path, root)
            if not was_file or "__pycache__" in rel:
                continue
            if rel == LOCK:
                continue  # the checkout's writer lock every stage holds (git-ignored coordination, not data)
            if (
                stage == "database"
                and rel.startswith("registry/")
                and Path(rel).name.startswith((".registry.", "registry.duckdb"))
            ):
                continue  # the views file, deliberately not an output (see pipeline/core/registry.py)
            # A table's recorded SHA-256 (X.parquet.sha256) is written with it by the same stage: declaring the
            # table declares it.
            if kind == "read" and not covered(rel.removesuffix(".sha256"), deps + outs):
                problems.append(f"{stage} reads {rel}, which dvc.yaml does not declare")
            if kind == "write" and not covered(rel, outs):
                problems.append(f"{stage} writes {rel}, which is not one of its outputs")
    assert not sorted(set(problems)), "\n".join(sorted(set(problems)))


@pytest.mark.slow
def test_a_workload_knob_reruns_no_stage_that_loads_matplotlib_or_a_topology(built_pipeline: Path):
    """The stages a changed workload reruns (its own, the combine step, the workload part of the report): the
    report's workload part draws its time bars in the page and colours the models part's drawings as data, so it
    loads neither matplotlib nor networkx; the models part, which a knob never reruns, draws with both."""
    heavy = {}
    for path in stage_audit_dir(built_pipeline).glob("*.json"):
        record = json.loads(path.read_text())
        heavy[record["stage"]] = set(record["heavy"])
    assert {"matplotlib", "networkx"} <= heavy["report-models"]
    assert heavy["report"].isdisjoint({"matplotlib", "networkx"}), heavy["report"]
    assert "matplotlib" not in heavy["traffic"] and "matplotlib" not in heavy["traffic-workload@moe-train-ep16"]


# -- dvc status names what an edit makes stale ---------------------------------------------------------------


def _stale(root: Path) -> set[str]:
    """The stages `dvc status` names (each changed dep or output under a stage's name)."""
    done = subprocess.run(
        ["dvc", "status", "--json"], cwd=root, env=env_with_venv(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


@pytest.mark.slow
def test_dvc_status_names_every_stage_an_edited_module_makes_stale(pipeline_copy: Path):
    """An edit in the traffic library names every traffic stage (each workload's, the sharing pair's, the curve,
    the comparison and the combine step) and validation, and nothing else; one in the report's package both
    report stages; one in pipeline/core every stage. DVC names the stages whose own deps moved: the report reruns
    after a traffic edit once the traffic stages, rerun by `dvc repro`, write other tables."""
    stages = dvc_stages(pipeline_copy)
    assert _stale(pipeline_copy) == set()
    edited = pipeline_copy / "pipeline" / "estimate" / "cost.py"
    edited.write_text(edited.read_text() + "\n# edited\n")
    traffic = {s for s in stages if s == "traffic" or s.startswith("traffic-")}
    assert traffic >= {"traffic", "traffic-curves"} and any("@" in s for s in traffic)
    assert _stale(pipeline_copy) == traffic | {"validate"}  # validation runs the same library
    report = pipeline_copy / "pipeline" / "report" / "stage.py"
    report.write_text(report.read_text() + "\n# edited\n")
    assert _stale(pipeline_copy) == traffic | {"validate", "report", "report-models"}
    core = pipeline_copy / "pipeline" / "core" / "format.py"
    core.write_text(core.read_text() + "\n# edited\n")
    assert _stale(pipeline_copy) == set(stages)
