"""Declared placement, ECMP by hash and tree-edge flows (issue 12): hand-computed expectations on small clusters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fabricref.errors import ValidationError
from fabricref.estimate import cost, loads
from fabricref.estimate.calibration import load_calibration
from fabricref.estimate.decompose import decompose
from fabricref.estimate.placement import PlacementError, rank_accelerators
from fabricref.estimate.routing import Wiring
from fabricref.estimate.view import View
from fabricref.estimate.workloads import load_workload
from fabricref.topology.build import build_cluster
from fabricref.topology.clusters import Cluster, Fabric
from fabricref.topology.facts import defaults, load_facts
from fabricref.topology.summary import summarize

GBPS = 1e9 / 8  # bytes per second in one Gb/s
CAL = load_calibration(Path(__file__).resolve().parents[2])
MODEL = "model: {params: 70.0e9, layers: 80, hidden: 8192, kv_heads: 8, head_dim: 128, dtype: bf16}\n"


def _train(tmp_path, placement: str = "", tp: int = 8, dp: int = 2, name: str = "train"):
    text = (
        f"id: {name}\ntitle: training test\nkind: training\n{MODEL}"
        f"training: {{tp: {tp}, pp: 1, dp: {dp}, micro_batch: 1, microbatches: 4, seq_len: 4096}}\n"
        f"targets: [tiny-1to7]\n{placement}"
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return load_workload(path)


def _tiny(lay, **fabric_options):
    """4 DGX H100 servers, 2 per ToR, one ToR per pod (b0, b1 in pod 0; b2, b3 in pod 1), 16 spines per pod, the
    spine–core trunks at 1:7 (400/7 Gb/s each)."""
    fabric = Fabric(3, False, 16, 16, 1, 16, None, 7, 1, None, "InfiniBand (test)", **fabric_options)
    cluster = Cluster("tiny-1to7", "tiny", "illustrative", "", "nvidia-dgx-h100", 4, None, fabric, 4, None)
    return build_cluster(cluster, load_facts(lay, "nvidia-dgx-h100"), defaults(lay))


def _view(g) -> View:
    return View(g, 0.0, summarize(g))


def _routed(view: View, w) -> dict[str, loads.RoutedPhase]:
    """Every backend phase of `w` placed and routed on the view's wiring, as the traffic estimate does."""
    return cost.phases(view, w, CAL)[1]


def _dp(view: View, w):
    return _routed(view, w)["dp-all-reduce"]


def _tiers(wiring, load) -> set[str]:
    return {r["tier"] for r in loads.link_rows(wiring, load)}


# ---- placement declared in the workload or the cluster ------------------------------------------------------

S = 70e9 / 8 * 2  # gradient bytes per rank: params / TP × bf16 = 17.5 GB; a 2-rank ring sends S each way


def test_default_fill_domains_keeps_the_dp_ring_under_one_leaf(built_registry, tmp_path):
    g = _tiny(built_registry)
    w = _train(tmp_path)
    assert [rank_accelerators(g, w)[r] for r in (0, 7, 8, 15)] == ["b0/gpu0", "b0/gpu7", "b1/gpu0", "b1/gpu7"]
    view = _view(g)
    wiring = view.wiring
    dp = _dp(view, w)
    # 8 flows each way (one per rail), each alone on its 400 Gb/s NIC: S / 50 GB/s = 0.35 s, nothing shared.
    assert dp.load.bandwidth_s == pytest.approx(S / (400 * GBPS)) and dp.load.queueing_s == 0
    assert _tiers(wiring, dp.load) == {"accelerator-NIC (host)", "NIC-leaf"}


