"""params.yaml, per-workload DVC stages and numeric metrics (the experiments themselves: tests/e2e/test_experiments.py).

- One fact, one place: every knob of a shipped workload lives in params.yaml (`workloads.<id>.<knob>`), none is
  also written in the workload file, and a value stated in both is refused.
- dvc.yaml runs one traffic stage per workload (`foreach` over params.yaml's `workloads`), each declaring its own
  knobs (`workloads.<id>`) and file: `dvc exp run -S workloads.<id>.dp=...` reruns that workload's stage (and the
  sharing pair it is in), the combine step and the workload part of the report, nothing else.
- Metrics are numbers, one small flat file per workload × target (metrics/<workload>/<target>.json), so
  `dvc metrics show` prints a narrow table; the words live in the traffic tables.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT
from fabricref.core.paths import Layout
from fabricref.errors import ValidationError
from fabricref.estimate.workloads import KNOBS, find_workload, load_workload, standalone_text
from fabricref.traffic.tables import WORKLOAD_COLUMNS

WORKLOADS = sorted(p.stem for p in (ROOT / "models" / "workloads").glob("*.yaml"))


def _params(root: Path = ROOT) -> dict[str, Any]:
    return yaml.safe_load((root / "params.yaml").read_text())


def _raw_stages() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def test_params_yaml_lists_every_workload_and_nothing_else():
    assert WORKLOADS
    assert sorted(_params()["workloads"]) == WORKLOADS


def test_no_knob_is_written_in_two_places():
    for path in sorted((ROOT / "models" / "workloads").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        block = data[data["kind"]]
        doubled = sorted(set(block) & set(KNOBS[data["kind"]]))
        assert not doubled, f"{path.name} states {doubled}: their home is params.yaml workloads.{path.stem}"
        knobs = _params()["workloads"][path.stem]
        assert knobs, f"params.yaml holds no knobs for {path.stem}"
        assert set(knobs) <= set(KNOBS[data["kind"]]), (
            f"params.yaml workloads.{path.stem}: not knobs of a {data['kind']}"
        )


def test_the_loader_takes_the_knobs_from_params_yaml(no_sources: Layout):
    params = no_sources.root / "params.yaml"
    before = find_workload(no_sources, "llama70b-train-tp8-dp512")
    assert (before.training.dp, before.accelerators) == (512, 8 * 1 * 512)
    params.write_text(params.read_text().replace("    dp: 512\n", "    dp: 256\n", 1))
    after = find_workload(no_sources, "llama70b-train-tp8-dp512")
    assert (after.training.dp, after.accelerators) == (256, 8 * 1 * 256)


def test_a_knob_stated_in_both_places_is_refused(no_sources: Layout):
    path = no_sources.root / "models" / "workloads" / "llama70b-train-tp8-dp512.yaml"
    path.write_text(path.read_text().replace("training:\n", "training:\n  dp: 512\n", 1))
    with pytest.raises(ValidationError, match=r"at \$\.training\.dp: also set in .*params\.yaml:\d+"):
        load_workload(path)


def edit_params(no_sources: Layout, old: str, new: str, marker: str) -> int:
    """params.yaml with `old` replaced by `new` (once), and the line number of `marker` in it."""
    params = no_sources.root / "params.yaml"
    text = params.read_text().replace(old, new, 1)
    params.write_text(text)
    return text.splitlines().index(marker) + 1


def test_an_unknown_knob_in_params_yaml_names_file_line_and_the_knobs(no_sources: Layout):
    line = edit_params(no_sources, "  llama8b-fsdp-dp64:\n", "  llama8b-fsdp-dp64:\n    dpp: 4\n", "    dpp: 4")
    with pytest.raises(ValidationError, match=rf"params.yaml:{line}: at \$\.workloads\.llama8b-fsdp-dp64\.dpp: not a"):
        find_workload(no_sources, "llama8b-fsdp-dp64")


def test_a_workload_params_yaml_misnames_is_refused_with_the_known_ids(no_sources: Layout):
    """A typo in a workload id (e.g. from `dvc exp run -S workloads.<typo>.dp=256`) must not vary nothing silently."""
    line = edit_params(
        no_sources,
        "\nworkloads:\n",
        "\nworkloads:\n  llama70b-train-tp8-dp521:\n    dp: 256\n",
        "  llama70b-train-tp8-dp521:",
    )
    with pytest.raises(
        ValidationError,
        match=rf"params.yaml:{line}: at \$\.workloads\.llama70b-train-tp8-dp521: no file "
        r"models/workloads/llama70b-train-tp8-dp521\.yaml; did you mean llama70b-train-tp8-dp512",
    ):
        find_workload(no_sources, "llama8b-fsdp-dp64")


@pytest.mark.parametrize(
    ("value", "why"),
    [("256.5", "integer"), ("0", "greater than or equal to 1"), ("-256", "greater than or equal to 1")],
)
def test_a_bad_knob_value_is_reported_where_it_is_written(no_sources: Layout, value: str, why: str):
    """The value lives in params.yaml: the error names that file, its line and JSON path, not the workload file."""
    line = edit_params(no_sources, "    dp: 512\n", f"    dp: {value}\n", f"    dp: {value}")
    with pytest.raises(
        ValidationError, match=rf"params.yaml:{line}: at \$\.workloads\.llama70b-train-tp8-dp512\.dp: .*{why}"
    ):
        find_workload(no_sources, "llama70b-train-tp8-dp512")


def test_a_knob_check_across_knobs_names_params_yaml(no_sources: Layout):
    """ep must divide dp × tp: when both come from params.yaml, the error says so (not the workload file alone)."""
    line = edit_params(no_sources, "    ep: 16\n", "    ep: 3\n", "    ep: 3")
    with pytest.raises(ValidationError, match=rf"params.yaml:{line}: at \$\.workloads\.moe-train-ep16\.ep: ep 3 must"):
        find_workload(no_sources, "moe-train-ep16")


def test_a_workload_file_outside_a_checkout_states_its_own_knobs(tmp_path: Path):
    shipped = ROOT / "models" / "workloads" / "llama8b-fsdp-dp64.yaml"
    path = tmp_path / shipped.name
    path.write_text(shipped.read_text())
    with pytest.raises(ValidationError, match=r"at \$\.training\.dp: as `training`: Field required"):
        load_workload(path)  # no params.yaml here: the file alone lacks its knobs
    path.write_text(standalone_text(shipped))
    assert "  dp: 64\n" in path.read_text()
    alone, shipped_w = load_workload(path), load_workload(shipped)
    assert alone.training == shipped_w.training and (alone.training.dp, alone.training.seq_len) == (64, 8192)


def test_one_traffic_stage_per_workload_declares_its_knobs_its_file_and_the_choices_it_reads():
    stages = _raw_stages()
    per_workload = stages["traffic-workload"]
    assert per_workload["foreach"] == "${workloads}"  # every workload params.yaml lists gets its stage
    do = per_workload["do"]
    assert do["cmd"] == "python -m fabricref.traffic workload ${key}"
    assert do["params"] == ["workloads.${key}", "step", "calibration"]
    assert "models/workloads/${key}.yaml" in do["deps"] and "params.yaml" not in do["deps"]
    assert do["outs"] == ["registry/traffic/workloads/${key}"]
    # The metrics (one file per workload and target) are the combining stage's, so a workload stage that fails
    # leaves them as they were (DVC removes a stage's outputs before running it).
    assert "metrics" not in do and stages["traffic"]["metrics"] == [{"metrics": {"cache": False}}]


def test_every_sharing_pair_the_workload_files_declare_has_its_stage():
    """The pairs are the workload files' `shares_with`; each pair's stage declares both workloads' knobs."""
    declared = {}
    for wid in WORKLOADS:
        other = yaml.safe_load((ROOT / "models" / "workloads" / f"{wid}.yaml").read_text()).get("shares_with")
        if other:
            declared[wid] = other
    sharing = _raw_stages()["traffic-sharing"]
    assert declared and sharing["foreach"] == declared
    assert sharing["do"]["params"] == ["workloads.${key}", "workloads.${item}", "calibration"]
    assert {"models/workloads/${key}.yaml", "models/workloads/${item}.yaml"} <= set(sharing["do"]["deps"])


