"""One confidence rule: ordering, weakest(), status → confidence; compile, topology and traffic all follow it.

Regression (issue 11, case 3): Helios's TP phases rest only on its scale-up bandwidth, derived from
preliminary figures, and were reported `published` because the traffic code mapped `derived` to `published`.
"""

from __future__ import annotations

from typing import get_args

import networkx as nx
import pytest
from conftest import db_rows
from fabricref.core import confidence
from fabricref.estimate import calculator
from fabricref.estimate.collectives import Estimate, Shape
from fabricref.estimate.cost import Cost, Phase
from fabricref.estimate.decompose import Communication, Part
from fabricref.estimate.traffic import estimate
from fabricref.estimate.view import Lineage
from fabricref.estimate.workloads import find_workload
from fabricref.formats.calibration import Number
from fabricref.formats.records import Confidence


def test_the_order_is_strongest_first():
    assert confidence.ORDER == ("published", "measured", "preliminary", "assumed", "unknown")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], "unknown"),
        (["published"], "published"),
        (["published", "published"], "published"),
        (["published", "preliminary", "published"], "preliminary"),
        (["preliminary", "assumed"], "assumed"),
        (["assumed", "published", "unknown"], "unknown"),
        (["published", "measured"], "measured"),
        (["measured", "preliminary"], "preliminary"),
    ],
)
def test_weakest(values, expected):
    assert confidence.weakest(values) == expected
    assert confidence.weakest(iter(values)) == expected  # any iterable, consumed once


def test_a_status_is_not_a_confidence():
    with pytest.raises(ValueError, match="'derived'"):
        confidence.weakest(["published", "derived"])
    with pytest.raises(ValueError, match="'estimated'"):
        confidence.of_status("estimated")


@pytest.mark.parametrize(
    ("status", "inputs", "expected"),
    [
        ("published", (), "published"),
        ("preliminary", (), "preliminary"),
        ("unknown", (), "unknown"),
        ("assumed", (), "assumed"),
        ("measured", (), "measured"),
        ("design-choice", (), "assumed"),
        ("derived", ("published", "published"), "published"),
        ("derived", ("published", "preliminary"), "preliminary"),
        ("derived", ("published", "assumed"), "assumed"),
        ("derived", ("preliminary", "unknown"), "unknown"),
        ("derived", (), "unknown"),
    ],
)
def test_confidence_follows_from_status(status, inputs, expected):
    assert confidence.of_status(status, inputs) == expected


def test_every_compiled_field_follows_the_rule(built_registry):
    """Each field's stored confidence: its status's, or for a derived field the weakest of its inputs'."""
    fields = {(r["reference_id"], r["field"]): r for r in db_rows(built_registry, "SELECT * FROM fields")}
    inputs: dict[tuple[str, str], list[str]] = {}
    for r in db_rows(built_registry, "SELECT * FROM field_inputs ORDER BY reference_id, field, position"):
        inputs.setdefault((r["reference_id"], r["field"]), []).append(r["input"])
    seen = set()
    for key, row in fields.items():
        given = [
            "assumed" if name.startswith("param.") else fields[(key[0], name)]["confidence"]
            for name in inputs.get(key, [])
        ]
        assert row["confidence"] == confidence.of_status(row["status"], given), key
        if row["status"] == "derived":
            seen.add(row["confidence"])
    # The shipped set exercises every branch of the derived rule that compile can reach.
    assert {"published", "preliminary", "assumed"} <= seen
    # Helios's 18 compute trays are derived from two press figures (72 GPUs, four per tray): preliminary.
    helios = fields[("amd-helios", "tray.compute.count")]
    assert (helios["status"], helios["confidence"]) == ("derived", "preliminary")


def test_topology_edges_carry_the_confidence_of_their_field(built_graph):
    g = built_graph("amd-helios")
    scale_up = [d for _, _, d in g.edges(data=True) if d["network"] == "scale_up"]
    assert scale_up
    assert {(d["field"], d["status"], d["confidence"]) for d in scale_up} == {
        ("scale_up.bandwidth_per_accelerator", "preliminary", "preliminary")
    }
    # A labelled assumption on the edge is `assumed` whatever field it leans on.
    host = [d for _, _, d in g.edges(data=True) if d["network"] == "host"]
    assert host and {(d["status"], d["confidence"]) for d in host} == {("assumed", "assumed")}
    # Every edge of every shipped topology obeys the rule; nothing is left without a confidence.
    for tid in ("nvidia-gb200-nvl72", "illustrative-h100-4096"):
        h: nx.Graph = built_graph(tid)
        for _, _, d in h.edges(data=True):
            assert d["confidence"] in confidence.ORDER
            if d["status"] != "derived":
                assert d["confidence"] == confidence.weakest([confidence.of_status(d["status"]), d["confidence"]])


