"""Traffic: hand-computed costs, TP-beyond-domain errors, local vs cross-domain KV, failures, lineage."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fabricref.errors import UsageError, ValidationError
from fabricref.estimate import collectives, sizing
from fabricref.estimate.calibration import load_calibration
from fabricref.estimate.traffic import estimate as stage_estimate
from fabricref.estimate.traffic import sharing
from fabricref.estimate.view import View, view_for
from fabricref.estimate.workloads import find_workload, load_workload
from fabricref.topology import stage as topology

GIB = 2**30
CAL = load_calibration(Path(__file__).resolve().parents[2])
# Each topology built once for this module (as the traffic stage does per run), not once per estimate: the
# 24,576-GPU cluster takes seconds to build. Workloads are laid onto a view without changing it.
_VIEWS: dict[tuple[str, str], View] = {}


@pytest.fixture(scope="module", autouse=True)
def _forget_views():
    yield
    _VIEWS.clear()


def estimate(lay, topology_id: str, workload, offset: int = 0):
    """stage.estimate on this module's one view of the topology."""
    key = (str(lay.root), topology_id)
    if key not in _VIEWS:
        _VIEWS[key] = view_for(lay, topology_id)
    return stage_estimate(lay, topology_id, workload, offset, _VIEWS[key])


@pytest.mark.parametrize(
    ("op", "n", "factor", "steps"),
    [
        ("all-reduce", 8, 2 * 7 / 8, 14),
        ("reduce-scatter", 8, 7 / 8, 7),
        ("all-gather", 8, 7 / 8, 7),
        ("all-to-all", 8, 7 / 8, 7),
        ("broadcast", 8, 1.0, 7),
        ("send", 2, 1.0, 1),
    ],
)
def test_alpha_beta_costs(op, n, factor, steps):
    est = collectives.parametric(op, n, GIB, 50e9, 5e-6)  # 400 Gb/s = 50 GB/s per direction
    assert est.bytes_on_wire_per_rank == pytest.approx(factor * GIB)
    assert est.bandwidth_seconds == pytest.approx(factor * GIB / 50e9)
    assert est.latency_seconds == pytest.approx(steps * 5e-6)
    assert est.dominant == "bandwidth"


def test_small_messages_are_latency_bound_and_tree_has_log_steps():
    est = collectives.parametric("all-reduce", 1024, 4096, 50e9, 5e-6)
    assert est.dominant == "latency" and est.steps == 2 * 1023
    tree = collectives.parametric("all-reduce", 1024, 4096, 50e9, 5e-6, algorithm="tree")
    assert tree.steps == 2 * 10 and tree.latency_seconds < est.latency_seconds


def test_efficiency_is_explicit_and_bad_inputs_fail():
    assert collectives.parametric("send", 2, 1e9, 1e9, 0, efficiency=0.5).bandwidth_seconds == pytest.approx(2.0)
    for kwargs in ({"op": "gather"}, {"size": -1}, {"bytes_per_s": 0}):
        args = {"op": "all-reduce", "ranks": 8, "size": 1.0, "bytes_per_s": 1.0, "latency_s": 0.0, **kwargs}
        with pytest.raises(UsageError):
            collectives.parametric(**args)


def test_sizing_arithmetic():
    assert sizing.memory(70e9, "mixed-adam")["bytes"] == pytest.approx(1.26e12)  # 18 B/param
    assert sizing.memory(70e9, "bf16-weights")["bytes"] == pytest.approx(140e9)
    kv = sizing.kv_cache(80, 8, 128, "bf16", 32768)
    assert kv["bytes_per_token"] == 2 * 80 * 8 * 128 * 2 == 327_680  # KV heads, not query heads
    cap = sizing.capacity(100, 200, 1000, 8)
    assert (cap.demand_tokens_per_second, cap.groups, cap.accelerators) == (20_000, 20, 160)
    assert sizing.capacity(100, 200, 1000, 8, headroom=0.25).groups == 25


def _workload(tmp_path, text):
    path = tmp_path / "w.yaml"
    path.write_text(text.replace("ID", "w"))
    return load_workload(path)