def _numbers_only(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _numbers_only(v, f"{where}.{k}")
    else:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{where} = {value!r}: not a number"


def _metric_files(root: Path, wid: str) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((root / "metrics" / wid).glob("*.json"))}


def test_shipped_metrics_are_flat_numbers_one_file_per_workload_and_target():
    """`dvc metrics show` prints one row per file and one column per key: one file per workload × target, flat
    short keys with their unit, numbers only (no word, no nesting), so the table stays narrow."""
    from fabricref.traffic.stage import METRICS

    allowed = {*METRICS, "util"}
    for wid in WORKLOADS:
        files = _metric_files(ROOT, wid)
        targets = yaml.safe_load((ROOT / "models" / "workloads" / f"{wid}.yaml").read_text())["targets"]
        assert sorted(files) == sorted(targets), wid
        for target, numbers in files.items():
            where = f"metrics/{wid}/{target}.json"
            assert set(numbers) <= allowed, where
            for key, value in numbers.items():
                assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{where}: {key} = {value!r}"
            assert numbers["comm_s"] > 0 and 0 < numbers["util"] <= 1, where
            kind = yaml.safe_load((ROOT / "models" / "workloads" / f"{wid}.yaml").read_text())["kind"]
            assert ("ttft_s" in numbers) == ("tpot_s" in numbers) and (kind == "training") <= ("ttft_s" not in numbers)


