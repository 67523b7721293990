"""Collective algorithms, protocols and the calibration behind them: hand-computed costs, the choice per size,
the ring and NVLS tree across domains, provenance checks on the calibration file, and the topology-mode calculator."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fabricref.errors import UsageError, ValidationError
from fabricref.estimate.calibration import CALIBRATION_PATH, load_calibration, load_calibration_file, standalone_text
from fabricref.estimate.collectives import Shape, Tier, bus_factor, estimate, parametric

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
CAL = load_calibration(ROOT)
NVLINK4 = Tier("scale_up", "nvlink4", CAL.link_classes["nvlink4"], 450e9)
IB400 = Tier("scale_out", "infiniband", CAL.link_classes["infiniband"], 50e9)
ONE_DGX = Shape(8, 8, 1, NVLINK4, None, nvls=True, one_shot=True)
TWO_DGX = Shape(16, 8, 2, NVLINK4, IB400, nvls=True, one_shot=True)


def test_every_calibrated_number_names_its_provenance_and_status():
    numbers = CAL.numbers()
    assert len(numbers) > 40
    for path, n in numbers:
        assert n.status in ("published", "measured", "assumed"), path
        if n.status == "published":
            assert CAL.sources[n.source].url.startswith("https://"), path
        if n.status == "assumed":
            assert n.note, path
    # The statements the H100 figures rest on are quoted, not paraphrased away.
    assert "370GB/s" in CAL.sources["nccl-tests-issue-212"].statement
    assert CAL.link_classes["nvlink4"].efficiency.value == pytest.approx(370 / 450, abs=1e-3)


@pytest.mark.parametrize(
    ("needle", "replacement", "expected"),
    [
        ("value: 0.822\n      status: published", "value: 1.5\n      status: published", "fraction in (0, 1]"),
        (
            "      source: nccl-tests-issue-212\n      note: 370",
            "      note: 370",
            "source: as `published`: Field required",
        ),
        (
            "source: nccl-multinode-nic\n      note: >-",
            "source: no-such-source\n      note: >-",
            "not declared",
        ),
        ("status: published\n      source: nccl-tests-issue-212", "status: guessed\n      source: x", "guessed"),
    ],
)
def test_a_bad_calibration_is_refused_with_file_line_and_path(tmp_path, needle, replacement, expected):
    text = standalone_text(ROOT / CALIBRATION_PATH)  # the assumed numbers params.yaml sets written back in
    assert needle in text
    bad = tmp_path / "collectives.yaml"
    bad.write_text(text.replace(needle, replacement, 1))
    with pytest.raises(ValidationError) as err:
        load_calibration_file(bad)
    message = str(err.value)
    assert expected in message
    assert f"{bad}:" in message and "at $.link_classes." in message


def test_bus_factors_follow_nccl_tests_performance_md():
    assert bus_factor("all-reduce", 8) == pytest.approx(1.75)
    assert bus_factor("reduce-scatter", 8) == bus_factor("all-gather", 8) == bus_factor("all-to-all", 8) == 0.875
    assert bus_factor("broadcast", 8) == bus_factor("reduce", 8) == bus_factor("send", 2) == 1.0


def test_ring_simple_on_one_dgx_h100_by_hand():
    c = estimate(CAL, "all-reduce", ONE_DGX, GIB, "ring", "Simple")
    # base 8.4 us + 14 steps x 3.4 us; 2(n-1)/n S over 450 GB/s x 370/450 (~370 GB/s).
    latency = 8.4e-6 + 14 * 3.4e-6
    bandwidth = 1.75 * GIB / (450e9 * 0.822)
    assert c.latency_seconds == pytest.approx(latency)
    assert c.bandwidth_seconds == pytest.approx(bandwidth)
    assert c.busbw_gb_per_s == pytest.approx(1.75 * GIB / (latency + bandwidth) / 1e9)
    assert 360 < c.busbw_gb_per_s < 370
    assert c.confidence == "published"


def test_nvls_is_chosen_for_large_all_reduce_on_an_nvlink_switch_and_lands_near_480():
    c = estimate(CAL, "all-reduce", ONE_DGX, GIB)
    assert (c.algorithm, c.protocol) == ("nvls", "Simple")
    # S(n+1)/n per direction at 450 GB/s x 0.6875; latency 25 us.
    assert c.seconds == pytest.approx(25e-6 + GIB * 9 / 8 / (450e9 * 0.6875))
    assert c.busbw_gb_per_s == pytest.approx(478.2, abs=0.5)
    no_switch = Shape(8, 8, 1, NVLINK4, None, nvls=False, one_shot=True)
    assert estimate(CAL, "all-reduce", no_switch, GIB).algorithm == "ring"


def test_small_messages_choose_a_low_latency_algorithm_and_protocol():
    c = estimate(CAL, "all-reduce", ONE_DGX, 16384)
    assert c.protocol == "LL"
    assert c.algorithm == "one-shot"
    # base 5 us + one LL step 0.6 us + 7 x 16 KiB over 450 GB/s x 0.822 x 0.5
    assert c.seconds == pytest.approx(5e-6 + 0.6e-6 + 7 * 16384 / (450e9 * 0.822 * 0.5))
    assert c.confidence == "assumed"  # the one-shot base latency is an assumption
    ring = estimate(CAL, "all-reduce", ONE_DGX, 16384, "ring")
    assert ring.protocol == "LL"
    assert ring.latency_seconds == pytest.approx(6.6e-6 + 14 * 0.6e-6)
    assert [x["seconds"] for x in c.candidates] == sorted(x["seconds"] for x in c.candidates)


def test_a_ring_across_domains_is_nccl_s_flat_ring_with_its_legs_overlapped():
    c = estimate(CAL, "all-reduce", TWO_DGX, GIB, "ring", "Simple")
    # A flat ring of 16: every rank sends 2(n-1)/n S; each rank's NIC carries 1/8 of it, its NVLink the rest.
    wire = 2 * 15 / 16 * GIB
    up = wire * 7 / 8 / (450e9 * 0.822)
    out = wire / 8 / (50e9 * 0.94)
    chunks = GIB // 524288
    assert [s.network for s in c.stages] == ["scale_up", "scale_out"]
    assert c.bandwidth_seconds == pytest.approx(max(up, out) + min(up, out) / chunks)
    assert c.bandwidth_seconds < up + out
    # NCCL's step count: 2(n-1) steps, 2 x nodes of them across the network.
    assert c.latency_seconds == pytest.approx(8.4e-6 + 26 * 3.4e-6 + 4 * 14e-6)
    # The NIC bounds it: busbw / 8 NICs is within 15 % of nccl-tests issue 290's 46-48 GB/s per NIC, never above.
    assert 0.85 * 46 <= c.busbw_gb_per_s / 8 <= 50 * 0.94
    # A message no larger than one chunk cannot overlap: the stages add up.
    small = estimate(CAL, "all-reduce", TWO_DGX, 262144, "ring", "Simple")
    assert small.bandwidth_seconds == pytest.approx(sum(s.bandwidth_seconds for s in small.stages))


def test_nvls_tree_halves_its_network_bandwidth_above_two_nodes():
    # NCCL's tuning model: NVLS tree's network bandwidth is bwInter at <= 2 nodes, bwInter / 2 above.
    for domains, per_nic in ((2, GIB / 8), (4, 2 * GIB / 8), (8, 2 * GIB / 8)):
        f = Shape(8 * domains, 8, domains, NVLINK4, IB400, nvls=True, one_shot=True)
        c = estimate(CAL, "all-reduce", f, GIB, "nvls")
        assert [s.bytes_per_rank for s in c.stages if s.network == "scale_out"] == [pytest.approx(per_nic)]


def test_small_messages_across_domains_take_the_library_s_choices():
    c = estimate(CAL, "all-reduce", TWO_DGX, 16384)
    # NCCL's own tuning model: tree LL, 6.8 us + 2 x (7 NVLink steps x 0.6 us + 1 network level x 5.0 us), ahead of
    # the flat ring LL (6.6 us + 26 NVLink steps x 0.6 us + 4 network steps x 2.7 us).
    assert (c.algorithm, c.protocol) == ("tree", "LL")
    assert c.latency_seconds == pytest.approx(6.8e-6 + 2 * (7 * 0.6e-6 + 5.0e-6))
    ring = estimate(CAL, "all-reduce", TWO_DGX, 16384, "ring", "LL")
    assert ring.latency_seconds == pytest.approx(6.6e-6 + 26 * 0.6e-6 + 4 * 2.7e-6)
    assert "recursive-doubling" not in {x["algorithm"] for x in c.candidates}
    forced = estimate(CAL, "all-reduce", TWO_DGX, 16384, "recursive-doubling")
    assert forced.latency_seconds < c.latency_seconds  # available when asked for, never chosen by itself


def test_forcing_an_algorithm_that_cannot_run_is_bad_usage():
    with pytest.raises(UsageError, match="does not declare in-network reduction"):
        estimate(CAL, "all-reduce", TWO_DGX, GIB, "collnet")
    with pytest.raises(UsageError, match="not an algorithm for all-gather"):
        estimate(CAL, "all-gather", ONE_DGX, GIB, "nvls")
    with pytest.raises(UsageError, match="power-of-two"):
        estimate(CAL, "all-reduce", Shape(6, 6, 1, NVLINK4, None), GIB, "recursive-doubling")
    sharp = Shape(16, 8, 2, NVLINK4, IB400, collnet=True)
    c = estimate(CAL, "all-reduce", sharp, GIB, "collnet")
    assert c.stages[-1].bytes_per_rank == pytest.approx(GIB / 8)


def test_calculator_on_the_installed_wiring(built_registry, cli):
    root = built_registry.root
    r = cli(
        "estimate", "collective", "--topology", "nvidia-dgx-h100", "--ranks", "8", "--op", "all-reduce",
        "--bytes", "1GiB", "--algorithm", "ring", "--json", root=root,
    )  # fmt: skip
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert (d["algorithm"], d["protocol"]) == ("ring", "Simple")
    assert d["link_classes"] == {"scale_up": "fourth generation NVLink -> nvlink4"}
    assert d["busbw_gb_per_s"] == pytest.approx(d["algbw_gb_per_s"] * 1.75)
    assert 355 < d["busbw_gb_per_s"] < 370
    r = cli(
        "estimate", "collective", "--topology", "nvidia-dgx-h100", "--ranks", "8", "--op", "all-reduce",
        "--sweep", "8:1G", "--json", root=root,
    )  # fmt: skip
    assert r.code == 0, r.err
    rows = json.loads(r.out)["rows"]
    assert [x["bytes"] for x in rows] == [8 * 2**i for i in range(28)]
    assert set(rows[0]) >= {"bytes", "seconds", "algbw_gb_per_s", "busbw_gb_per_s", "algorithm", "protocol"}
    assert rows[0]["protocol"] == "LL" and rows[-1]["algorithm"] == "nvls"
    assert all(math.isclose(x["algbw_gb_per_s"], x["bytes"] / x["seconds"] / 1e9) for x in rows)
    bad = cli("estimate", "collective", "--topology", "nvidia-dgx-h100", "--ranks", "8", "--op", "all-reduce",
              "--bytes", "1GiB", "--algorithm", "collnet", root=root)  # fmt: skip
    assert bad.code == 2 and "SHARP" in bad.err


def test_sweep_draws_its_curve_deterministically(built_registry, cli, tmp_path):
    args = ["estimate", "collective", "--topology", "nvidia-dgx-h100", "--ranks", "8", "--op", "all-reduce"]
    svgs = []
    for name in ("a.svg", "b.svg"):
        r = cli(*args, "--sweep", "1K:1G", "--plot", str(tmp_path / name), root=built_registry.root)
        assert r.code == 0, r.err
        svgs.append((tmp_path / name).read_bytes())
    assert svgs[0] == svgs[1] and b"<svg" in svgs[0] and b"busbw" in svgs[0] and b"nvls / Simple" in svgs[0]
    r = cli(*args, "--bytes", "1G", "--plot", str(tmp_path / "c.svg"), root=built_registry.root)
    assert r.code == 2 and "--sweep" in r.err and not (tmp_path / "c.svg").exists()


def test_the_parametric_mode_costs_every_registered_algorithm_it_can_without_a_calibration():
    """The same cost functions at the bandwidth and per-step latency given: a ring of 8 by hand, the tree's log2
    steps and 2·S per rank, recursive doubling's log2(n) rounds of S, Bruck's ceil(log2 n) rounds of the blocks
    whose index has that bit set (4 of 7 blocks of S/8 per round at n = 8: 12/8 S), reduce at its bus factor 1."""
    bw, lat = 50e9, 5e-6
    ring = parametric("all-reduce", 8, GIB, bw, lat)
    assert (ring.steps, ring.latency_seconds) == (14, pytest.approx(14 * lat))
    assert ring.bandwidth_seconds == pytest.approx(1.75 * GIB / bw)
    tree = parametric("all-reduce", 8, GIB, bw, lat, algorithm="tree")
    assert (tree.steps, tree.bytes_on_wire_per_rank) == (6, pytest.approx(2 * GIB))
    rd = parametric("all-reduce", 8, 4096, bw, lat, algorithm="recursive-doubling")
    assert (rd.steps, rd.bytes_on_wire_per_rank, rd.latency_seconds) == (3, 3 * 4096, pytest.approx(3 * lat))
    bruck = parametric("all-to-all", 8, 8192, bw, lat, algorithm="bruck")
    assert (bruck.steps, bruck.bytes_on_wire_per_rank) == (3, pytest.approx(12 / 8 * 8192))
    assert parametric("all-to-all", 8, 8192, bw, lat).bytes_on_wire_per_rank == pytest.approx(7 / 8 * 8192)
    reduce = parametric("reduce", 8, GIB, bw, lat)
    assert (reduce.bytes_on_wire_per_rank, reduce.busbw_gb_per_s) == (GIB, pytest.approx(reduce.algbw_gb_per_s))
    with pytest.raises(UsageError, match="power-of-two"):
        parametric("all-reduce", 6, GIB, bw, lat, algorithm="recursive-doubling")
    with pytest.raises(UsageError, match="bruck is not an algorithm for all-reduce"):
        parametric("all-reduce", 8, GIB, bw, lat, algorithm="bruck")
    with pytest.raises(UsageError, match="needs the calibration"):
        parametric("all-reduce", 8, GIB, bw, lat, algorithm="nvls")


def test_bruck_is_refused_on_a_topology_without_calibrated_figures():
    with pytest.raises(UsageError, match="no entry for bruck"):
        estimate(CAL, "all-to-all", ONE_DGX, GIB, "bruck")
    assert estimate(CAL, "all-to-all", ONE_DGX, GIB).algorithm == "ring"  # never chosen by itself


def test_a_scale_up_technology_no_source_states_takes_the_assumed_generic_class():
    """The MI355X reference's scale-up technology is unknown: its collectives are costed on the generic class
    (every number assumed), not refused and not silently left on line rate."""
    name, lc = CAL.link_class("scale_up", "")
    assert name == "generic-scale-up" and lc.efficiency.status == "assumed"
    assert CAL.link_class("scale_up", "UALink")[0] == "generic-scale-up"
    assert CAL.link_class("scale_up", "fourth generation NVLink")[0] == "nvlink4"
