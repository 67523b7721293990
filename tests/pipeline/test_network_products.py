"""Switches and NICs as references of their own, and clusters that name their switch product.

Network products are discovered from models/references by form factor; the numbers checked here are worked by
hand from the transcribed vendor figures (ports x port speed, a split port's rate, a bidirectional total halved).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import form_factor, references_of
from fabricref.errors import CompileError, UsageError
from fabricref.inspect.query import rows
from fabricref.topology import stage

MODELS = Path(__file__).resolve().parents[2] / "models"


NETWORK_PRODUCTS = references_of("switch", "nic")
HELIOS_CLUSTER = "amd-helios-vulcano800-2tier-1152"


def test_the_network_products_are_there():
    # The list: Quantum-2, Quantum-X800, Spectrum-4, ConnectX-7/-8, BlueField-3, Tomahawk 5/6, Pollara, Vulcano.
    assert len(NETWORK_PRODUCTS) >= 10
    assert {"nvidia-qm9700", "broadcom-tomahawk-6", "amd-pensando-vulcano-800"} <= set(NETWORK_PRODUCTS)


def test_references_lists_each_network_product_with_its_form_factor(built_registry, cli):
    result = cli("references", "--json", root=built_registry.root)
    assert result.code == 0
    listed = {r["reference_id"]: r["form_factor"] for r in json.loads(result.out)}
    for ref in NETWORK_PRODUCTS:
        assert listed[ref] == form_factor(MODELS / "references" / f"{ref}.yaml")
    assert listed["nvidia-dgx-h100"] == "server"


def _field(lay, ref: str, key: str) -> dict:
    columns, found = rows(lay, "SELECT * FROM fields WHERE reference_id = ? AND field = ?", [ref, key])
    (row,) = found
    return dict(zip(columns, row, strict=True))


@pytest.mark.parametrize(
    ("ref", "key", "value", "unit", "direction", "status"),
    [
        # 64 ports x 400 Gb/s = 25.6 Tb/s per direction: the "51.2 Tb/s aggregate bidirectional" of the press.
        ("nvidia-qm9700", "switch.capacity", 25.6, "Tb/s", "per_direction", "derived"),
        ("nvidia-qm9700", "switch.port_speed", 400.0, "Gb/s", "per_direction", "published"),
        ("nvidia-qm9700", "switch.ports", 64.0, "count", None, "preliminary"),  # an NVIDIA engineer's commit
        # 64 x 800GbE = 51.2 Tb/s per direction.
        ("nvidia-sn5600", "switch.capacity", 51.2, "Tb/s", "per_direction", "derived"),
        ("nvidia-sn5600", "switch.ports", 64.0, "count", None, "published"),
        # Stated 51.2 Tbps, and 64 x 800 Gb/s = 51.2 Tb/s: the figure is per direction (press relay: preliminary).
        ("broadcom-tomahawk-5", "switch.capacity", 51.2, "Tb/s", "per_direction", "preliminary"),
        # "64 ports of 1.6TbE": 1.6 Tb/s = 1,600 Gb/s; 64 x 1.6 = 102.4 Tb/s per direction.
        ("broadcom-tomahawk-6", "switch.port_speed", 1600.0, "Gb/s", "per_direction", "preliminary"),
        ("broadcom-tomahawk-6", "switch.capacity", 102.4, "Tb/s", "per_direction", "preliminary"),
        ("nvidia-q3400", "switch.port_speed", 800.0, "Gb/s", "per_direction", "preliminary"),
        ("nvidia-connectx-7", "nic.speed", 400.0, "Gb/s", "per_direction", "published"),
        ("nvidia-connectx-8", "nic.speed", 800.0, "Gb/s", "per_direction", "published"),
        ("nvidia-bluefield-3", "nic.speed", 400.0, "Gb/s", "per_direction", "published"),
        ("amd-pensando-pollara-400", "nic.speed", 400.0, "Gb/s", "per_direction", "published"),
        ("amd-pensando-vulcano-800", "nic.speed", 800.0, "Gb/s", "per_direction", "preliminary"),
    ],
)
def test_hand_checked_figures(built_registry, ref, key, value, unit, direction, status):
    row = _field(built_registry, ref, key)
    assert row["value_number"] == pytest.approx(value)
    assert (row["unit"], row["direction"], row["status"]) == (unit, direction, status)


def test_a_figure_no_vendor_document_states_stays_unknown(built_registry):
    # 144 ports appear only in third-party pages read; the capacity that would follow stays unknown too.
    for key in ("switch.ports", "switch.capacity"):
        row = _field(built_registry, "nvidia-q3400", key)
        assert row["status"] == "unknown" and row["value_number"] is None and row["reason"]


@pytest.mark.parametrize("ref", NETWORK_PRODUCTS)
def test_a_network_product_has_no_system_topology(built_registry, cli, ref):
    with pytest.raises(UsageError, match="network product"):
        stage.build(built_registry, ref)
    result = cli("topology", ref, root=built_registry.root)
    assert result.code == 2 and "no system topology" in result.err
    built = set(json.loads((built_registry.registry_dir / "topology" / "summaries.json").read_text()))
    assert ref not in built


@pytest.fixture(scope="module")
def helios(built_registry):
    return stage.build(built_registry, HELIOS_CLUSTER)


def test_a_named_switch_sets_radix_and_port_speed_with_lineage(helios):
    g = helios
    # Tomahawk 6: 64 ports of 1.6 Tb/s, each split in 2: radix 128 at 800 Gb/s.
    assert (g.graph["switch_product"], g.graph["switch_radix"], g.graph["switch_port_gbps"]) == (
        "broadcom-tomahawk-6",
        128,
        800.0,
    )
    lineage = {x["field"]: x for x in json.loads(g.graph["switch_lineage"])}
    assert lineage["broadcom-tomahawk-6:switch.ports"]["value"] == 64
    assert lineage["broadcom-tomahawk-6:switch.port_speed"]["status"] == "preliminary"
    trunks = [d for a, b, d in g.edges(data=True) if {g.nodes[a]["kind"], g.nodes[b]["kind"]} == {"leaf", "spine"}]
    # 54 leaves x 32 spines, 2 links of 800 Gb/s each; the split is a design choice, so the link is assumed.
    assert len(trunks) == 54 * 32
    assert {(d["bandwidth_gbps"], d["links"], d["field"], d["status"]) for d in trunks} == {
        (1600.0, 2, "broadcom-tomahawk-6:switch.port_speed", "assumed")
    }


def test_the_helios_cluster_by_hand(helios):
    from fabricref.topology.summary import summarize

    s = summarize(helios)
    # 16 racks x 72 GPUs; 16 x 216 Vulcano NICs = 3,456 ports at 800 Gb/s; 3,456 / 64 = 54 leaves.
    assert s["accelerators"] == 1152 and s["scale_up_domains"] == 16 and s["scale_up_domain_size"] == 72
    assert s["nodes_by_kind"]["leaf"] == 54 and s["nodes_by_kind"]["spine"] == 32
    assert s["oversubscription"] == {"leaf": 1.0}
    assert s["bisection_bandwidth_gbps"] == pytest.approx(3456 * 800 / 2)
    assert s["switch"]["product"] == "broadcom-tomahawk-6" and s["switch"]["radix"] == 128
    # Scale-up (UALink over Ethernet) stays inside each rack: no scale-up link joins two racks.
    for a, b, d in helios.edges(data=True):
        if d["network"] == "scale_up":
            assert a.split("/", 1)[0] == b.split("/", 1)[0]


def test_the_illustrative_model_names_no_switch():
    text = (MODELS / "clusters" / "illustrative-h100-4096.yaml").read_text()
    assert "switch_product" not in text


def _variant(repo, edit) -> str:
    path = repo.root / "models" / "clusters" / f"{HELIOS_CLUSTER}.yaml"
    text = edit(path.read_text())
    (repo.root / "models" / "clusters" / "variant-cluster.yaml").write_text(
        text.replace(HELIOS_CLUSTER, "variant-cluster")
    )
    return "variant-cluster"


@pytest.fixture
def copy(built_registry, tmp_path):
    dest = tmp_path / "checkout"
    shutil.copytree(built_registry.root, dest, symlinks=True, ignore=shutil.ignore_patterns(".git", ".venv", "report"))
    from fabricref.core.paths import layout

    return layout(dest)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        # A declared radix that disagrees with the product's: 64 ports x split 2 = 128, not 64.
        (
            lambda t: t.replace("  switch_port_split: 2\n", "  switch_port_split: 2\n  switch_radix: 64\n"),
            r"variant-cluster\.yaml: at \$\.scale_out\.switch_radix: declares 64, but broadcom-tomahawk-6 has 64 "
            r"ports \(switch\.ports, preliminary\) × port split 2 = 128",
        ),
        # A NIC reference is not a switch.
        (
            lambda t: t.replace("switch_product: broadcom-tomahawk-6", "switch_product: nvidia-connectx-7"),
            r"at \$\.scale_out\.switch_product: nvidia-connectx-7 is a nic, not a switch",
        ),
        # A switch whose port count no vendor document states cannot set a radix.
        (
            lambda t: t.replace("switch_product: broadcom-tomahawk-6", "switch_product: nvidia-q3400"),
            r"at \$\.scale_out\.switch_product: nvidia-q3400's switch\.ports is unknown",
        ),
        # 800G NICs on Tomahawk 5 ports split to 400G would be faster than the port.
        (
            lambda t: t.replace("switch_product: broadcom-tomahawk-6", "switch_product: broadcom-tomahawk-5"),
            r"NICs run at 800 Gb/s, faster than broadcom-tomahawk-5's 400 Gb/s ports \(split in 2\)",
        ),
        (
            lambda t: t.replace("switch_product: broadcom-tomahawk-6", "switch_product: no-such-switch"),
            r"at \$\.scale_out\.switch_product: no reference 'no-such-switch'",
        ),
    ],
)
def test_a_bad_switch_product_is_an_error_naming_the_file_and_path(copy, edit, message):
    cid = _variant(copy, edit)
    with pytest.raises(CompileError, match=message):
        stage.build(copy, cid)


def test_a_port_split_needs_a_named_switch(copy):
    cid = _variant(copy, lambda t: t.replace("  switch_product: broadcom-tomahawk-6\n", ""))
    with pytest.raises(Exception, match="switch_port_split splits the ports of a named switch_product"):
        stage.build(copy, cid)


def test_a_link_on_a_named_switch_audits_to_that_switch(built_registry, helios):
    from fabricref.estimate.view import Lineage
    from fabricref.inspect.audit import audit

    g = helios
    trunk = next(d for a, b, d in g.edges(data=True) if {g.nodes[a]["kind"], g.nodes[b]["kind"]} == {"leaf", "spine"})
    endpoint = next(d for a, b, d in g.edges(data=True) if {g.nodes[a]["kind"], g.nodes[b]["kind"]} == {"nic", "leaf"})
    # A traffic figure on a trunk rests on the switch reference's field, not on the building block's.
    assert Lineage.of_edge(g.graph["reference"], trunk).reference_id == "broadcom-tomahawk-6"
    assert Lineage.of_edge(g.graph["reference"], trunk).field == "switch.port_speed"
    assert (Lineage.of_edge(g.graph["reference"], endpoint).reference_id, endpoint["field"]) == (
        "amd-helios",
        "scale_out.nic.speed",
    )
    result = audit(built_registry, "broadcom-tomahawk-6", "switch.port_speed")
    assert result["value"] == 1600 and result["status"] == "preliminary"
    assert result["provenance"][0]["source_id"] == "servethehome-broadcom-tomahawk6-launch"
