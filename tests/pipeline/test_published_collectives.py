"""The collective model against published multi-node NCCL results (tests/fixtures/nccl/published-multinode.yaml):
busbw within ±15 % at large sizes and time within 2× at small ones — the tolerances test_measured.py holds the model
to against the pinned logs — and the per-NIC bandwidth a ring across nodes reaches never above the NIC's rate."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fabricref.estimate.calibration import load_calibration
from fabricref.estimate.collectives import Shape, Tier, estimate

ROOT = Path(__file__).resolve().parents[2]
CAL = load_calibration(ROOT)
CASES = yaml.safe_load((ROOT / "tests" / "fixtures" / "nccl" / "published-multinode.yaml").read_text())["cases"]
NIC_BYTES_PER_S = 50e9  # one 400G NIC per GPU, per direction
GPUS = 8  # per node, on one NVLink 4 switch


def _shape(nodes: int, fabric: str, nvls: bool) -> Shape:
    up = Tier("scale_up", "nvlink4", CAL.link_classes["nvlink4"], 450e9)
    out = Tier("scale_out", fabric, CAL.link_classes[fabric], NIC_BYTES_PER_S) if nodes > 1 else None
    return Shape(GPUS * nodes, GPUS, nodes, up, out, nvls=nvls, one_shot=True)


def _model(case: dict):
    return estimate(CAL, "all-reduce", _shape(case["nodes"], case["fabric"], case["nvls"]), case["bytes"],
                    case.get("algorithm"))  # fmt: skip


def test_every_case_names_its_public_source_and_what_was_measured():
    assert len(CASES) >= 8
    for case in CASES:
        assert case["url"].startswith("https://github.com/NVIDIA/nccl"), case["id"]
        assert case["statement"], case["id"]
        assert {"busbw_gb_per_s", "per_nic_busbw_gb_per_s", "seconds"} & set(case), case["id"]
    nodes = {c["nodes"] for c in CASES if "busbw_gb_per_s" in c}
    assert {1, 2, 4} <= nodes


def _ids(kind: str) -> list:
    return [pytest.param(c, id=c["id"]) for c in CASES if kind in c]


def _number(path: str):
    node = CAL
    for part in path.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part.replace("-", "_"))
    return node


def test_a_case_the_calibration_takes_a_number_from_is_its_cited_source_and_the_rest_are_checks():
    """`calibrates` names the number a case sets: that number cites the case's URL and states its figure, and it
    is set from that one case (other cases of the same report are checks: other node counts or NVLS settings)."""
    calibrating = [c for c in CASES if c.get("calibrates")]
    assert {c["calibrates"] for c in calibrating} == {
        "link_classes.infiniband.efficiency",
        "link_classes.roce-ethernet.efficiency",
    }
    for case in calibrating:
        number = _number(case["calibrates"])
        assert number.status == "published", case["id"]
        source = CAL.sources[number.source]
        assert source.url == case["url"], case["id"]
        figure = case.get("busbw_gb_per_s") or case["per_nic_busbw_gb_per_s"][0]
        assert f"{figure}" in source.statement, (case["id"], source.statement)
        assert [c["id"] for c in calibrating if c["calibrates"] == case["calibrates"]] == [case["id"]]


@pytest.mark.parametrize("case", _ids("busbw_gb_per_s"))
def test_large_all_reduce_busbw_within_15_percent_of_the_published_figure(case):
    ratio = _model(case).busbw_gb_per_s / case["busbw_gb_per_s"]
    assert 0.85 <= ratio <= 1.15, (case["id"], ratio)


@pytest.mark.parametrize("case", _ids("per_nic_busbw_gb_per_s"))
def test_forced_ring_per_nic_busbw_matches_the_maintainer_figure(case):
    c = _model(case)
    per_nic = c.busbw_gb_per_s / GPUS
    low, high = case["per_nic_busbw_gb_per_s"]
    assert 0.85 * low <= per_nic <= 1.15 * high, (case["id"], per_nic)
    assert per_nic <= NIC_BYTES_PER_S / 1e9


@pytest.mark.parametrize("case", _ids("seconds"))
def test_two_node_small_message_latency_within_2x_of_the_published_time(case):
    c = _model(case)
    low, high = case["seconds"]
    assert (c.algorithm, c.protocol) == (case["algorithm"], "Simple")
    assert 0.5 * low <= c.seconds <= 2.0 * high, (case["id"], c.seconds)


@pytest.mark.parametrize("fabric", ["infiniband", "roce-ethernet"])
@pytest.mark.parametrize("op", ["all-reduce", "reduce-scatter", "all-gather"])
def test_a_ring_across_nodes_never_moves_more_per_nic_than_the_nic_carries(fabric, op):
    """busbw ÷ NICs per node is what each NIC sustains in a flat ring (nccl-tests issue 290's "per NIC"): at most
    the NIC's rate × the link class efficiency, at every node count; and the network leg's bytes per NIC are
    1/GPUS of what every rank sends around the ring."""
    eff = CAL.link_classes[fabric].efficiency.value
    for nodes in (2, 3, 4, 8, 16, 64):
        c = estimate(CAL, op, _shape(nodes, fabric, nvls=False), 4 << 30, "ring", "Simple")
        n = GPUS * nodes
        wire = (2 if op == "all-reduce" else 1) * (n - 1) / n * (4 << 30)
        (net,) = [s for s in c.stages if s.network == "scale_out"]
        assert net.bytes_per_rank == pytest.approx(wire / GPUS)
        assert c.busbw_gb_per_s / GPUS <= NIC_BYTES_PER_S * eff / 1e9 * (1 + 1e-9), (op, nodes)
        assert net.bytes_per_rank / c.bandwidth_seconds <= NIC_BYTES_PER_S * eff * (1 + 1e-9)