@pytest.mark.slow  # one workload on its targets: ~2 CPU s
def test_the_workload_stage_writes_numeric_metrics_beside_its_part_of_the_tables(built_copy: Layout):
    """The workload's stage keeps its metrics in its part; the combining stage writes them out as metrics/ (and
    removes what no workload names), never the workload's stage."""
    from fabricref.traffic import stage, tables

    wid = "llama70b-serve-aggregated"
    stale = built_copy.root / "metrics" / wid / "nvidia-dgx-b300.json"  # a target the workload no longer names
    gone = built_copy.root / "metrics" / "retired-workload" / "nvidia-dgx-h100.json"  # a workload no longer there
    for path in (stale, gone):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    before = _metric_files(built_copy.root, wid)
    stage.run_workload(built_copy, wid)
    assert _metric_files(built_copy.root, wid) == {**before, "nvidia-dgx-b300": {}}  # untouched
    tables.write_metrics(built_copy, [wid])  # what the combining stage does for every workload
    on_disk = _metric_files(built_copy.root, wid)
    w = find_workload(built_copy, wid)
    assert sorted(on_disk) == sorted(w.targets) and not stale.exists() and not gone.parent.exists()
    assert sorted(p.name for p in (built_copy.root / "metrics").iterdir()) == [wid]
    # The words and the full figures are in the table beside the numbers.
    import duckdb

    rows = duckdb.sql(
        "SELECT topology_id, dominant_phase, confidence, caveat, communication_seconds, headroom_bytes "
        "FROM read_parquet(?)",
        params=[str(tables.workload_dir(built_copy, wid) / "traffic_workloads.parquet")],
    ).fetchall()
    assert sorted(r[0] for r in rows) == sorted(w.targets)
    for topology_id, dominant, conf, caveat, seconds, headroom in rows:
        assert dominant and conf and caveat
        assert seconds == pytest.approx(on_disk[topology_id]["comm_s"], rel=1e-8)
        assert headroom / 1e9 == pytest.approx(on_disk[topology_id]["free_gb"], rel=1e-8)


# -- the step estimate's choices (params.yaml `step`) ------------------------------------------------------------