def test_helios_tp_phases_rest_on_preliminary_wiring_and_assumed_calibration(built_registry):
    """Case 3: the only topology input is a preliminary field (stated in press coverage of AMD's slides); the
    UALink-over-Ethernet link has no calibrated class of its own, so the generic class's assumed efficiency makes
    the phase assumed."""
    r = estimate(built_registry, "amd-helios", find_workload(built_registry, "llama70b-serve-aggregated"))
    tp = [p for p in r.phases if p.phase.endswith("tp-all-reduce")]
    assert [p.phase for p in tp] == ["prefill-tp-all-reduce", "decode-tp-all-reduce"]
    for p in tp:
        assert p.confidence == "assumed"
        assert any(x["field"] == "link_classes.generic-scale-up.efficiency" for x in p.lineage_records())
        assert [x for x in p.lineage_records() if x["reference_id"] != "calibration"] == [
            {
                "reference_id": "amd-helios",
                "field": "scale_up.bandwidth_per_accelerator",
                "status": "preliminary",
                "confidence": "preliminary",
            }
        ]
    # The frontend phase rests on the assumed host link: the workload as a whole is as weak as that.
    assert r.confidence == "assumed"


def _phase(*lineage: tuple[str, str]) -> Phase:
    comm = Communication(
        phase="p", description="", collective="all-reduce", parts=(Part(((0, 1),), 1.0),), bytes_per_rank=1.0,
        count=1, concurrency=1,
    )  # fmt: skip
    cost = Cost(
        algorithm="ring", bytes_on_wire_per_rank=1.0, network="scale_up", tier="t", hops=1, bottleneck_gbps=1.0,
        effective_gbps=1.0, latency_s=0.0, bandwidth_s=1.0, queueing_s=0.0,
        lineage=frozenset(
            Lineage(reference_id="r", field=f"f{k}", status=s, confidence=c) for k, (s, c) in enumerate(lineage)
        ),
    )  # fmt: skip
    return Phase.of(comm, cost)


def test_a_phase_is_as_strong_as_its_weakest_input_confidence_never_its_status():
    assert _phase(("derived", "published"), ("published", "published")).confidence == "published"
    assert _phase(("derived", "published"), ("derived", "preliminary")).confidence == "preliminary"
    assert _phase(("derived", "published"), ("assumed", "assumed")).confidence == "assumed"
    assert _phase(("published", "published"), ("unknown", "unknown")).confidence == "unknown"
    assert _phase().confidence == "unknown"  # resting on nothing is not published


def test_a_phase_on_published_fields_is_published(built_registry):
    """Published wiring and published calibration numbers only (NVLink 4, NVLS at a large message)."""
    r = estimate(built_registry, "nvidia-dgx-h100", find_workload(built_registry, "llama70b-serve-aggregated"))
    tp = next(p for p in r.phases if p.phase == "prefill-tp-all-reduce")
    assert {(x.status, x.confidence) for x in tp.lineage} == {("published", "published")}
    assert {x.reference_id for x in tp.lineage} == {"nvidia-dgx-h100", "calibration"}
    assert tp.confidence == "published"


def test_the_field_format_allows_exactly_the_confidences_a_field_can_have():
    """A field record is never `measured` (that is a calibration number's); every other confidence it may be."""
    assert set(get_args(Confidence)) == set(confidence.ORDER) - {"measured"}


def test_the_collective_calculator_takes_a_derived_figure_at_its_inputs_confidence():
    """The same bug as case 3 in `estimate collective --topology`: a derived topology figure was `published`."""
    used = [("algorithms.ring.base_latency_us.Simple", Number(value=8.4, status="published", source="nccl"))]
    cost = Estimate(
        op="all-reduce", algorithm="ring", protocol="Simple", ranks=8, bytes=1.0, latency_seconds=1.0,
        bandwidth_seconds=1.0, bytes_on_wire_per_rank=1.0, steps=14, stages=[], assumptions=[], used=used,
    )  # fmt: skip
    helios = Lineage(
        reference_id="amd-helios",
        field="scale_up.bandwidth_per_accelerator",
        status="derived",
        confidence="preliminary",
    )
    shape = Shape(1, 1, 1, None, None, lineage=frozenset({helios}))
    assert cost.confidence == "published"
    assert calculator.confidence(cost, shape) == "preliminary"
    measured = Number(value=0.8, status="measured", measured_sha256="0" * 64)
    cost.used.append(("link_classes.nvlink4.efficiency", measured))
    assert cost.confidence == "measured"


def test_the_step_estimate_names_its_accelerator_fields_with_their_confidence(built_registry):
    from fabricref.estimate.traffic import step_estimate

    w = find_workload(built_registry, "llama70b-serve-aggregated")
    fields = step_estimate(built_registry, "amd-helios", w, 0.4)["accelerator_fields"]
    memory = next(f for f in fields if f["field"] == "accelerator.memory")
    assert memory == {
        "reference_id": "amd-helios",
        "field": "accelerator.memory",
        "status": "preliminary",
        "confidence": "preliminary",
    }
    assert all(f["confidence"] in confidence.ORDER for f in fields)