BIG_TP = """\
id: ID
title: too much tensor parallelism
kind: inference
model: {params: 70.0e9, layers: 80, hidden: 8192, kv_heads: 8, head_dim: 128, dtype: bf16}
inference: {mode: aggregated, tp: 16, prompt_tokens: 1024, output_tokens: 10}
targets: [nvidia-dgx-h100]
"""


def test_tp_beyond_the_domain_is_an_error_that_says_so(built_registry, tmp_path):
    with pytest.raises(UsageError) as err:
        estimate(built_registry, "illustrative-h100-4096", _workload(tmp_path, BIG_TP))
    text = str(err.value)
    assert "tensor parallel degree 16" in text and "nvidia-dgx-h100" in text and "(8 accelerators)" in text
    # The same TP 16 fits inside one 72-GPU NVL72 domain.
    r = estimate(built_registry, "nvidia-gb200-nvl72", _workload(tmp_path, BIG_TP))
    assert r.revealing["fits_in_one_domain"]
    # On a lone 8-GPU server the scale-up rule is what is said, not only that the server is too small.
    with pytest.raises(UsageError, match=r"tensor parallel degree 16 exceeds the scale-up domain of nvidia-dgx-h100"):
        estimate(built_registry, "nvidia-dgx-h100", _workload(tmp_path, BIG_TP))


def test_kv_transfer_is_local_in_nvl72_and_crosses_the_fabric_between_8_gpu_servers(built_registry):
    w = find_workload(built_registry, "llama70b-serve-disaggregated")
    per_rank = 327_680 * 32_768 / 8
    local = next(p for p in estimate(built_registry, "nvidia-gb200-nvl72", w).phases if p.phase == "kv-transfer")
    assert local.network == "scale_up" and local.bytes_per_rank == per_rank
    # 1.8 TB/s bidirectional = 900 GB/s per direction, at the calibrated NVLink 5 efficiency (Simple protocol).
    nvlink5, ib = CAL.link_classes["nvlink5"].efficiency.value, CAL.link_classes["infiniband"].efficiency.value
    assert local.bandwidth_s == pytest.approx(per_rank / (900e9 * nvlink5))
    assert local.algorithm == "point-to-point / Simple"  # a send, not a ring (the ring's step latency times it)
    remote = next(p for p in estimate(built_registry, "illustrative-h100-4096", w).phases if p.phase == "kv-transfer")
    assert remote.network == "scale_out" and remote.bottleneck_gbps == 400
    assert remote.bandwidth_s == pytest.approx(per_rank / (50e9 * ib))  # 400 Gb/s = 50 GB/s per direction
    assert remote.bandwidth_s / local.bandwidth_s == pytest.approx(18 * nvlink5 / ib)
    assert remote.algorithm == "point-to-point / Simple"
    # One network each: the local send's bytes enter NVLink, the remote one's the NIC (per sending rank).
    assert local.bytes_on_wire_by_network == {"scale_up": pytest.approx(per_rank)}
    assert remote.bytes_on_wire_by_network == {"scale_out": pytest.approx(per_rank)}


@pytest.mark.slow
def test_oversubscription_queues_only_where_links_are_oversubscribed(built_registry):
    """Meta-style: only 2 of each DP ring's 512 edges cross pods (16 flows against ~175 Tb/s of pod uplinks),
    so the 1:7 tier adds no queueing; the phase runs at the NIC's 400 Gb/s at its link class's calibrated
    efficiency (RoCE there, InfiniBand on the non-blocking cluster), as the non-blocking cluster does."""
    w = find_workload(built_registry, "llama70b-train-tp8-dp512")
    meta = next(p for p in estimate(built_registry, "meta-style-h100-24576", w).phases if p.phase == "dp-all-reduce")
    flat = next(p for p in estimate(built_registry, "illustrative-h100-4096", w).phases if p.phase == "dp-all-reduce")
    for p, link_class in ((meta, "roce-ethernet"), (flat, "infiniband")):
        eff = CAL.link_classes[link_class].efficiency.value
        assert p.queueing_s == 0 and p.effective_gbps == pytest.approx(400 * eff) and p.dominant == "bandwidth"
        # DP gradients: 70e9 / TP 8 × 2 bytes per rank, ring all-reduce over 512 ranks at 50 GB/s × efficiency.
        assert p.bytes_per_rank == pytest.approx(70e9 / 8 * 2)
        assert p.bandwidth_s == pytest.approx(2 * 511 / 512 * 70e9 / 8 * 2 / (50e9 * eff))
        assert p.algorithm == "ring / Simple"
    assert meta.tier == "spine-core (across pods)" and meta.max_link_utilization == pytest.approx(1.0)
    # By hand: per direction, the 8 rails' flows leave one leaf split over 16 spines (400 × 8 / 16 = 200 Gb/s per
    # spine) onto spine–core trunks of 400 × 192 / 7 Gb/s.
    uplinks = [x for x in meta.links if x["tier"] == "spine-core"]
    assert max(x["utilization"] for x in uplinks) == pytest.approx(200 / (400 * 192 / 7))


