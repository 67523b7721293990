"""Topologies: parts are separate concepts, domains hold, networks stay apart, clusters match hand sums."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import networkx as nx
import pytest
from conftest import CLUSTERS, SYSTEM_REFERENCES, in_fast_tier
from fabricref.core.graphs import TOPOLOGY_TABLES
from fabricref.inspect.export import export_bytes, graph_bytes
from fabricref.topology.facts import load_facts
from fabricref.topology.summary import summarize

REFERENCES = SYSTEM_REFERENCES


class _Graphs:
    """`graphs[id]`: a reference's or cluster's graph from the session's `built_graph`."""

    def __init__(self, get: Callable[[str], nx.Graph]) -> None:
        self._get = get

    def __getitem__(self, topology_id: str) -> nx.Graph:
        return self._get(topology_id)


@pytest.fixture(scope="module")
def graphs(built_graph) -> _Graphs:
    """Each graph built when a test first reads it, not all of them up front: an xdist worker builds only the
    ones its share of the tests reads (the 24,576-GPU cluster alone takes ~0.5 CPU s)."""
    return _Graphs(built_graph)


@pytest.fixture(scope="module")
def smallest_cluster(built_registry) -> str:
    """The shipped cluster with the fewest links, as the session's topology build summarised it (discovered from
    models/, not named), found without building every cluster."""
    summaries = json.loads((built_registry.registry_dir / "topology" / "summaries.json").read_text())
    return min(CLUSTERS, key=lambda c: (sum(summaries[c]["edges_by_network"].values()), c))


def kinds(g: nx.Graph, kind: str, role: str | None = None) -> list[str]:
    return [n for n, d in g.nodes(data=True) if d["kind"] == kind and (role is None or d.get("role") == role)]


@pytest.mark.parametrize("ref", REFERENCES)
def test_reference_counts_equal_the_registry(built_registry, graphs, ref):
    g, facts = graphs[ref], load_facts(built_registry, ref)
    assert len(kinds(g, "accelerator")) == facts.count("accelerator.count")
    assert len(kinds(g, "cpu")) == facts.count("cpu.count")
    assert len(kinds(g, "nic", "scale_out")) == facts.count("scale_out.nic.count")
    assert len(kinds(g, "nic", "frontend")) == facts.count("frontend.nic.count")
    if facts.form_factor == "rack":
        assert len(kinds(g, "tray", "compute")) == facts.count("tray.compute.count")
        assert len(kinds(g, "tray", "switch")) == facts.count("tray.switch.count")
    else:
        assert len(kinds(g, "scale_up_switch")) == facts.count("scale_up.switch.count")


def test_known_shapes(graphs):
    assert summarize(graphs["nvidia-dgx-h100"])["scale_up_domain_size"] == 8
    assert len(kinds(graphs["nvidia-dgx-h100"], "scale_up_switch")) == 4
    assert summarize(graphs["nvidia-gb200-nvl72"])["scale_up_domain_size"] == 72
    assert len(kinds(graphs["nvidia-gb200-nvl72"], "tray", "compute")) == 18
    assert summarize(graphs["amd-helios"])["scale_up_domain_size"] == 72
    mi300 = graphs["amd-mi300x-pollara400"]
    assert not kinds(mi300, "scale_up_switch")
    assert sum(1 for *_, d in mi300.edges(data=True) if d["network"] == "scale_up") == 28  # full mesh of 8


# Every link is walked in Python: the 24,576-GPU cluster's ~234,000 in the whole suite (its hand sums are in the
# fast tier), every other topology's in the fast tier too.
@pytest.mark.parametrize("tid", in_fast_tier(*REFERENCES, *CLUSTERS, slow=("meta-style-h100-24576",)))
def test_domains_and_networks_stay_apart(graphs, tid):
    g = graphs[tid]
    gpus = kinds(g, "accelerator")
    assert all(g.nodes[n].get("domain") for n in gpus)  # every accelerator in exactly one domain (one attribute)
    for a, b, d in g.edges(data=True):
        ka, kb = g.nodes[a]["kind"], g.nodes[b]["kind"]
        if d["network"] == "scale_up":
            assert g.nodes[a]["domain"] == g.nodes[b]["domain"]  # no scale-up link crosses domains
            assert {ka, kb} <= {"accelerator", "scale_up_switch"}
        if d["network"] == "frontend":
            assert "accelerator" not in (ka, kb)  # the frontend never touches an accelerator directly
        if d["network"] == "scale_out":
            assert "accelerator" not in (ka, kb) and "cpu" not in (ka, kb)
    # The frontend reaches accelerators only through a host: frontend NICs hang off CPUs.
    for nic in kinds(g, "nic", "frontend"):
        hosts = {g.nodes[m]["kind"] for m, d in g[nic].items() if d["network"] == "host"}
        assert hosts == {"cpu"}
    # Two accelerators of one domain are joined by scale-up links alone.
    domain = g.nodes[gpus[0]]["domain"]
    same = [n for n in gpus if g.nodes[n]["domain"] == domain]
    view = nx.subgraph_view(g, filter_edge=lambda a, b: g[a][b]["network"] == "scale_up")
    assert nx.has_path(view, same[0], same[-1])
    # Containment is a relation (an attribute), never a link.
    assert all(g.nodes[n]["kind"] not in ("system", "tray") for e in g.edges for n in e)