def test_the_step_choices_live_in_params_yaml_and_only_the_workload_stages_declare_them():
    from fabricref.estimate import compute

    step = _params()["step"]
    assert sorted(step) == ["memory_headroom"], "compute throughput is calibration data, not a knob"
    assert 0 <= step["memory_headroom"] < 1
    assert not hasattr(compute, "MFU_ASSUMPTION")
    stages = _raw_stages()
    readers = sorted(name for name, spec in stages.items() if "step" in spec.get("do", spec).get("params", []))
    assert readers == ["traffic-workload", "validate"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("step:\n", "step:\n  mfu: 0.5\n", r"at \$\.step\.mfu: removed: compute throughput is calibration data"),
        ("  memory_headroom: 0.0\n", "  memory_headroom: 1\n", r"at \$\.step\.memory_headroom: 1 is out of range"),
        ("  memory_headroom: 0.0\n", "  memory_headroom: half\n", r"at \$\.step\.memory_headroom: expected a number"),
        ("step:\n", "step:\n  mfuu: 0.4\n", r"at \$\.step\.mfuu: not a choice of the step estimate"),
        ("  memory_headroom: 0.0\n", "", r"at \$\.step: memory_headroom is missing"),
    ],
)
def test_a_bad_step_choice_names_params_yaml_line_and_path(no_sources: Layout, old: str, new: str, expected: str):
    from fabricref.estimate.choices import load_step_choices

    params = no_sources.root / "params.yaml"
    text = params.read_text()
    assert old in text
    params.write_text(text.replace(old, new, 1))
    with pytest.raises(ValidationError, match=rf"params\.yaml:\d+: {expected}"):
        load_step_choices(no_sources.root)


@pytest.mark.slow
def test_memory_headroom_moves_the_metrics_by_the_hand_computed_amount(built_copy: Layout):
    """Keeping 10 % of memory free lowers the fit headroom by 10 % of the accelerator memory (8.0 GB on an 80 GB
    H100) and nothing else: compute and communication do not move.

    On the smaller of the workload's two 80 GB H100 targets: the step choices apply to every target alike (the
    same step model), and both targets, computed before and after, cost ~4 CPU s instead of ~1."""
    from fabricref.estimate.traffic import Views
    from fabricref.traffic import stage

    wid, target = "llama70b-train-tp8-dp512", "illustrative-h100-4096"

    def result() -> tuple[dict[str, list[tuple]], dict[str, dict[str, Any]]]:
        """stage.workload_result (the workload read afresh, params.yaml included) on the one target."""
        w = find_workload(built_copy, wid)
        assert target in w.targets
        views = Views(built_copy)
        try:
            return stage.workload_tables(dataclasses.replace(w, targets=(target,)), views)
        finally:
            views.close()

    before = result()[1]
    params = built_copy.root / "params.yaml"
    text = params.read_text()
    params.write_text(text.replace("memory_headroom: 0.0", "memory_headroom: 0.1"))
    tables, after = result()
    assert list(before) == list(after) == [target]
    before, after = before[target], after[target]
    assert after["free_gb"] == pytest.approx(before["free_gb"] - 0.1 * 80, abs=1e-6)  # an 80 GB H100
    assert after["compute_s"] == before["compute_s"]
    assert after["comm_s"] == before["comm_s"]  # the network does not move
    columns = [c for c, _ in WORKLOAD_COLUMNS]
    (row,) = [r for r in tables["traffic_workloads"] if r[0] == target]
    said = json.loads(row[columns.index("step_assumptions")])
    assert (
        "the fit keeps 10 % of accelerator memory free (params.yaml step.memory_headroom): 72.0 GB of 80.0 GB usable"
        in said
    )
    assert any(a.startswith("calibration: kernels.gemm_sustained_fraction") for a in said)