def test_declared_spread_puts_the_dp_ring_across_pods_and_queues_at_the_1_to_7_tier(built_registry, tmp_path):
    g = _tiny(built_registry)
    w = _train(tmp_path, "placement: {strategy: spread}\n")
    assert [rank_accelerators(g, w)[r] for r in (0, 8)] == ["b0/gpu0", "b2/gpu0"]  # every 2nd of 4 domains
    view = _view(g)
    wiring = view.wiring
    dp = _dp(view, w)
    # By hand: 8 flows pod 0 → pod 1, each split 1/16 over the 16 spines, so each spine–core trunk carries
    # 8/16 flow: max-min rate 2 × 400/7 = 114.3 Gb/s per flow (offered 8 × 400/16 = 200 Gb/s per trunk: 3.5×).
    alone, fair = S / (400 * GBPS), S / (800 / 7 * GBPS)
    assert dp.load.bandwidth_s == pytest.approx(alone)  # 0.35 s
    assert dp.load.queueing_s == pytest.approx(fair - alone)  # 1.225 − 0.35 = 0.875 s
    rows = loads.link_rows(wiring, dp.load)
    trunks = [r for r in rows if r["tier"] == "spine-core"]
    assert len(trunks) == 32 and all(r["utilization"] == pytest.approx(3.5) for r in trunks)
    # Each trunk carries 8 flows × S/16 each way (pod 0 → pod 1 up one end, pod 1 → pod 0 down the other).
    assert all(r["bytes_forward"] == r["bytes_reverse"] == pytest.approx(S * 8 / 16) for r in trunks)


def test_cluster_default_placement_applies_when_the_workload_is_silent(built_registry, tmp_path):
    g = _tiny(built_registry)
    g.graph["placement"] = "spread"  # as the topology stage stamps a cluster's `placement`
    assert rank_accelerators(g, _train(tmp_path))[8] == "b2/gpu0"
    # The workload's own declaration wins over the cluster's default.
    assert rank_accelerators(g, _train(tmp_path, "placement: {strategy: fill-domains}\n"))[8] == "b1/gpu0"


def test_explicit_ranges_place_every_rank(built_registry, tmp_path):
    g = _tiny(built_registry)
    text = "placement:\n  strategy: explicit\n  ranges:\n    - {first_rank: 0, ranks: 8, accelerator: 0}\n"
    w = _train(tmp_path, text + "    - {first_rank: 8, ranks: 8, accelerator: b3/gpu0}\n")
    at = rank_accelerators(g, w)
    assert (at[0], at[7], at[8], at[15]) == ("b0/gpu0", "b0/gpu7", "b3/gpu0", "b3/gpu7")
    dp = _dp(_view(g), w)
    assert dp.load.queueing_s == pytest.approx(S / (800 / 7 * GBPS) - S / (400 * GBPS))  # across pods as spread
    # An accelerator the topology does not have: the file and the JSON path are named.
    bad = _train(tmp_path, text + "    - {first_rank: 8, ranks: 8, accelerator: b9/gpu0}\n")
    with pytest.raises(PlacementError, match=r"train\.yaml: at \$\.placement\.ranges\[1\]\.accelerator: 'b9/gpu0'"):
        rank_accelerators(g, bad)
    # Two ranges on overlapping accelerators: both ranges are named, and the accelerator they share.
    overlap = _train(tmp_path, text + "    - {first_rank: 8, ranks: 8, accelerator: 4}\n")
    with pytest.raises(
        PlacementError,
        match=r"at \$\.placement\.ranges\[0\] and \$\.placement\.ranges\[1\]: ranks 4 and 8 are both on "
        r"accelerator b0/gpu4",
    ):
        rank_accelerators(g, overlap)
    # TP must stay inside one domain, whatever the declaration says.
    straddle = _train(tmp_path, text + "    - {first_rank: 8, ranks: 8, accelerator: 12}\n")
    with pytest.raises(PlacementError, match=r"TP group 1 \(ranks 8–15\) straddles 2 scale-up domains"):
        _dp(_view(g), straddle)