def test_hierarchical_collectives_when_a_group_spans_domains_with_several_ranks_each(built_registry):
    w = find_workload(built_registry, "llama8b-fsdp-dp64")
    r = estimate(built_registry, "illustrative-h100-4096", w)
    rs = next(p for p in r.phases if p.phase == "dp-reduce-scatter")
    assert "hierarchical" in rs.algorithm and rs.network == "scale_up+scale_out"
    # FSDP moves ≈1.5× the data-parallel all-reduce volume: RS once + AG twice vs AR once.
    sharded = sum(p.bytes_on_wire_per_rank * p.count for p in r.phases)
    flat_ar = collectives.wire_factor("all-reduce", 64) * 8e9 * 2
    assert sharded / flat_ar == pytest.approx(1.5, rel=0.05)


def test_choosing_a_workload_changes_traffic_not_wiring(built_registry):
    before = topology.build(built_registry, "illustrative-h100-4096")
    estimate(built_registry, "illustrative-h100-4096", find_workload(built_registry, "moe-train-ep16"))
    after = topology.build(built_registry, "illustrative-h100-4096")
    assert before.number_of_edges() == after.number_of_edges()
    assert sorted(before.edges(data="bandwidth_gbps")) == sorted(after.edges(data="bandwidth_gbps"))


def test_failure_scenario_states_route_and_bandwidth_and_what_is_not_established(built_registry):
    """On the 4,096-GPU cluster, whose view the other tests here lay workloads on too (no 24,576-GPU view built
    for the fast tier): a rail leaf's uplink to a spine is a trunk of two 400 Gb/s links."""
    r = estimate(built_registry, "illustrative-h100-4096", find_workload(built_registry, "llama70b-train-tp8-dp512"))
    nic = next(f for f in r.failures if f["failure"].startswith("backend NIC"))
    assert nic["route_survives"] and nic["bandwidth_after_gbps"] == nic["bandwidth_before_gbps"] / 2
    up = next(f for f in r.failures if f["failure"].startswith("uplink"))
    assert up["bandwidth_after_gbps"] == up["bandwidth_before_gbps"] - 2 * 400
    assert all(
        "session continuity, failover time and workload throughput are not established" in f["not_established"]
        for f in r.failures
    )


def test_lineage_and_confidence(built_registry):
    gb200 = estimate(built_registry, "nvidia-gb200-nvl72", find_workload(built_registry, "moe-train-ep16"))
    # No NVLink 5 busbw statement has been read: the calibrated efficiency is assumed, and so is every phase on it.
    assert gb200.confidence == "assumed"
    tp = next(p for p in gb200.phases if p.phase == "tp-all-reduce")
    assert any(x.field == "link_classes.nvlink5.efficiency" and x.status == "assumed" for x in tp.lineage)
    dgx = estimate(built_registry, "nvidia-dgx-h100", find_workload(built_registry, "llama70b-serve-aggregated"))
    prefill = next(p for p in dgx.phases if p.phase == "prefill-tp-all-reduce")
    assert prefill.algorithm == "nvls / Simple" and prefill.confidence == "published"
    amd = estimate(built_registry, "amd-mi300x-pollara400", find_workload(built_registry, "llama70b-serve-aggregated"))
    tp = next(p for p in amd.phases if p.phase == "decode-tp-all-reduce")
    assert tp.confidence == "assumed"  # rests on the labelled Infinity Fabric per-link assumption
    assert any(x.field == "scale_up.bandwidth_per_link" and x.status == "assumed" for x in tp.lineage)