def test_an_mfu_given_on_the_command_line_is_labelled_as_given(cli, built_registry: Layout):
    """On one 8-GPU server (a serving workload it is a target of): the option is read the same for any workload
    and target, and a 4,096-GPU training estimate cost ~0.5 CPU s per run (test_memory_step runs that one)."""
    args = ("estimate", "step", "nvidia-dgx-h100", "llama70b-serve-aggregated", "--json")
    shipped = json.loads(cli(*args, root=built_registry.root).out)
    given = json.loads(cli(*args, "--mfu", "0.25", root=built_registry.root).out)
    assert "what_if" not in shipped and not any("--mfu" in c for c in shipped["calibration"])
    assert given["what_if"].startswith("what-if (--mfu 0.25, given by the user)")
    assert any(c.startswith("--mfu = 0.25 [what-if]") for c in given["calibration"])
    assert given["ttft_seconds"] > shipped["ttft_seconds"]


# -- the calibration's assumed numbers (params.yaml `calibration`) -----------------------------------------------


def _calibration_leaves(node: Any, parts: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(node, dict):
        return [leaf for k, v in node.items() for leaf in _calibration_leaves(v, (*parts, k))]
    return [(parts, node)]


def test_each_calibration_param_is_an_assumed_number_the_file_holds_without_a_value():
    """One fact, one place: params.yaml sets the value, the calibration file keeps its status (assumed) and note;
    read in a checkout or written out standalone, the calibration is the same."""
    from fabricref.estimate.calibration import CALIBRATION_PATH, load_calibration, standalone_text

    leaves = _calibration_leaves(_params()["calibration"])
    assert leaves
    raw = yaml.safe_load((ROOT / CALIBRATION_PATH).read_text())
    cal = load_calibration(ROOT)
    for parts, value in leaves:
        node = raw
        for part in parts:
            node = node[part]
        assert node["status"] == "assumed" and node["note"] and "value" not in node, parts
        assert cal.number(".".join(parts)).value == value, parts
    assert yaml.safe_load(standalone_text(ROOT / CALIBRATION_PATH))["pipeline"]["chunk_bytes"]["value"] == 524288
    stages = _raw_stages()
    readers = sorted(n for n, spec in stages.items() if "calibration" in spec.get("do", spec).get("params", []))
    assert readers == sorted(n for n, spec in stages.items() if "models/calibration" in spec.get("do", spec)["deps"])
    assert readers == ["traffic-curves", "traffic-sharing", "traffic-workload", "validate"]


# nvlink5's efficiency in the calibration file: its status and note, no value (params.yaml sets it).
NVLINK5_EFFICIENCY = "    matches: ['5th generation NVLink', 'fifth generation NVLink', 'NVLink ?5']\n    efficiency:\n"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (  # set in both places: named in the calibration file, with the params.yaml line
            ("models/calibration/collectives.yaml", NVLINK5_EFFICIENCY, NVLINK5_EFFICIENCY + "      value: 0.822\n"),
            r"collectives\.yaml:\d+: at \$\.link_classes\.nvlink5\.efficiency\.value: also set in .*params\.yaml:\d+ "
            r"\(calibration\.link_classes\.nvlink5\.efficiency\); a value lives in one place",
        ),
        (  # a number with a source stays beside it
            ("params.yaml", "    infinity-fabric:\n", "    infiniband:\n      efficiency: 0.9\n    infinity-fabric:\n"),
            r"params\.yaml:\d+: at \$\.calibration\.link_classes\.infiniband\.efficiency: the number is `published`",
        ),
        (  # a path the file does not hold
            ("params.yaml", "    infinity-fabric:\n", "    nvlink9:\n      efficiency: 0.9\n    infinity-fabric:\n"),
            r"params\.yaml:\d+: at \$\.calibration\.link_classes\.nvlink9\.efficiency: .* holds no number",
        ),
        (  # an efficiency is a fraction of line rate
            ("params.yaml", "      efficiency: 0.7\n", "      efficiency: 1.5\n"),
            r"params\.yaml:\d+: at \$\.calibration\.link_classes\.infinity-fabric\.efficiency: an efficiency is a "
            r"fraction of line rate in \(0, 1\], got 1\.5",
        ),
    ],
)
def test_a_bad_calibration_param_is_refused_where_it_is_written(no_sources: Layout, edit, expected):
    from fabricref.estimate.calibration import load_calibration

    name, old, new = edit
    path = no_sources.root / name
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ValidationError, match=expected):
        load_calibration(no_sources.root)


