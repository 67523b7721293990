"""Placement, routing over the installed graph and loads per link: hand-computed expectations (issue 12)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fabricref.estimate import cost, loads
from fabricref.estimate.calibration import load_calibration
from fabricref.estimate.decompose import decompose, gradient_shards, training_groups
from fabricref.estimate.loads import Stage, collective_stages, cost_phase, send_stage
from fabricref.estimate.placement import PlacementError, ordered_accelerators, place
from fabricref.estimate.routing import Wiring, accelerator_domains
from fabricref.estimate.view import View
from fabricref.estimate.workloads import find_workload, load_workload
from fabricref.topology.build import build_cluster
from fabricref.topology.clusters import Cluster, Fabric
from fabricref.topology.facts import defaults, load_facts
from fabricref.topology.summary import summarize

KV_PER_TOKEN = 2 * 80 * 8 * 128 * 2  # K and V × layers × KV heads × head dim × bf16 = 327,680 B
GBPS = 1e9 / 8  # bytes per second in one Gb/s
CAL = load_calibration(Path(__file__).resolve().parents[2])


def routed(g, w, endpoint_ns: float = 0.0) -> tuple[Wiring, dict[str, loads.RoutedPhase]]:
    """Every backend phase of `w` placed and routed on `g`, as the traffic estimate does, and the wiring."""
    view = View(g, endpoint_ns, summarize(g))
    return view.wiring, cost.phases(view, w, CAL)[1]


def _workload(tmp_path, text: str):
    name = text.split("\n", 1)[0].split(": ")[1]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return load_workload(path)


MODEL = """model:
  params: 70.0e9
  layers: 80
  hidden: 8192
  kv_heads: 8
  head_dim: 128
  dtype: bf16
