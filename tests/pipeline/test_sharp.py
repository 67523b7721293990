"""InfiniBand SHARP (NCCL's CollNet): a cluster declares it on its scale-out fabric, with a source or a labelled
assumption; the topology stage carries the declaration into the graph; the collectives consider CollNet exactly
when it is declared."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from fabricref.core.paths import Layout
from fabricref.errors import ValidationError
from fabricref.estimate.calculator import place
from fabricref.estimate.calibration import load_calibration
from fabricref.estimate.view import View
from fabricref.topology.clusters import load_cluster
from fabricref.topology.stage import build
from fabricref.topology.summary import summarize

ROOT = Path(__file__).resolve().parents[2]
CLUSTERS = sorted((ROOT / "models" / "clusters").glob("*.yaml"))
# 64 DGX H100 (512 GPUs, one 400G NIC per GPU on eight rails) on a two-tier non-blocking InfiniBand fabric.
SMALL = {
    "id": "sharp-test",
    "title": "Test cluster: 64 DGX H100 on a two-tier InfiniBand fabric",
    "kind": "illustrative",
    "building_block": "nvidia-dgx-h100",
    "building_blocks": 64,
    "scale_out": {
        "protocol": "InfiniBand NDR",
        "tiers": 2,
        "rail_optimized": True,
        "leaf_down_ports": 32,
        "leaf_up_ports": 32,
        "leaves_per_pod": 16,
        "spines_per_pod": 16,
    },
    "frontend": {"blocks_per_switch": 32},
}
ASSUMED = {"kind": "sharp", "assumed": "a test fixture: no document states SHARP for this cluster"}


def _write(root: Path, cid: str, sharp: dict | None) -> Path:
    data = json.loads(json.dumps(SMALL))
    data["id"] = cid
    if sharp is not None:
        data["scale_out"]["in_network_reduction"] = sharp
    path = root / "models" / "clusters" / f"{cid}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _no_params(reference_id: str) -> dict:
    return {}


@pytest.mark.parametrize(
    ("sharp", "expected"),
    [
        ({"kind": "sharp"}, "source or assumed"),
        ({**ASSUMED, "source": {"url": "https://example.org/x", "states": "SHARP"}}, "source or assumed"),
        ({"kind": "nvls", "assumed": "nvls is not a scale-out in-network reduction"}, "kind"),
        ("sharp", "in_network_reduction"),
    ],
)
def test_a_sharp_declaration_needs_exactly_one_label(tmp_path, sharp, expected):
    (tmp_path / "models" / "clusters").mkdir(parents=True)
    path = _write(tmp_path, "sharp-test", sharp)
    with pytest.raises(ValidationError, match=expected) as err:
        load_cluster(path, _no_params)
    assert "sharp-test.yaml" in str(err.value)


@pytest.mark.parametrize("path", CLUSTERS, ids=lambda p: p.stem)
def test_no_shipped_cluster_claims_sharp_without_a_source(path):
    """SHARP is declared only where a document says so (or as a labelled assumption): none of the shipped clusters
    is, today; a new declaration must carry its label."""
    data = yaml.safe_load(path.read_text())
    sharp = data["scale_out"].get("in_network_reduction")
    assert sharp is None or ("source" in sharp) != ("assumed" in sharp)


@pytest.fixture(scope="module")
def sharp_repo(built_registry: Layout, tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """A copy of the built registry whose clusters are the two test clusters only: `topology --all` there builds
    the references and these two, not the shipped clusters again (the 24,576-GPU one alone takes seconds); the
    shipped ones are read where they were built, in the shared registry."""
    root = tmp_path_factory.mktemp("sharp") / "repo"
    shutil.copytree(built_registry.root, root, ignore=shutil.ignore_patterns(".venv", ".git"))
    for shipped in (root / "models" / "clusters").glob("*.yaml"):
        shipped.unlink()
    _write(root, "sharp-test", ASSUMED)
    _write(root, "no-sharp-test", None)
    return Layout(root)


def _view(lay: Layout, cid: str) -> View:
    g = build(lay, cid)
    view = View(g, 0.0, summarize(g))
    view.calibration = load_calibration(lay.root)
    return view


def test_the_declaration_reaches_the_graph_and_the_shape(sharp_repo):
    view = _view(sharp_repo, "sharp-test")
    assert view.g.graph["scale_out_in_network_reduction"] == "sharp"
    assert view.g.graph["scale_out_in_network_reduction_basis"].startswith("assumed: a test fixture")
    assert place(view, view.calibration, 512, technology="fourth generation NVLink").collnet
    plain = _view(sharp_repo, "no-sharp-test")
    assert "scale_out_in_network_reduction" not in plain.g.graph
    assert not place(plain, plain.calibration, 512, technology="fourth generation NVLink").collnet


@pytest.mark.slow
def test_collnet_is_chosen_when_declared_and_never_otherwise(sharp_repo, built_registry, cli):
    """Through the topology stage's tables: at 512 ranks (64 domains of 8) a 4 MiB all-reduce is latency-bound;
    CollNet's one in-fabric reduction (30 us) beats the NVLS tree's 2 x 6 network steps (18 us each)."""
    root = sharp_repo.root
    assert cli("topology", "--all", root=root).code == 0
    args = ("estimate", "collective", "--op", "all-reduce", "--ranks", "512", "--bytes", "4MiB", "--json")
    sharp = json.loads(cli(*args, "--topology", "sharp-test", root=root).out)
    assert (sharp["algorithm"], sharp["protocol"]) == ("collnet", "Simple")
    assert any("SHARP" in a and "assumed: a test fixture" in a for a in sharp["assumptions"])
    assert sharp["confidence"] == "assumed"
    plain = cli(*args, "--topology", "no-sharp-test", root=root)
    assert plain.code == 0, plain.err
    d = json.loads(plain.out)
    assert d["algorithm"] != "collnet" and "collnet" not in {c["algorithm"] for c in d["candidates"]}
    forced = cli(*args, "--topology", "no-sharp-test", "--algorithm", "collnet", root=root)
    assert forced.code == 2 and "does not declare in-network reduction" in forced.err
    # Every shipped topology: CollNet is never a candidate (none declares SHARP).
    for cluster in CLUSTERS:
        ranks = "16"
        r = cli("estimate", "collective", "--op", "all-reduce", "--ranks", ranks, "--bytes", "4MiB", "--json",
                "--topology", cluster.stem, root=built_registry.root)  # fmt: skip
        assert r.code == 0, r.err
        assert "collnet" not in {c["algorithm"] for c in json.loads(r.out)["candidates"]}, cluster.stem