def test_illustrative_cluster_matches_its_registry_fields_and_hand_sums(built_registry, graphs):
    g = graphs["illustrative-h100-4096"]
    s = summarize(g)
    facts = load_facts(built_registry, "illustrative-h100-4096")
    assert s["nodes_by_kind"]["leaf"] == facts.count("fabric.leaf.count") == 128
    assert s["nodes_by_kind"]["spine"] == facts.count("fabric.spine.count") == 128
    assert s["nodes_by_kind"]["core"] == facts.count("fabric.core.count") == 64
    assert s["accelerators"] == facts.count("cluster.accelerators") == 4096
    assert s["oversubscription"] == {"leaf": 1.0, "spine": 1.0}
    # 4,096 endpoints × 400 Gb/s / 2, non-blocking at every tier.
    assert (
        s["bisection_bandwidth_gbps"]
        == pytest.approx(4096 * 400 / 2)
        == facts.get("fabric.bisection_bandwidth").value * 1000
    )
    assert s["hops"]["within_domain_max"] == 2 and s["hops"]["across_fabric"] == 8
    # Rail-optimized: every leaf serves one rail only.
    for leaf in kinds(g, "leaf")[:16]:
        rails = {g.nodes[n]["rail"] for n in g[leaf] if g.nodes[n]["kind"] == "nic"}
        assert len(rails) == 1


def test_meta_style_cluster_hand_sums(graphs):
    g = graphs["meta-style-h100-24576"]
    s = summarize(g)
    assert s["accelerators"] == 24576 and s["scale_up_domain_size"] == 8 and s["scale_up_domains"] == 3072
    assert s["nodes_by_kind"]["leaf"] == 1536  # one ToR per rack of 16 GPUs
    assert g.graph["pods"] == 8  # 8 pods of 3,072 GPUs
    assert s["oversubscription"] == {"leaf": 1.0, "spine": 7.0}  # full bisection in the pod, 1:7 above it
    # Endpoints: 24,576 × 400 Gb/s = 9,830.4 Tb/s; the aggregation layer carries 1/7 of it; bisection is half.
    assert s["bisection_bandwidth_gbps"] == pytest.approx(24576 * 400 / 7 / 2)
    # Not rail-optimized: a ToR serves the 16 NICs of its own rack (two servers).
    leaf = kinds(g, "leaf")[0]
    blocks = {g.nodes[n]["block"] for n in g[leaf] if g.nodes[n]["kind"] == "nic"}
    assert blocks == {0, 1}
    racks = {g.nodes[f"b{b:04d}/system"]["within"] for b in blocks}
    assert racks == {"rack0000"}


def test_the_stage_writes_the_tables_and_summaries_only(built_registry):
    """GraphML and node-link JSON are written on demand (`fabricref export graph`), not by the stage: its tables,
    each with its recorded SHA-256, summaries.json and the defaults it built with (defaults.json)."""
    names = sorted(p.name for p in (built_registry.registry_dir / "topology").iterdir())
    tables = [f"{t}.parquet{suffix}" for t in TOPOLOGY_TABLES for suffix in ("", ".sha256")]
    assert names == sorted(["summaries.json", "defaults.json", *tables])


def test_an_export_is_byte_identical_from_run_to_run_and_reads_back_typed(built_registry):
    """From the registry's tables: two exports give the same bytes, and networkx reads both formats back with
    typed attributes (a per-direction bandwidth in Gb/s a float, a link count an int, `assumed` a bool)."""
    tid = "nvidia-gb200-nvl72"
    graphml = graph_bytes(built_registry, tid)
    node_link = graph_bytes(built_registry, tid, "node-link")
    assert graph_bytes(built_registry, tid) == graphml and graph_bytes(built_registry, tid, "node-link") == node_link
    data = json.loads(node_link)
    link = next(e for e in data["edges"] if e["network"] == "scale_up")
    assert link["unit"] == "Gb/s" and link["direction"] == "per_direction" and link["field"] and link["status"]
    from_graphml = nx.read_graphml(io.BytesIO(graphml))
    assert from_graphml.number_of_nodes() == len(data["nodes"]) and from_graphml.graph["topology_id"] == tid
    *_, d = next(e for e in from_graphml.edges(data=True) if e[2]["network"] == "scale_up")
    assert (type(d["bandwidth_gbps"]), type(d["links"]), type(d["latency_ns"])) == (float, int, float)
    assert all(type(v) is bool for _, v in from_graphml.nodes(data="assumed") if v is not None)
    text = graphml.decode()
    assert 'attr.name="bandwidth_gbps" attr.type="double"' in text and 'attr.name="links" attr.type="long"' in text
    assert "None" not in text