"""


def _disagg(ptp: int, dtp: int, target: str) -> str:
    return (
        f"id: kv-tp{ptp}-tp{dtp}\ntitle: KV transfer test\nkind: inference\n{MODEL}"
        f"inference:\n  mode: disaggregated\n  prefill_tp: {ptp}\n  decode_tp: {dtp}\n"
        f"  prompt_tokens: 32768\n  output_tokens: 200\ntargets: [{target}]\n"
    )


def _train(tp: int, dp: int, target: str) -> str:
    return (
        f"id: train-tp{tp}-dp{dp}\ntitle: training test\nkind: training\n{MODEL}"
        f"training:\n  tp: {tp}\n  pp: 1\n  dp: {dp}\n  micro_batch: 1\n  microbatches: 4\n  seq_len: 4096\n"
        f"targets: [{target}]\n"
    )


def test_a_mesh_pair_uses_its_one_link(built_graph, tmp_path):
    """MI300X: GPUs are joined pairwise by Infinity Fabric links of 512 Gb/s; a pair gets one, not seven."""
    g = built_graph("amd-mi300x-pollara400")
    fabric = Wiring(g)
    a, b = "amd-mi300x-pollara400/gpu0", "amd-mi300x-pollara400/gpu4"
    routes = fabric.route([a], [b])
    used = routes.incidence[:, 0].nonzero()[0]
    assert [fabric.edges[i // 2] for i in used] == [(a, b)] and routes.incidence[used[0], 0] == 1.0
    # TP 4 → TP 4 KV transfer in one server: prefill rank i sends its quarter of the KV cache to decode rank i.
    w = _workload(tmp_path, _disagg(4, 4, "amd-mi300x-pollara400"))
    kv = routed(g, w)[1]["kv-transfer"]
    per_rank = KV_PER_TOKEN * 32768 / 4  # 2.68 GB
    assert kv.load.bandwidth_s == pytest.approx(per_rank / (512 * GBPS))  # ≈ 41.9 ms, not 5.99 ms
    assert kv.load.bandwidth_s == pytest.approx(0.041943, rel=1e-4)
    assert kv.load.queueing_s == 0
    # A TP 4 sub-group all-reduce: each rank reaches the 3 other members over 3 links (not 7).
    group = [f"amd-mi300x-pollara400/gpu{i}" for i in range(4)]
    alg, stages = collective_stages("all-reduce", [group], 1e9, {x: "d" for x in group}, "tp4")
    load = cost_phase(fabric, alg, stages, 0.0)
    assert load.bandwidth_s == pytest.approx(2 * 3 / 4 * 1e9 / (3 * 512 * GBPS))


def test_switched_domain_spreads_a_pair_over_every_switch(built_graph):
    g = built_graph("nvidia-dgx-h100")
    fabric = Wiring(g)
    routes = fabric.route(["nvidia-dgx-h100/gpu0"], ["nvidia-dgx-h100/gpu1"])
    col = routes.incidence[:, 0].toarray().ravel()
    assert sorted(col[col > 0]) == [0.25] * 8  # 4 switches, up and down
    # TP 8 all-reduce: 2·7/8·S per rank at 3,600 Gb/s per direction (4 × 900), no queueing.
    group = [f"nvidia-dgx-h100/gpu{i}" for i in range(8)]
    alg, stages = collective_stages("all-reduce", [group], 1e9, {x: "d" for x in group}, "tp8")
    load = cost_phase(fabric, alg, stages, 0.0)
    assert load.bandwidth_s == pytest.approx(2 * 7 / 8 * 1e9 / (3600 * GBPS)) and load.queueing_s == 0
    assert load.utilization.max() == pytest.approx(1.0)


def test_tp6_on_8_gpu_domains_is_refused_naming_the_straddling_group(built_graph, tmp_path):
    g = built_graph("illustrative-h100-4096")
    view = View(g, 0.0, summarize(g))
    text = _train(6, 2, "illustrative-h100-4096").replace("hidden: 8192", "hidden: 8196")
    w = _workload(tmp_path, text.replace("kv_heads: 8", "kv_heads: 6"))
    with pytest.raises(PlacementError) as err:
        place(view, decompose(w), w)
    text = str(err.value)
    assert "TP group 1" in text and "straddles 2 scale-up domains" in text
    assert "b000/gpu6" in text and "b000/gpu7" in text and "b001/gpu0" in text and "b001/gpu3" in text
    # TP 8 fills each server; every group is built: 2 TP groups of 8, 8 DP groups of 2.
    w = _workload(tmp_path, _train(8, 2, "illustrative-h100-4096"))
    tp, dp = decompose(w).communications
    at = place(view, decompose(w), w)
    assert len(tp.parts[0].groups) == 2 and len(dp.parts[0].groups) == 8
    assert [at[r] for r in dp.parts[0].groups[3]] == ["b000/gpu3", "b001/gpu3"]  # rails aligned


def test_every_group_is_built_and_ep_groups_walk_the_tp_dp_plane():
    grp = training_groups(4, 2, 16, 16)
    assert len(grp.tp) == 32 and len(grp.dp) == 8 and len(grp.pp) == 64
    assert len(grp.ep) == 2 * 64 // 16 and grp.ep[0] == tuple(range(16))
    # The ranks holding expert 5 of stage 0: flat index 5 of each EP group (every 16 ranks).
    assert grp.expert[5] == (5, 21, 37, 53)
    assert sorted(r for x in grp.tp for r in x) == list(range(128))


def test_moe_gradient_counts_expert_weights_once_per_ep_shard(built_registry):
    w = find_workload(built_registry, "moe-train-ep16")
    dense_per_rank, expert_per_rank = gradient_shards(w.model, w.training)
    dense = 56 * (2 * 6144**2 + 2 * 6144 * 8 * 128)  # attention projections: 4,932,501,504
    assert dense_per_rank == pytest.approx(dense / 4)
    assert expert_per_rank == pytest.approx((141e9 - dense) / 16)
    grad_bytes = (dense_per_rank + expert_per_rank) * 2
    assert grad_bytes == pytest.approx(19.47e9, rel=1e-3)  # not 141e9 / 4 × 2 = 70.5 GB
    dense_only = w.model.model_copy(update={"experts": None})
    assert sum(gradient_shards(dense_only, w.training)) * 2 == pytest.approx(70.5e9)


def test_attention_params_count_q_and_o_at_heads_times_head_dim_not_hidden():
    """Gemma 7B: hidden 3,072 but 16 heads × 256 = 4,096 wide. Q, K, V and O are each 3,072 × 4,096 (16 KV heads),
    4 × 12,582,912 per layer, × 28 layers; hidden² for Q and O would say 1,233,125,376."""
    from fabricref.estimate.decompose import attention_params
    from fabricref.formats.workload import ModelShape

    gemma = ModelShape(params=8.5e9, layers=28, hidden=3072, heads=16, kv_heads=16, head_dim=256, dtype="bf16")
    assert attention_params(gemma) == 28 * 4 * 3072 * 4096 == 1_409_286_144


def _small_oversubscribed(lay):
    """Meta's builder scaled down: 4 DGX H100 servers, 2 per ToR, one ToR per pod, 16 spines, 1:7 above."""
    fabric = Fabric(3, False, 16, 16, 1, 16, None, 7, 1, None, "InfiniBand (test)")
    cluster = Cluster("tiny-1to7", "tiny", "illustrative", "", "nvidia-dgx-h100", 4, None, fabric, 4, None)
    return build_cluster(cluster, load_facts(lay, "nvidia-dgx-h100"), defaults(lay))