@pytest.mark.slow  # the workload on all its targets twice, two estimates of the 72-GPU rack
def test_a_calibration_param_moves_the_cost_by_the_hand_computed_amount(built_copy: Layout):
    """NVLink 5 efficiency 0.822 → 0.7: the KV transfer of llama70b-serve-disaggregated inside the GB200 NVL72 rack
    moves 1,342,177,280 B per rank (2 × 80 layers × 8 KV heads × 128 × 2 B × 32,768 tokens ÷ TP 8) over NVLink 5
    (900 GB/s per direction): its bandwidth term goes from B ÷ (900e9 × 0.822) = 1.814 ms to B ÷ (900e9 × 0.7) =
    2.130 ms, and TTFT and the communication total by at least the difference."""
    from fabricref.estimate import traffic as estimate_traffic
    from fabricref.traffic import stage

    wid, target = "llama70b-serve-disaggregated", "nvidia-gb200-nvl72"
    kv = 2 * 80 * 8 * 128 * 2 * 32768 / 8
    assert kv == 1_342_177_280

    def kv_phase():
        r = estimate_traffic.estimate(built_copy, target, find_workload(built_copy, wid))
        return next(p for p in r.phases if p.phase == "kv-transfer")

    before_phase, before = kv_phase(), stage.workload_result(built_copy, wid)[1][target]
    assert before_phase.bandwidth_s == pytest.approx(kv / (900e9 * 0.822), rel=1e-9)
    params = built_copy.root / "params.yaml"
    text = params.read_text()
    params.write_text(text.replace("      efficiency: 0.822        #", "      efficiency: 0.7          #", 1))
    after_phase, after = kv_phase(), stage.workload_result(built_copy, wid)[1][target]
    assert after_phase.bandwidth_s == pytest.approx(kv / (900e9 * 0.7), rel=1e-9)
    moved = kv / (900e9 * 0.7) - kv / (900e9 * 0.822)
    assert moved == pytest.approx(0.0003162, abs=1e-7)
    # (the metrics keep 9 significant digits: seconds of about 2 to the nearest 1e-8)
    assert after["ttft_s"] - before["ttft_s"] >= moved - 3e-8
    assert after["comm_s"] - before["comm_s"] >= moved - 3e-8
    assert after_phase.latency_s == before_phase.latency_s


# -- the topology's teaching defaults (params.yaml `topology`) ---------------------------------------------------


def test_the_topology_defaults_live_in_params_yaml_only_and_only_the_topology_stage_reads_them():
    from fabricref.topology.facts import KNOBS, defaults

    block = _params()["topology"]
    assert {g: sorted(v) for g, v in block.items()} == {g: sorted(v) for g, v in KNOBS.items()}
    raw = yaml.safe_load((ROOT / "models" / "topology" / "defaults.yaml").read_text())
    assert "latency_ns" not in raw and "bandwidth" not in raw["host_link"] and raw["host_link"]["unit"] == "GB/s"
    d = defaults(Layout(ROOT))
    assert d.latency_ns == block["latency_ns"] and d.host_gbps == block["host_link"]["bandwidth"] * 8  # GB/s → Gb/s
    stages = _raw_stages()
    assert sorted(n for n, spec in stages.items() if "topology" in spec.get("do", spec).get("params", [])) == [
        "topology"
    ]


