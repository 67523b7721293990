"""What the whole `dvc repro` wrote, read back as a user reads it (conftest.built_pipeline, the session's one
built clone): the traffic tables through `fabricref query` and `fabricref audit`, the report's heat maps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
from fabricref.views import loads

pytestmark = pytest.mark.slow

HELIOS_CLUSTER = "amd-helios-vulcano800-2tier-1152"


def test_traffic_results_are_auditable(built_pipeline, cli):
    """The traffic stage's output as `dvc repro` wrote it (the whole stage: every workload on every target)."""
    result = cli(
        "audit",
        "traffic:nvidia-gb200-nvl72:llama70b-serve-disaggregated",
        "kv-transfer",
        "--json",
        root=built_pipeline,
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["confidence"] == "assumed" and data["terms"]["dominant"] == "bandwidth"
    leaf = next(x for x in data["inputs"] if x["reference_id"] == "nvidia-gb200-nvl72")
    assert leaf["field"] == "scale_up.bandwidth_per_accelerator" and all(p["verified"] for p in leaf["provenance"])
    calibration = {x["field"]: x for x in data["inputs"] if x["reference_id"] == "calibration"}
    assert calibration["link_classes.nvlink5.efficiency"]["status"] == "assumed"
    ring = calibration["algorithms.ring.base_latency_us.Simple"]
    assert ring["value"] == 8.4 and ring["source_url"].startswith("https://github.com/NVIDIA/nccl/")


def test_traffic_table_shows_the_fit_beside_each_workload(cli, built_pipeline) -> None:
    """The traffic table as `dvc repro` wrote it (conftest.built_pipeline)."""
    result = cli(
        "query", "--format", "json",
        "SELECT workload_id, topology_id, memory_per_rank_bytes, fits, headroom_bytes, step_missing, sizing "
        "FROM traffic_workloads ORDER BY 1, 2",
        root=built_pipeline,
    )  # fmt: skip
    rows = {(r["workload_id"], r["topology_id"]): r for r in json.loads(result.out)}
    # The shipped examples are layouts a planner would run: each fits on each of its targets (ZeRO, PP or
    # recompute chosen as real jobs do), unless its file labels it a teaching example.
    teaching = {
        p.stem for p in (built_pipeline / "models" / "workloads").glob("*.yaml") if "teaching:" in p.read_text()
    }
    for (wid, target), r in rows.items():
        if wid not in teaching and r["fits"] != "unknown":
            assert r["fits"] == "true" and r["headroom_bytes"] >= 0, (wid, target, r)
    # ZeRO-1 over 512 replicas: 70B of BF16 weights and gradients over TP 8, the FP32 optimizer state sharded.
    dense = rows[("llama70b-train-tp8-dp512", "illustrative-h100-4096")]
    assert 40e9 < dense["memory_per_rank_bytes"] < 80e9
    # A rank's memory is stated once, by the fit: the workload's sizing states the whole model's, no second
    # per-rank figure that ZeRO, EP or the pipeline stage would contradict.
    for key, r in rows.items():
        sizing = json.loads(r["sizing"])
        assert sizing.get("training_state_bytes", sizing.get("weights_bytes", 0)) > 0, (key, sizing)
        assert not [k for k in sizing if "per_rank" in k], (key, sizing)


def test_a_links_bytes_per_step_are_its_phases_bytes_times_their_counts(cli, built_pipeline) -> None:
    """`traffic_link_steps`, the view the heat maps and the plots read, by hand for one workload's scale-out edge:
    the sum over its phases of each phase's bytes on it times the phase's count."""

    def rows(sql: str) -> list[dict]:
        result = cli("query", "--format", "json", sql, root=built_pipeline)
        assert result.code == 0, result.err
        return json.loads(result.out)

    (edge,) = rows(
        "SELECT * FROM traffic_link_steps WHERE workload_id = 'llama70b-train-tp8-dp512' "
        "AND topology_id = 'illustrative-h100-4096' AND network = 'scale_out' ORDER BY bytes_forward DESC, source, "
        "target LIMIT 1"
    )
    phases = rows(
        "SELECT phase, bytes_forward, bytes_reverse FROM traffic_links WHERE workload_id = 'llama70b-train-tp8-dp512' "
        f"AND topology_id = 'illustrative-h100-4096' AND source = '{edge['source']}' AND target = '{edge['target']}'"
    )
    counts = {
        r["phase"]: r["count"]
        for r in rows(
            "SELECT phase, count FROM traffic WHERE workload_id = 'llama70b-train-tp8-dp512' "
            "AND topology_id = 'illustrative-h100-4096'"
        )
    }
    assert phases and edge["bytes_forward"] > 0
    assert edge["bytes_forward"] == pytest.approx(sum(p["bytes_forward"] * counts[p["phase"]] for p in phases))
    assert edge["bytes_reverse"] == pytest.approx(sum(p["bytes_reverse"] * counts[p["phase"]] for p in phases))


def test_a_traffic_figure_on_the_helios_fabric_audits_to_the_switch_source(built_pipeline, cli):
    # llama70b-train-tp8-pp4-dp32's pipeline sends cross racks: over Vulcano NICs and Tomahawk 6 trunks.
    result = cli(
        "audit",
        f"traffic:{HELIOS_CLUSTER}:llama70b-train-tp8-pp4-dp32",
        "pp-send",
        "--json",
        root=built_pipeline,
    )
    assert result.code == 0, result.err
    inputs = {(x["reference_id"], x["field"]): x for x in json.loads(result.out)["inputs"]}
    switch = inputs[("broadcom-tomahawk-6", "switch.port_speed")]
    assert [p["source_id"] for p in switch["provenance"]] == ["servethehome-broadcom-tomahawk6-launch"]
    assert ("amd-helios", "scale_out.nic.speed") in inputs


def test_every_topology_with_traffic_has_a_heat_map_drawn_as_the_explorer_draws_it(built_pipeline: Path):
    """Each loaded link coloured by its share of the busiest drawn link's busy time (never utilisation, which fair
    sharing saturates on every bottleneck): the hottest link in the top colour, drawn last, idle links grey."""
    links = built_pipeline / "registry" / "traffic" / "traffic_links.parquet"
    sql = f"SELECT DISTINCT topology_id, workload_id FROM read_parquet('{links}') ORDER BY 1, 2"
    pairs = duckdb.sql(sql).fetchall()
    assert pairs
    report = built_pipeline / "registry" / "report"
    topologies = set()
    for tid, wid in pairs:
        svg = (report / "load" / tid / f"{wid}.svg").read_text()
        loaded = re.findall(r'<line [^>]*class="link net-\w+ loaded"[^>]*stroke="(rgb\([^"]+\))"', svg)
        assert loaded and loaded[-1] == loads.colour(1.0), (tid, wid)
        assert f'data-topology="{tid}"' in svg
        page = (report / "workload" / f"{wid}.html").read_text()
        assert f"../load/{tid}/{wid}.svg" in page and "not utilisation" in page
        topologies.add(tid)
    assert {p[0] for p in pairs} == topologies


def test_a_heat_map_colours_the_drawing_its_topology_page_shows(built_pipeline: Path):
    """The report's workload part draws no topology of its own: each drawings/ID.json, read back, renders the very
    picture beside it, and every heat map of that topology draws the same links."""
    from fabricref.core.paths import Layout
    from fabricref.report.drawn import Drawings
    from fabricref.report.stage import _env

    folder = built_pipeline / "registry" / "report" / "drawings"
    ids = sorted(json.loads((built_pipeline / "registry" / "topology" / "summaries.json").read_text()))
    drawings = Drawings(folder, Layout(built_pipeline), ids, _env())
    assert ids == sorted(p.stem for p in folder.glob("*.svg")) and "meta-style-h100-24576" in ids
    ids = re.compile(r'<line [^>]*data-id="([^"]+)"')
    for tid in drawings.ids:
        picture = (folder / f"{tid}.svg").read_bytes()
        assert drawings.svg(tid) == picture, tid
        for heat_map in sorted((built_pipeline / "registry" / "report" / "load" / tid).glob("*.svg")):
            # (in another order: a heat map draws its loaded links last, the hottest on top)
            assert sorted(ids.findall(heat_map.read_text())) == sorted(ids.findall(picture.decode())), heat_map


def test_a_refused_drawing_leaves_the_last_report_whole(pipeline_copy: Path):
    """The workloads part reads and checks every drawing before it clears what it wrote last time: a damaged one
    is refused by name, and the pages and heat maps of the last run stay as they were."""
    from fabricref.core.paths import Layout
    from fabricref.errors import FabricrefError
    from fabricref.report import stage

    report = pipeline_copy / "registry" / "report"
    before = {p.relative_to(report): p.read_bytes() for p in sorted(report.rglob("*")) if p.is_file()}
    drawing = report / "drawings" / "nvidia-dgx-h100.json"
    damaged = drawing.read_text().replace('"gbps":', '"gbps":-', 1)
    drawing.write_text(damaged)
    with pytest.raises(FabricrefError, match=r"drawings/nvidia-dgx-h100\.json.*gbps.*report-models"):
        stage.run(Layout(pipeline_copy), ("workloads",))
    after = {p.relative_to(report): p.read_bytes() for p in sorted(report.rglob("*")) if p.is_file()}
    before[drawing.relative_to(report)] = damaged.encode()
    assert after == before