def test_oversubscribed_all_to_all_across_the_1_to_7_tier_matches_fluid_queueing(built_registry):
    g = _small_oversubscribed(built_registry)
    wiring = Wiring(g)
    accs = [f"b{b}/gpu{i}" for b in range(4) for i in range(8)]
    size = 32e9  # each rank sends 1 GB to each of the 31 others
    alg, stages = collective_stages("all-to-all", [accs], size, {a: a.split("/")[0] for a in accs}, "a2a")
    load = cost_phase(wiring, alg, stages, 0.0)
    # By hand. Each NIC carries 24 flows (8 to the other server of its pod, 16 to the other pod): demand
    # 400/24 Gb/s each. Each spine–core trunk is 400 × 1 / 7 Gb/s; the 256 cross-pod flows each way are
    # split 1/16 over the 16 spines, so 16 flow-equivalents share each trunk: 400/7/16 Gb/s per flow.
    per_pair_bits = 1e9 * 8
    alone = per_pair_bits / (400e9 / 24)
    fair = per_pair_bits / (400e9 / 7 / 16)
    assert load.bandwidth_s == pytest.approx(alone)
    assert load.queueing_s == pytest.approx(fair - alone)  # 2.24 s − 0.48 s = 1.76 s
    rows = loads.link_rows(wiring, load)
    trunks = [r for r in rows if r["tier"] == "spine-core"]
    assert len(trunks) == 32 and all(r["utilization"] == pytest.approx(16 * (400 / 24) / (400 / 7)) for r in trunks)
    # Queueing only where offered load exceeds capacity: NIC and leaf–spine links stay at or below 1.
    assert all(r["utilization"] <= 1 + 1e-9 for r in rows if r["tier"] != "spine-core")


def test_sharing_on_disjoint_links_adds_nothing(built_registry):
    g = _small_oversubscribed(built_registry)
    wiring = Wiring(g)
    mine = send_stage([("b0/gpu0", "b1/gpu0")], 1e9, "mine")  # both servers under leaf 0
    other = send_stage([("b2/gpu0", "b3/gpu0")], 1e9, "other")  # both under leaf 1
    a = cost_phase(wiring, "p2p", [mine], 0.0)
    b = cost_phase(wiring, "p2p", [other], 0.0)
    assert loads.added_queueing(wiring, [mine], a, [(b, 1)], b.seconds) == (0.0, 0.0)
    # The same transfer beside one that shares its NIC: queueing appears, and only there.
    busy = send_stage([("b0/gpu0", "b2/gpu0")], 1e9, "other")
    c = cost_phase(wiring, "p2p", [busy], 0.0)
    # By hand: the other flow keeps the shared NIC busy its whole (one-phase) step → capped at 0.95, so mine
    # runs at 5 % of 400 Gb/s: 1 GB takes 8e9 / 20e9 = 0.4 s instead of 0.02 s.
    added, share = loads.added_queueing(wiring, [mine], a, [(c, 1)], c.seconds)
    assert share == pytest.approx(0.95) and added == pytest.approx(8e9 / 20e9 - 8e9 / 400e9)


def test_a_cross_rail_pair_on_a_rail_optimized_fabric_climbs_to_the_spines(built_graph):
    g = built_graph("illustrative-h100-4096")
    src, dst = ["b000/gpu0"], ["b001/gpu1"]
    plain = Wiring(g)
    r = plain.route(src, dst)
    tiers = {plain.kind[plain.tail[i]] + ">" + plain.kind[plain.head[i]] for i in r.incidence[:, 0].nonzero()[0]}
    assert "leaf>spine" in tiers and "accelerator>scale_up_switch" not in tiers and not r.notes


def test_max_min_fair_share_by_hand():
    """Two links of 10 and 4; flow A on both, flow B on the second only, flow C on the first only."""
    import scipy.sparse as sp

    inc = sp.csr_matrix(np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]))
    rates = loads.max_min(inc, np.array([10.0, 4.0]))
    assert rates == pytest.approx([2.0, 2.0, 8.0])
    assert loads.alone_rates(inc, np.array([10.0, 4.0])) == pytest.approx([4.0, 4.0, 10.0])