def test_explicit_ranges_are_checked_when_the_workload_loads(tmp_path):
    head = "placement:\n  strategy: explicit\n  ranges:\n    - {first_rank: 0, ranks: 8, accelerator: 0}\n"
    with pytest.raises(ValidationError, match=r"ranges\[1\]: rank 4 is already placed by ranges\[0\]"):
        _train(tmp_path, head + "    - {first_rank: 4, ranks: 12, accelerator: 8}\n")
    with pytest.raises(ValidationError, match=r"at \$\.placement\.ranges: rank 8 \(and 7 more\) is not placed"):
        _train(tmp_path, head)
    with pytest.raises(ValidationError, match=r"at \$\.placement\.ranges\[1\]: rank 16 is not a rank"):
        _train(tmp_path, head + "    - {first_rank: 8, ranks: 9, accelerator: 8}\n")
    with pytest.raises(ValidationError, match=r"ranges"):
        _train(tmp_path, "placement: {strategy: explicit}\n")


# ---- ECMP by declared hash ------------------------------------------------------------------------------------


def _splitmix(key: int, hop: int) -> int:
    """The documented hop mix, written again with Python integers (mod 2⁶⁴) to check the numpy one."""
    m = 2**64 - 1
    z = (key + hop * 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def _key(src: str, dst: str, seed: int) -> int:
    import hashlib

    return int.from_bytes(hashlib.blake2b(f"{src}>{dst}>{seed}".encode(), digest_size=8).digest(), "little")


@pytest.mark.parametrize("seed", [0, 7])
def test_ecmp_hash_puts_each_flow_on_one_path_and_collisions_make_hot_links(built_registry, tmp_path, seed):
    g = _tiny(built_registry, ecmp_mode="hash", ecmp_seed=seed)
    w = _train(tmp_path, "placement: {strategy: spread}\n")
    view = _view(g)
    wiring = view.wiring
    # By hand: leaf 0's only choice is which of the 16 spines of pod 0 (in topology node order) each of the 8
    # flows b0/gpuI → b2/gpuI climbs to; above it there is one path (spine j → core j → spine j of pod 1).
    spines = [n for n, d in g.nodes(data=True) if d["kind"] == "spine" and d["pod"] == 0]
    forward = [_splitmix(_key(f"b0/gpu{i}", f"b2/gpu{i}", seed), 0) % 16 for i in range(8)]
    back = [_splitmix(_key(f"b2/gpu{i}", f"b0/gpu{i}", seed), 0) % 16 for i in range(8)]
    routes = wiring.route([f"b0/gpu{i}" for i in range(8)], [f"b2/gpu{i}" for i in range(8)])
    for i in range(8):
        used = {wiring.nodes[wiring.head[link]] for link in routes.incidence[:, i].nonzero()[0]}
        assert spines[forward[i]] in used and len(used & set(spines)) == 1  # one path, all of the flow on it
    assert set(routes.incidence.data) == {1.0}
    dp = _dp(view, w)
    # The busiest trunk carries n flows, each at (400/7)/n Gb/s; the phase waits for them.
    n = max(max(forward.count(j) for j in forward), max(back.count(j) for j in back))
    assert n >= 2  # these seeds collide (8 flows on 16 spines)
    assert dp.load.bandwidth_s + dp.load.queueing_s == pytest.approx(S / (400 / 7 / n * GBPS))
    rows = [r for r in loads.link_rows(wiring, dp.load) if r["tier"] == "spine-core"]
    # Alone, a flow is held to its trunk's 400/7 Gb/s (the bandwidth term); n of them offer n× that trunk.
    assert dp.load.bandwidth_s == pytest.approx(S / (400 / 7 * GBPS))
    assert max(r["utilization"] for r in rows) == pytest.approx(n)
    # Only trunks the hash picked carry load: plane j's two trunks (pod 0's and pod 1's) when either way picked j.
    assert len(rows) == 2 * len(set(forward) | set(back))
    # Reproducible: the same seed gives the same links on a fresh object.
    again = Wiring(g).route([f"b0/gpu{i}" for i in range(8)], [f"b2/gpu{i}" for i in range(8)])
    assert (again.incidence != routes.incidence).nnz == 0


def test_ecmp_uniform_is_the_default_and_a_cluster_file_declares_hash_and_placement(built_registry, tmp_path):
    from fabricref.topology.clusters import load_cluster
    from fabricref.topology.stage import _params

    assert Wiring(_tiny(built_registry)).ecmp == "uniform"
    text = (built_registry.root / "models/clusters/meta-style-h100-24576.yaml").read_text()
    assert "ecmp" not in text and "placement" not in text
    path = tmp_path / "meta-style-h100-24576.yaml"
    declared = text.replace("scale_out:\n", "placement: spread\nscale_out:\n  ecmp: {mode: hash, seed: 42}\n", 1)
    path.write_text(declared)
    cluster = load_cluster(path, _params(built_registry))
    assert (cluster.fabric.ecmp_mode, cluster.fabric.ecmp_seed, cluster.placement) == ("hash", 42, "spread")
    path.write_text(text.replace("scale_out:\n", "scale_out:\n  ecmp: {mode: random}\n", 1))
    with pytest.raises(ValidationError, match=r"scale_out\.ecmp\.mode"):
        load_cluster(path, _params(built_registry))
    path.write_text(text.replace("scale_out:\n", "scale_out:\n  ecmp: {mode: uniform, seed: 7}\n", 1))
    with pytest.raises(ValidationError, match=r"scale_out\.ecmp: .*`seed` only applies to mode hash"):
        load_cluster(path, _params(built_registry))


# ---- tree-edge flows ------------------------------------------------------------------------------------------


def test_nccl_double_binary_tree_parents():
    """NCCL's trees (src/graph/trees.cc): 4 ranks: 1→2, 3→2, 2→0 and, mirrored, 2→1, 0→1, 1→3."""
    first, second = loads.dtree_parents(4)
    assert first.tolist() == [-1, 2, 0, 2] and second.tolist() == [1, 3, 1, -1]
    # 13 ranks (odd): the second tree is the first shifted by one (root 1); the first is NCCL's illustration.
    first, second = loads.dtree_parents(13)
    assert first.tolist() == [-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8]
    assert second.tolist() == [(p + 1) % 13 if p >= 0 else -1 for p in np.roll(first, 1)]


def test_tree_flows_follow_tree_edges_not_ring_neighbours(built_registry):
    """4 ranks, one per server (b0, b1 under leaf 0 in pod 0; b2, b3 under leaf 1 in pod 1), all-reduce of S.

    Ring 0→1→2→3→0: 1.5 S per edge; pod 0 → pod 1 carries edge 1→2 only: 1.5 S. Tree edges (S/2 each way on
    every edge of each tree): tree 1 {1–2, 3–2, 2–0}, tree 2 {2–1, 0–1, 1–3}; pod 0 → pod 1 carries
    0→2 (S/2), 1→2 (S/2 + S/2) and 1→3 (S/2): 2 S; b1's NIC sends to 2 (S), 0 (S/2) and 3 (S/2): 2 S."""
    g = _tiny(built_registry)
    wiring = Wiring(g)
    ranks = [f"b{b}/gpu0" for b in range(4)]
    dom = {a: a.split("/")[0] for a in ranks}
    size = 1e9
    alg, stages = loads.tree_stages([ranks], size, dom, "tree")
    assert "double binary tree" in alg and len(stages) == 1
    pairs = {}
    for a, b, x in zip(stages[0].src, stages[0].dst, stages[0].bytes, strict=True):
        pairs[(a[1], b[1])] = pairs.get((a[1], b[1]), 0) + x
    half = size / 2
    assert pairs == {
        ("1", "2"): 2 * half, ("2", "1"): 2 * half, ("3", "2"): half, ("2", "3"): half,
        ("2", "0"): half, ("0", "2"): half, ("0", "1"): half, ("1", "0"): half,
        ("1", "3"): half, ("3", "1"): half,
    }  # fmt: skip
    tree = loads.cost_phase(wiring, alg, stages, 0.0)
    up = [r for r in loads.link_rows(wiring, tree) if r["tier"] == "spine-core" and r["source"].startswith("core")]
    # spine000-j (pod 0) sorts after core: bytes_reverse is spine → core, the pod 0 → pod 1 direction.
    pod0_up = sum(r["bytes_reverse"] for r in up if r["target"].startswith("spine000"))
    assert pod0_up == pytest.approx(4 * half)
    nic = [
        r for r in loads.link_rows(wiring, tree) if r["tier"] == "accelerator-NIC (host)" and "b1/gpu0" in r["source"]
    ]
    assert sum(r["bytes_forward"] if r["source"] == "b1/gpu0" else r["bytes_reverse"] for r in nic) == 4 * half
    ring_alg, ring = loads.collective_stages("all-reduce", [ranks], size, dom, "ring")
    assert "ring" in ring_alg
    ring_load = loads.cost_phase(wiring, ring_alg, ring, 0.0)
    rows = loads.link_rows(wiring, ring_load)
    pod0_up_ring = sum(
        r["bytes_reverse"] for r in rows if r["tier"] == "spine-core" and r["target"].startswith("spine000")
    )
    assert pod0_up_ring == pytest.approx(1.5 * size)


def test_a_phase_the_library_runs_as_a_tree_is_routed_on_tree_edges(built_registry, tmp_path):
    """The routed phase follows the algorithm the registry chose: a tree turns the DP ring's edges into tree edges
    (DP 16 fills 2 servers, 8 local ranks: a chain of 8 in each server, and per local rank a 2-node tree whose
    single edge carries S/8/2 each way in each of the two trees)."""
    from fabricref.estimate.view import view_for

    view = view_for(built_registry, "illustrative-h100-4096")
    w = _train(tmp_path, "", tp=1, dp=16, name="dp16")
    (comm,) = decompose(w).communications
    at = rank_accelerators(view.g, w)
    dp = loads.route(view.wiring, comm, at, "tree", 0.0, "workload dp16")
    assert dp.load.algorithm.startswith("NCCL double binary tree")
    s = dp.bytes_per_rank
    pairs: dict[tuple[str, str], float] = {}
    for st in dp.stages:
        for a, b, x in zip(st.src, st.dst, st.bytes, strict=True):
            pairs[(a, b)] = pairs.get((a, b), 0.0) + x
    # Chain inside b000: gpu0 ← gpu1 ← … ← gpu7, S each way per edge; across: gpuI of b000 ↔ gpuI of b001.
    assert pairs[("b000/gpu1", "b000/gpu0")] == pairs[("b000/gpu0", "b000/gpu1")] == s
    assert ("b000/gpu0", "b000/gpu2") not in pairs
    assert pairs[("b000/gpu3", "b001/gpu3")] == pytest.approx(2 * s / 8 / 2)  # both trees' one edge
    # The estimate routes whatever the library runs: at these 140 GB per rank, not a tree.
    assert not _routed(view, w)["dp-all-reduce"].load.algorithm.startswith("NCCL double binary tree")


# ---- the revealing question follows the declared placement -------------------------------------------------


def _revealing(g, w):
    from fabricref.estimate.summaries import revealing
    from fabricref.estimate.view import View

    return revealing(View(g, 0.0, {"scale_up_domain_size": 8}), w)


def test_revealing_counts_the_domains_of_the_declared_placement_not_the_first_accelerators(built_registry, tmp_path):
    g = _tiny(built_registry)
    # TP 4 × DP 2 = 8 ranks. The first 8 accelerators are all of b0 (one domain), but the declaration puts
    # ranks 0–3 on b0/gpu0–3 and ranks 4–7 on b3/gpu0–3: the step joins 2 domains and does not fit in one.
    text = (
        "placement:\n  strategy: explicit\n  ranges:\n"
        "    - {first_rank: 0, ranks: 4, accelerator: 0}\n    - {first_rank: 4, ranks: 4, accelerator: b3/gpu0}\n"
    )
    explicit = _revealing(g, _train(tmp_path, text, tp=4, dp=2))
    assert explicit["accelerators_per_progress"] == 8
    assert (explicit["domains_spanned"], explicit["fits_in_one_domain"]) == (2, False)
    # The same job filling domains in order stays on b0.
    filled = _revealing(g, _train(tmp_path, tp=4, dp=2))
    assert (filled["domains_spanned"], filled["fits_in_one_domain"]) == (1, True)


def test_revealing_counts_a_decode_pool_placed_after_a_gap(built_registry, tmp_path):
    g = _tiny(built_registry)
    # Prefill TP 4 on ranks 0–3 (b0/gpu0–3), decode TP 4 from rank 8 (b1/gpu0–3): 8 accelerators in 2 domains,
    # where the first 8 accelerators (b0) would say 1.
    path = tmp_path / "serve.yaml"
    path.write_text(
        f"id: serve\ntitle: serving test\nkind: inference\n{MODEL}"
        "inference: {mode: disaggregated, prefill_tp: 4, decode_tp: 4, decode_pool_start: 8, prompt_tokens: 1024,"
        " output_tokens: 128}\n"
        "targets: [tiny-1to7]\n"
    )
    got = _revealing(g, load_workload(path))
    assert got["accelerators_per_progress"] == 8
    assert (got["domains_spanned"], got["fits_in_one_domain"]) == (2, False)


def test_accelerators_are_ordered_domain_by_domain_and_by_index():
    """ordered_accelerators: domains in topology order, members by index; a graph that gained a node says so."""
    import networkx as nx
    from fabricref.estimate.placement import ordered_accelerators

    g = nx.Graph()
    for domain, members in (("d1", (1, 0)), ("d0", (1, 0))):
        for i in members:
            g.add_node(f"{domain}-a{i}", kind="accelerator", domain=domain, index=i)
    g.add_node("sw", kind="switch")
    assert ordered_accelerators(g) == ["d1-a0", "d1-a1", "d0-a0", "d0-a1"]
    g.add_node("d0-a2", kind="accelerator", domain="d0", index=2)
    assert ordered_accelerators(g) == ["d1-a0", "d1-a1", "d0-a0", "d0-a1", "d0-a2"]


def test_an_estimate_at_an_offset_counts_the_domains_its_ranks_sit_on(built_registry, tmp_path):
    """A co-running job placed after another (offset) reports the domains of its own accelerators: TP 4 × DP 2
    from accelerator 4 sits on b0/gpu4–7 and b1/gpu0–3 (2 domains); the same job from accelerator 0 on b0 only."""
    from fabricref.estimate.traffic import estimate

    g = _tiny(built_registry)
    w = _train(tmp_path, tp=4, dp=2)
    view = _view(g)
    at = {off: estimate(built_registry, "tiny-1to7", w, off, view).revealing for off in (0, 4)}
    assert (at[0]["domains_spanned"], at[0]["fits_in_one_domain"]) == (1, True)
    assert (at[4]["domains_spanned"], at[4]["fits_in_one_domain"]) == (2, False)


def test_accelerator_domains_name_each_accelerator_s_domain_or_itself():
    """accelerator_domains: each accelerator's domain, itself when it names none; switches are not accelerators."""
    import networkx as nx
    from fabricref.estimate.routing import accelerator_domains

    g = nx.Graph()
    g.add_node("d0-a0", kind="accelerator", domain="d0", index=0)
    g.add_node("lone", kind="accelerator", index=0)  # no domain: its own
    g.add_node("sw", kind="switch", domain="d0")
    assert accelerator_domains(g) == {"d0-a0": "d0", "lone": "lone"}
    g.add_node("d1-a0", kind="accelerator", domain="d1", index=0)
    assert accelerator_domains(g) == {"d0-a0": "d0", "lone": "lone", "d1-a0": "d1"}