def test_the_revealing_question(built_registry):
    agg = estimate(built_registry, "nvidia-dgx-h100", find_workload(built_registry, "llama70b-serve-aggregated"))
    assert agg.revealing == {
        "accelerators_per_progress": 8,
        "for": "one request (its TP group)",
        "scale_up_domain_size": 8,
        "domains_spanned": 1,
        "fits_in_one_domain": True,
    }
    dis = estimate(
        built_registry, "illustrative-h100-4096", find_workload(built_registry, "llama70b-serve-disaggregated")
    )
    assert dis.revealing["accelerators_per_progress"] == 16 and not dis.revealing["fits_in_one_domain"]


def test_sharing_shows_whether_serving_is_protected(built_registry):
    train = find_workload(built_registry, "llama70b-train-tp8-pp4-dp32")
    serve = find_workload(built_registry, "llama70b-serve-disaggregated")
    _, _, rows = sharing(built_registry, "illustrative-h100-4096", train, serve)
    by_phase = {(r[1], r[3]): r for r in rows}
    # Training holds servers 0–127 (rail leaves of groups 0–3); the service sits on servers 128–129, whose KV
    # transfer stays under one rail leaf of group 4: no physical link is shared, so nothing is added.
    kv = by_phase[("llama70b-serve-disaggregated", "kv-transfer")]
    assert kv[7] is True and kv[6] == 0 and "no physical link shared" in kv[8]
    assert all(r[6] == 0 for r in rows)
    assert by_phase[("llama70b-serve-disaggregated", "frontend-request")][7] is True  # separate frontend network


def test_cli_estimate_commands(cli, built_registry):
    result = cli(
        "estimate",
        "collective",
        "--op",
        "all-reduce",
        "--ranks",
        "8",
        "--bytes",
        "1GiB",
        "--bandwidth",
        "400Gb/s",
        "--latency",
        "5us",
        "--json",
    )
    data = json.loads(result.out)
    assert {
        "seconds",
        "latency_seconds",
        "bandwidth_seconds",
        "queueing_seconds",
        "bytes_on_wire_per_rank",
        "algorithm",
        "dominant",
    } <= data.keys()
    assert math.isclose(data["bandwidth_seconds"], 2 * 7 / 8 * GIB / 50e9)
    assert "not an exact NCCL" in data["caveat"]
    bidir = json.loads(
        cli("estimate", "transfer", "--bytes", "900GB", "--bandwidth", "1.8TB/s", "--latency", "1us", "--json").out
    )
    assert bidir["bandwidth_seconds"] == pytest.approx(0.5)
    assert bidir["algorithm"] == "point-to-point"  # a send, as a workload's send phase names it: never a ring
    assert cli("estimate", "transfer", "--bytes", "1GB", "--bandwidth", "400", "--latency", "1us").code == 2
    assert cli("estimate", "transfer", "--bytes", "1GB", "--bandwidth", "1GB", "--latency", "1us").code == 2
    zero = cli("estimate", "transfer", "--bytes", "1GB", "--bandwidth", "0Gb/s", "--latency", "1us")
    assert zero.code == 2 and "--bandwidth '0Gb/s': expected a rate above zero" in zero.said, zero.said
    mem = json.loads(cli("estimate", "memory", "--params", "70e9", "--layout", "mixed-adam", "--json").out)
    assert mem["bytes"] == 1.26e12
    wl = json.loads(
        cli(
            "estimate",
            "workload",
            "nvidia-gb200-nvl72",
            "llama70b-serve-disaggregated",
            "--json",
            root=built_registry.root,
        ).out
    )
    assert [p["phase"] for p in wl["phases"]][:2] == ["prefill-tp-all-reduce", "kv-transfer"]
    reduce = cli("estimate", "collective", "--op", "reduce", "--ranks", "8", "--bytes", "1GiB", "--bandwidth",
                 "400Gb/s", "--latency", "5us", "--json")  # fmt: skip
    assert reduce.code == 0, reduce.err
    assert json.loads(reduce.out)["bytes_on_wire_per_rank"] == GIB  # a ring reduce moves S per rank