def test_stage_bytes_and_network_split(built_registry):
    g = _small_oversubscribed(built_registry)
    wiring = Wiring(g)
    stage = Stage(["b0/gpu0", "b0/gpu0"], ["b0/gpu1", "b2/gpu0"], np.array([3e9, 5e9]), 1, "mix")
    load = cost_phase(wiring, "mix", [stage], 0.0)
    assert load.injected == {"scale_up": 3e9, "host": 5e9, "scale_out": 5e9}


@pytest.mark.slow
def test_dp_384_and_385_on_meta_style_are_close(built_graph, tmp_path):
    """One more server must not make the DP all-reduce 7× slower: only 2 ring edges per rail cross pods."""
    g = built_graph("meta-style-h100-24576")
    times = {}
    for dp in (384, 385):
        phases = routed(g, _workload(tmp_path, _train(8, dp, "meta-style-h100-24576")), 5000.0)[1]
        times[dp] = phases["dp-all-reduce"].load.seconds
    assert times[385] / times[384] < 1.2
    # Ring all-reduce of 17.5 GB per rank at 400 Gb/s: 2·(n−1)/n·S / 50 GB/s ≈ 0.70 s, no queueing.
    assert times[384] == pytest.approx(2 * 383 / 384 * 70e9 / 8 * 2 / 50e9, rel=0.02)


@pytest.mark.slow
def test_meta_style_and_non_blocking_within_1_5x_for_dp512(built_registry, built_graph):
    w = find_workload(built_registry, "llama70b-train-tp8-dp512")
    out = {}
    for target in ("meta-style-h100-24576", "illustrative-h100-4096"):
        phases = routed(built_graph(target), w, 5000.0)[1]
        out[target] = sum(p.load.seconds * p.count for p in phases.values())
    ratio = out["meta-style-h100-24576"] / out["illustrative-h100-4096"]
    assert 1 / 1.5 < ratio < 1.5


def test_link_rows_list_every_link_a_phase_uses_once(built_graph):
    """A TP all-reduce over 16 servers: every accelerator–switch link of the 16, once each."""
    g = built_graph("illustrative-h100-4096")
    accs = ordered_accelerators(g)[: 8 * 16]
    groups = [[accs[r] for r in x] for x in training_groups(8, 1, 16).tp]
    _, stages = collective_stages("all-reduce", groups, 1e8, accelerator_domains(g), "tp")
    fabric = Wiring(g)
    rows = loads.link_rows(fabric, cost_phase(fabric, "x", stages, 0.0))
    assert len(rows) == 16 * 8 * 4
    assert len({(r["source"], r["target"]) for r in rows}) == len(rows)


def test_estimate_json_gains_link_utilization_hot_links_and_bytes_per_network(cli, built_registry):
    import json

    r = cli("estimate", "workload", "nvidia-dgx-h100", "llama70b-serve-aggregated", "--json", root=built_registry.root)
    assert r.code == 0, r.err
    phases = {p["phase"]: p for p in json.loads(r.out)["phases"]}
    decode = phases["decode-tp-all-reduce"]
    # One token's activations (8,192 × 2 B = 16,384 B), all over NVLink. The library runs it one-shot (the
    # algorithm column): each rank reads the 7 others' buffers, 7 × 16,384 B, which is the phase's bytes on the wire.
    assert decode["algorithm"].startswith("one-shot")
    assert decode["bytes_on_wire_per_rank"] == pytest.approx(7 * 16384)
    assert decode["bytes_on_wire_per_rank_by_network"] == {"scale_up": pytest.approx(7 * 16384)}
    assert decode["max_link_utilization"] == pytest.approx(1.0)
    assert len(decode["hot_links"]) == 5
    assert {h["tier"] for h in decode["hot_links"]} == {"accelerator-scale-up switch"}
    assert phases["frontend-request"]["hot_links"] == []


def test_estimate_refuses_tp6_naming_the_group(built_registry, tmp_path):
    from fabricref.errors import UsageError
    from fabricref.estimate.traffic import estimate

    text = (
        _train(6, 2, "illustrative-h100-4096")
        .replace("hidden: 8192", "hidden: 8196")
        .replace("kv_heads: 8", "kv_heads: 6")
    )
    with pytest.raises(UsageError, match=r"TP group 1 \(ranks 6–11\) straddles 2 scale-up domains"):
        estimate(built_registry, "illustrative-h100-4096", _workload(tmp_path, text))