@pytest.mark.parametrize(
    ("name", "old", "new", "expected"),
    [
        (
            "models/topology/defaults.yaml",
            "host_link:\n",
            "latency_ns:\n  scale_up: 300\nhost_link:\n",
            r"defaults\.yaml:\d+: at \$\.latency_ns\.scale_up: also set in .*params\.yaml:\d+ "
            r"\(topology\.latency_ns\.scale_up\); a value lives in one place",
        ),
        (
            "params.yaml",
            "    scale_up: 300 ",
            "    scaleup: 300 ",
            r"params\.yaml:\d+: at \$\.topology\.latency_ns\.scaleup: not a topology default; expected one of scale_up",
        ),
        (
            "params.yaml",
            "    bandwidth: 64 ",
            "    bandwidth: fast ",
            r"params\.yaml:\d+: at \$\.topology\.host_link\.bandwidth: expected a number, got 'fast'",
        ),
    ],
)
def test_a_bad_topology_default_is_refused_where_it_is_written(no_sources: Layout, name, old, new, expected):
    from fabricref.topology.facts import defaults

    path = no_sources.root / name
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ValidationError, match=expected):
        defaults(no_sources)


def test_a_topology_default_moves_the_graph_by_the_hand_computed_amount(built_copy: Layout):
    """topology.latency_ns.scale_up 300 → 450: every scale-up edge of the DGX H100 says 450 ns, nothing else moves."""
    from fabricref.topology.stage import build

    before = build(built_copy, "nvidia-dgx-h100")
    params = built_copy.root / "params.yaml"
    params.write_text(params.read_text().replace("    scale_up: 300 ", "    scale_up: 450 ", 1))
    after = build(built_copy, "nvidia-dgx-h100")
    scale_up = [(a, b) for a, b, d in before.edges(data=True) if d["network"] == "scale_up"]
    assert scale_up
    for a, b in scale_up:
        assert (before.edges[a, b]["latency_ns"], after.edges[a, b]["latency_ns"]) == (300, 450)
    for a, b, d in before.edges(data=True):
        if d["network"] != "scale_up":
            assert after.edges[a, b] == d


@pytest.mark.parametrize(
    ("text", "knob", "built", "now"),
    [
        ("scale_out: 600 ", "topology.latency_ns.scale_out", "600 ns", "60000 ns"),
        ("bandwidth: 64 ", "topology.host_link.bandwidth", "512 Gb/s per direction", "1024 Gb/s per direction"),
    ],
)
def test_a_topology_knob_changed_since_the_wiring_was_built_is_said_by_every_estimate_and_status(
    built_copy, cli, text, knob, built, now
):
    """`topology.latency_ns.scale_out: 60000` in params.yaml left every estimate at the old latency, silently:
    the estimates read the built wiring. Each says so on stderr, and status needs attention, until `dvc repro`."""
    root = built_copy.root
    assert cli("status", root=root).code == 0
    params = root / "params.yaml"
    old = params.read_text(encoding="utf-8")
    assert text in old
    value = now.split()[0]
    params.write_text(old.replace(text, f"{text.split(':')[0]}: {int(value) // 8 if 'Gb/s' in now else value} ", 1))
    said = f"{knob}: registry/topology/ was built with {built}, params.yaml now gives {now}"
    for args in (
        ("estimate", "workload", "illustrative-h100-64", "llama8b-fsdp-dp64"),
        ("estimate", "step", "illustrative-h100-64", "llama8b-fsdp-dp64"),
        ("estimate", "collective", "--op", "all-reduce", "--ranks", "8", "--bytes", "1GB",
         "--topology", "nvidia-dgx-h100"),
    ):  # fmt: skip
        done = cli(*args, root=root)
        assert done.code == 0 and f"warning: {said}" in done.err, (args, done.err)
    status = cli("status", root=root)
    assert status.code == 1 and said in status.said, status.said[-600:]
    params.write_text(old, encoding="utf-8")  # back as built: nothing to say
    assert cli("status", root=root).code == 0
    assert "warning" not in cli("estimate", "workload", "illustrative-h100-64", "llama8b-fsdp-dp64", root=root).err