def test_export_graph_writes_a_file_or_standard_output_and_refuses_what_it_cannot_do(built_registry, cli, tmp_path):
    tid = "nvidia-dgx-h100"
    target = tmp_path / "h100.json"
    done = cli("export", "graph", tid, "--format", "node-link", "--output", str(target), root=built_registry.root)
    assert done.code == 0 and target.read_bytes() == graph_bytes(built_registry, tid, "node-link")
    assert nx.node_link_graph(json.loads(target.read_text()), edges="edges").number_of_nodes() > 0
    bad = cli("export", "graph", tid, "--format", "gexf", root=built_registry.root)
    assert bad.code == 2 and "expected one of graphml, node-link" in bad.err
    unknown = cli("export", "graph", "nvidia-dgx-h10", root=built_registry.root)
    assert unknown.code == 2 and "nvidia-dgx-h100" in unknown.err  # the closest ids


def test_awkward_text_is_escaped_by_the_library_encoders():
    """Quotes, <, &, newlines and non-ASCII in ids, attributes and the graph's title read back as written."""
    g = nx.Graph(topology_id='t"<&>', title="a\nb")
    odd = ['n"1', "n<2>&", "plain", "ü\t'x"]
    for i, n in enumerate(odd):
        g.add_node(n, kind="nic", label=f"label {n}", index=i, pod=None)
    shared = {"network": "scale_out", "bandwidth_gbps": 400.0, "unit": "Gb/s", "direction": "per_direction"}
    shared |= {"links": 1, "latency_ns": 5.0, "field": "f", "status": "stated", "note": 'a "b" <c>', "confidence": "x"}
    g.add_edges_from([(odd[0], odd[1], shared), (odd[1], odd[2], shared), (odd[3], odd[0], {**shared, "links": 2})])
    back = nx.node_link_graph(json.loads(export_bytes(g, "node-link")), edges="edges")
    for h in (back, nx.read_graphml(io.BytesIO(export_bytes(g)))):
        assert list(h.nodes) == odd and h.edges[odd[3], odd[0]]["links"] == 2
        assert h.edges[odd[0], odd[1]]["note"] == 'a "b" <c>' and h.graph["title"] == "a\nb"
        assert "pod" not in h.nodes[odd[0]]  # None: left out (GraphML has no null)


def test_unstated_wiring_is_labelled_as_an_assumption(graphs):
    g = graphs["nvidia-dgx-h100"]
    gpu_nic = [
        d for a, b, d in g.edges(data=True) if {g.nodes[a]["kind"], g.nodes[b]["kind"]} == {"accelerator", "nic"}
    ]
    assert gpu_nic and all(d["status"] == "assumed" and "pairing" in d["note"] for d in gpu_nic)


@pytest.mark.slow
def test_a_needed_unknown_without_an_assumption_is_a_clear_error(repo, cli):
    path = repo.references_dir / "amd-mi300x-pollara400.yaml"
    text = path.read_text()
    start = text.index("  cpu.count:\n    value: 2")
    end = text.index("  scale_out.nic.count:\n    value: 8")
    path.write_text(text[:start] + text[end:])
    for verb in ("retrieve", "extract", "compile"):
        assert cli(verb, root=repo.root).code == 0
    result = cli("topology", "amd-mi300x-pollara400", root=repo.root)
    assert result.code == 1
    assert "needs cpu.count, which is unknown" in result.err and "assumptions:" in result.err


def test_cli_topology_json_keys(built_registry, graphs, smallest_cluster, cli):
    """On the smallest shipped cluster (a cluster's summary has every key; the CLI builds it afresh)."""
    tid = smallest_cluster
    result = cli("topology", tid, "--json", root=built_registry.root)
    data = json.loads(result.out)
    by_role = data.pop("nodes_by_kind_and_role")  # the CLI's count by kind and role, beside the summary's by kind
    assert data == json.loads(json.dumps(summarize(graphs[tid])))
    assert sum(by_role.values()) == sum(data["nodes_by_kind"].values())
    assert {
        "nodes_by_kind",
        "edges_by_network",
        "scale_up_domain_size",
        "oversubscription",
        "bisection_bandwidth_gbps",
    } <= data.keys()
    assert cli("topology", "no-such-thing", root=built_registry.root).code == 2
