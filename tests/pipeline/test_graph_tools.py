"""Graph exports carry what graph tools need (#31): `weight` (the link's rate per direction) and `compute_path`
on every edge, one workload's per-link bytes and time share as edge attributes (`export graph --workload`), and
a large cluster aggregated tier × pod (`--aggregate`). Every export is read back with networkx."""

from __future__ import annotations

import io
import json
from pathlib import Path

import duckdb
import networkx as nx
import pytest
from fabricref.core.graphs import load_topology
from fabricref.core.paths import Layout

FORMATS = ["graphml", "node-link"]
WORKLOAD = "llama8b-fsdp-dp64"  # laid by the traffic stage on illustrative-h100-4096 and meta-style-h100-24576


def _read(path: Path, fmt: str) -> nx.Graph:
    if fmt == "graphml":
        return nx.read_graphml(path)
    return nx.node_link_graph(json.loads(path.read_text()), edges="edges")


def _export(cli, tmp_path: Path, root: Path, tid: str, fmt: str, *extra: str) -> nx.Graph:
    out = tmp_path / f"{tid}.{fmt}"
    r = cli("export", "graph", tid, "--format", fmt, "--output", str(out), *extra, root=root)
    assert r.code == 0, r.err
    return _read(out, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("tid", ["nvidia-dgx-h100", "illustrative-h100-64"])
def test_every_edge_has_its_rate_per_direction_as_weight_and_a_compute_path_flag(built_registry, cli, tmp_path,
                                                                                 tid, fmt):  # fmt: skip
    back = _export(cli, tmp_path, built_registry.root, tid, fmt)
    networks = set()
    for _a, _b, d in back.edges(data=True):
        networks.add(d["network"])
        assert d["weight"] == d["bandwidth_gbps"] and d["direction"] == "per_direction"
        assert d["compute_path"] is (d["network"] not in ("frontend", "management"))
    assert ("frontend" in networks) is (tid != "nvidia-dgx-h100")  # a cluster has one: the case the flag is for


def test_a_shortest_path_over_compute_links_never_crosses_the_frontend(built_registry, cli, tmp_path):
    """Seen: a naive `nx.shortest_path` between two GPUs ran over the frontend network."""
    back = _export(cli, tmp_path, built_registry.root, "illustrative-h100-64", "graphml")
    gpus = [n for n, d in back.nodes(data=True) if d["kind"] == "accelerator"]
    compute = nx.subgraph_view(back, filter_edge=lambda a, b: back.edges[a, b]["compute_path"])
    path = nx.shortest_path(compute, gpus[0], gpus[-1])
    assert {back.nodes[n]["kind"] for n in path} >= {"accelerator", "nic", "leaf"}
    assert not any(back.nodes[n]["kind"] == "frontend_switch" for n in path)
    naive = nx.shortest_path(back, gpus[0], gpus[-1])
    assert any(back.nodes[n]["kind"] == "frontend_switch" for n in naive)  # what the flag prevents


def _traffic_bytes(shipped: Layout, tid: str, workload: str) -> float:
    """Σ over the workload's phases of each link's bytes both ways × the phase's count, from the tables."""
    traffic = shipped.registry_dir / "traffic"
    con = duckdb.connect()
    (total,) = con.execute(
        f"SELECT sum((l.bytes_forward + l.bytes_reverse) * t.count) FROM '{traffic / 'traffic_links.parquet'}' l "
        f"JOIN '{traffic / 'traffic.parquet'}' t USING (topology_id, workload_id, phase) "
        "WHERE topology_id = ? AND workload_id = ?",
        [tid, workload],
    ).fetchone()
    return total


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_workloads_bytes_and_time_share_are_edge_attributes(built_pipeline, cli, tmp_path, fmt):
    shipped = Layout(built_pipeline)  # a clone run through `dvc repro`: it has the traffic tables
    tid = "illustrative-h100-4096"
    back = _export(cli, tmp_path, shipped.root, tid, fmt, "--workload", WORKLOAD)
    assert back.graph["workload"] == WORKLOAD and back.graph["workload_seconds"] > 0
    edges = list(back.edges(data=True))
    assert all(
        d["workload_bytes"] == pytest.approx(d["workload_bytes_forward"] + d["workload_bytes_reverse"])
        and 0 <= d["workload_time_share"] <= 1
        for _a, _b, d in edges
    )
    assert sum(d["workload_bytes"] for *_, d in edges) == pytest.approx(_traffic_bytes(shipped, tid, WORKLOAD))
    busy = [d for *_, d in edges if d["workload_bytes"] > 0]
    assert busy and all(d["workload_time_share"] > 0 and d["compute_path"] for d in busy)
    assert not any(d["workload_bytes"] for *_, d in edges if d["network"] == "frontend")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_large_cluster_exports_aggregated_tier_by_pod(built_pipeline, cli, tmp_path, fmt):
    shipped = Layout(built_pipeline)
    """Seen: the 24,576-GPU GraphML was 143 MB and took 50 s to read; aggregated it is a few dozen nodes that
    keep every part, every link and every byte."""
    tid = "meta-style-h100-24576"
    back = _export(cli, tmp_path, shipped.root, tid, fmt, "--workload", WORKLOAD, "--aggregate")
    assert (tmp_path / f"{tid}.{fmt}").stat().st_size < 1_000_000
    full = load_topology(shipped, tid).graph
    assert back.number_of_nodes() < 500
    assert sum(d["parts"] for _n, d in back.nodes(data=True)) == full.number_of_nodes()
    for key, of in (("links", "links"), ("weight", "bandwidth_gbps")):  # (None where the registry has none)
        assert sum(d.get(key, 0) for *_, d in back.edges(data=True)) == pytest.approx(
            sum(d[of] or 0 for *_, d in full.edges(data=True))
        )
    assert sum(d["edges"] for *_, d in back.edges(data=True)) == full.number_of_edges()
    assert sum(d["workload_bytes"] for *_, d in back.edges(data=True)) == pytest.approx(
        _traffic_bytes(shipped, tid, WORKLOAD)
    )
    pods = {d["pod"] for _n, d in back.nodes(data=True) if "pod" in d}
    assert len(pods) == len({d["pod"] for _n, d in full.nodes(data=True) if "pod" in d}) > 1
    assert back.has_edge("pod0/leaf", "pod0/spine") and back.has_edge("pod0/nic-scale_out", "pod0/leaf")
    frontend = [d for a, b, d in back.edges(data=True) if d["network"] == "frontend"]
    assert frontend and not any(d["compute_path"] for d in frontend)


@pytest.mark.slow
def test_a_workload_the_traffic_stage_did_not_lay_there_is_bad_usage_naming_those_it_did(built_pipeline, cli):
    shipped = Layout(built_pipeline)
    r = cli("export", "graph", "nvidia-dgx-h100", "--workload", WORKLOAD, root=shipped.root)
    assert r.code == 2 and "llama70b-serve-aggregated" in r.err and WORKLOAD in r.err, r.err
    assert r.out == ""


def test_graphml_of_the_export_is_what_networkx_reads(built_registry):
    from fabricref.inspect.export import export_bytes, export_graph

    g = export_graph(built_registry, "nvidia-dgx-h100", aggregate=True)
    back = nx.read_graphml(io.BytesIO(export_bytes(g, "graphml")))
    assert sorted(back.nodes) == sorted(g.nodes) and back.number_of_edges() == g.number_of_edges()
