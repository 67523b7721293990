"""The modelled AMD MI355X cluster: a design of this project, labelled as such, that a workload can be laid on."""

from __future__ import annotations

import pytest
from conftest import ROOT
from fabricref.core.schemas import load_model, load_yaml
from fabricref.errors import ValidationError
from fabricref.formats.cluster import ClusterFile
from fabricref.topology.summary import summarize

CLUSTER = "amd-mi355x-pollara400-2tier-1024"


def test_the_amd_cluster_is_a_labelled_modelled_design_on_rocev2():
    data, _ = load_yaml(ROOT / "models" / "clusters" / f"{CLUSTER}.yaml")
    model = load_model(ClusterFile, data, "cluster.schema.json", ROOT / "models" / "clusters" / f"{CLUSTER}.yaml")
    assert model.kind == "modelled-design" and model.building_block == "amd-mi355x-pollara400"
    named = {a.name: a.value for a in model.assumptions}
    assert named["scale-out protocol"].startswith("RoCEv2") and "RoCEv2" in model.scale_out.protocol


def test_a_modelled_design_without_assumptions_is_refused(tmp_path):
    path = ROOT / "models" / "clusters" / f"{CLUSTER}.yaml"
    data, _ = load_yaml(path)
    data["assumptions"] = []
    with pytest.raises(ValidationError, match="lists its design choices under `assumptions`"):
        load_model(ClusterFile, data, "cluster.schema.json", tmp_path / f"{CLUSTER}.yaml")


def test_the_amd_cluster_hand_sums(built_graph):
    s = summarize(built_graph(CLUSTER))
    assert s["accelerators"] == 128 * 8 and s["scale_up_domain_size"] == 8 and s["scale_up_domains"] == 128
    # 1,024 Pollara 400 endpoints on 32-down leaves: 32 leaves; 32 uplinks per leaf over 16 spines (trunks of 2).
    assert s["nodes_by_kind"]["leaf"] == 32 and s["nodes_by_kind"]["spine"] == 16
    assert s["oversubscription"] == {"leaf": 1.0}
    assert s["bisection_bandwidth_gbps"] == pytest.approx(1024 * 400 / 2)
    assert s["per_accelerator"]["scale_out_gbps"] == 400.0
    assert s["scale_out_protocol"].startswith("RoCEv2")