def test_cli_sets_knobs_to_lay_a_workload_where_it_is_not_targeted(cli, built_registry):
    """`--set` lays the disaggregated service's TP 4 pools in one MI300X server; a misspelt knob is bad usage."""
    args = ("estimate", "workload", "amd-mi300x-pollara400", "llama70b-serve-disaggregated")
    r = cli(*args, "--set", "prefill_tp=4", "--set", "decode_tp=4", "--json", root=built_registry.root)
    assert r.code == 0, r.err
    kv = next(p for p in json.loads(r.out)["phases"] if p["phase"] == "kv-transfer")
    assert kv["bottleneck_gbps"] == 512 and kv["effective_gbps"] <= 512 and kv["group_size"] == 2
    assert cli(*args, root=built_registry.root).code == 2  # as shipped it needs 16 accelerators
    bad = cli(*args, "--set", "prefil_tp=4", root=built_registry.root)
    assert bad.code == 2 and "prefil_tp: not a knob" in bad.err and "prefill_tp" in bad.err
    assert cli(*args, "--set", "prefill_tp", root=built_registry.root).code == 2


DISAGGREGATED = """\
id: ID
title: prefill and decode pools
kind: inference
model: {params: 70.0e9, layers: 80, hidden: 8192, kv_heads: 8, head_dim: 128, dtype: bf16}
inference: {mode: disaggregated, prefill_tp: 8, decode_tp: 8, prompt_tokens: 1024, output_tokens: 10START}
targets: [nvidia-gb200-nvl72]
"""


def test_decode_pool_start_places_the_decode_pool(built_registry, tmp_path):
    def kv(start: str, target: str = "nvidia-gb200-nvl72"):
        w = _workload(tmp_path, DISAGGREGATED.replace("START", start))
        return next(p for p in estimate(built_registry, target, w).phases if p.phase == "kv-transfer")

    local = "local: both ends in one scale-up domain"
    assert kv("").notes.startswith(local) and kv(", decode_pool_start: 64").notes.startswith(local)
    # Ranks 64..71 are the last of the 72-GPU domain; one further needs a 73rd accelerator.
    with pytest.raises(UsageError, match="needs 73 accelerators"):
        kv(", decode_pool_start: 65")
    # Between 8-GPU servers the default decode pool sits on the next server, under the same leaf.
    assert kv("", "illustrative-h100-4096").tier == "one leaf"
    assert kv(", decode_pool_start: 1024", "illustrative-h100-4096").tier != "one leaf"
    # The old, misleading name is refused rather than silently ignored.
    with pytest.raises(ValidationError, match="prefill_offset"):
        _workload(tmp_path, DISAGGREGATED.replace("START", ", prefill_offset: 64"))


def test_the_workload_table_shows_the_bytes_its_time_is_computed_from(built_registry, cli, monkeypatch):
    """The table showed the buffer size alone, while each time uses the bytes on the wire (9/8 of it for NVLS,
    (n − 1) times it for one-shot): both columns, as the JSON has them."""
    import re

    monkeypatch.setenv("COLUMNS", "400")  # one row per line, whatever the terminal

    wid = "llama70b-serve-aggregated"
    data = json.loads(cli("estimate", "workload", "nvidia-dgx-h100", wid, "--json", root=built_registry.root).out)
    table = cli("estimate", "workload", "nvidia-dgx-h100", wid, root=built_registry.root).out
    assert "on wire/rank" in table
    from fabricref.core.format import format_quantity

    for p in data["phases"]:
        row = next(line for line in table.splitlines() if line.startswith(f"│ {p['phase']} "))
        cells = [c.strip() for c in re.split(r"│", row)[1:-1]]
        assert format_quantity(p["bytes_on_wire_per_rank"], "B") in cells, (p["phase"], cells)
