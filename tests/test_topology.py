"""Topologies: parts are separate concepts, domains hold, networks stay apart, clusters match hand sums."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable

import networkx as nx
import pytest
from conftest import CLUSTERS, SYSTEM_REFERENCES
from fabricref.topology import stage
from fabricref.topology.export import write_exports, write_graphml, write_node_link
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


@pytest.mark.parametrize("tid", REFERENCES + CLUSTERS)
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


def test_exports_are_byte_identical_across_two_builds(built_registry, tmp_path):
    for n in (1, 2):
        g = stage.build(built_registry, "nvidia-gb200-nvl72")
        write_node_link(g, tmp_path / f"a{n}.json")
        write_graphml(g, tmp_path / f"a{n}.graphml")
    assert (tmp_path / "a1.json").read_bytes() == (tmp_path / "a2.json").read_bytes()
    assert (tmp_path / "a1.graphml").read_bytes() == (tmp_path / "a2.graphml").read_bytes()
    data = json.loads((tmp_path / "a1.json").read_text())
    link = next(e for e in data["edges"] if e["network"] == "scale_up")
    assert link["unit"] == "Gb/s" and link["direction"] == "per_direction" and link["field"] and link["status"]
    assert nx.read_graphml(tmp_path / "a1.graphml").number_of_nodes() == len(data["nodes"])


def _same_graph(g: nx.Graph, h: nx.Graph) -> None:
    """Same nodes and edges in the same order, and the same attributes once None (absent in exports) is dropped."""
    assert list(h.nodes) == list(g.nodes)
    assert [(a, b) for a, b in h.edges] == [(a, b) for a, b in g.edges]
    for n, d in g.nodes(data=True):
        assert h.nodes[n] == {k: v for k, v in d.items() if v is not None}, n
    for a, b, d in g.edges(data=True):
        assert h.edges[a, b] == {k: (float(v) if k == "latency_ns" else v) for k, v in d.items() if v is not None}


def test_reference_exports_read_back_with_networkx_defaults(graphs, tmp_path):
    """`node_link_graph(data)` with the pinned networkx's defaults (edges="edges") and `read_graphml` give the
    graph back, with typed attributes: a per-direction bandwidth in Gb/s stays a float, a link count an int."""
    g = graphs["nvidia-gb200-nvl72"]
    assert write_exports(g, tmp_path, compress=False) == ["nvidia-gb200-nvl72.json", "nvidia-gb200-nvl72.graphml"]
    data = json.loads((tmp_path / "nvidia-gb200-nvl72.json").read_text())
    from_json = nx.node_link_graph(data)
    from_graphml = nx.read_graphml(tmp_path / "nvidia-gb200-nvl72.graphml")
    for h in (from_json, from_graphml):
        _same_graph(g, h)
        assert h.graph["topology_id"] == "nvidia-gb200-nvl72"
    *_, d = next(e for e in from_graphml.edges(data=True) if e[2]["network"] == "scale_up")
    assert (type(d["bandwidth_gbps"]), type(d["links"]), type(d["latency_ns"])) == (float, int, float)
    assert all(type(v) is bool for _, v in from_graphml.nodes(data="assumed") if v is not None)
    text = (tmp_path / "nvidia-gb200-nvl72.graphml").read_text()
    assert 'attr.name="bandwidth_gbps" attr.type="double"' in text and 'attr.name="links" attr.type="long"' in text
    assert 'attr.name="assumed" attr.type="boolean"' in text and "None" not in text


def test_cluster_exports_are_gzip_with_no_timestamp_and_read_back(graphs, smallest_cluster, built_registry, tmp_path):
    """Written here from this module's build, byte for byte what the topology stage wrote from its own build (so
    two builds give the same bytes), and read back into the same graph. On the smallest shipped cluster: the same
    code writes every cluster, and test_topology_exports reads every cluster's exports back (slow tier)."""
    tid = smallest_cluster
    g = graphs[tid]
    names = write_exports(g, tmp_path, compress=True)
    assert names == [f"{tid}.json.gz", f"{tid}.graphml.gz"]
    for name in names:
        raw = (tmp_path / name).read_bytes()
        assert raw[:2] == b"\x1f\x8b" and raw[4:8] == b"\0\0\0\0"  # gzip magic; mtime 0
        assert raw == (built_registry.registry_dir / "topology" / name).read_bytes()
    _same_graph(g, nx.node_link_graph(json.loads(gzip.decompress((tmp_path / names[0]).read_bytes()))))
    with gzip.open(tmp_path / names[1]) as f:
        _same_graph(g, nx.read_graphml(f))


def test_unstated_wiring_is_labelled_as_an_assumption(graphs):
    g = graphs["nvidia-dgx-h100"]
    gpu_nic = [
        d for a, b, d in g.edges(data=True) if {g.nodes[a]["kind"], g.nodes[b]["kind"]} == {"accelerator", "nic"}
    ]
    assert gpu_nic and all(d["status"] == "assumed" and "pairing" in d["note"] for d in gpu_nic)


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
    assert data == json.loads(json.dumps(summarize(graphs[tid])))
    assert {
        "nodes_by_kind",
        "edges_by_network",
        "scale_up_domain_size",
        "oversubscription",
        "bisection_bandwidth_gbps",
    } <= data.keys()
    assert cli("topology", "no-such-thing", root=built_registry.root).code == 2


def test_compact_node_link_and_graphml_escape_awkward_text_like_the_library_encoders(tmp_path):
    """The cluster exports are built from per-link-class templates (speed); the text must still be exactly what
    `json.dumps` gives, and GraphML must escape what `xml.sax.saxutils` escapes (quotes, <, &, newlines)."""
    from xml.sax.saxutils import quoteattr

    g = nx.Graph(topology_id='t"<&>', title="a\nb")
    odd = ['n"1', "n<2>&", "plain", "ü\t'x"]
    for i, n in enumerate(odd):
        g.add_node(n, kind="nic", label=f"label {n}", index=i)
    shared = {"network": "scale_out", "bandwidth_gbps": 400.0, "unit": "Gb/s", "direction": "per_direction"}
    shared |= {"links": 1, "latency_ns": 5.0, "field": "f", "status": "stated", "note": 'a "b" <c>', "confidence": "x"}
    g.add_edges_from([(odd[0], odd[1], shared), (odd[1], odd[2], shared), (odd[3], odd[0], {**shared, "links": 2})])
    write_exports(g, tmp_path, compress=True)
    text = gzip.decompress((tmp_path / 't"<&>.json.gz').read_bytes()).decode()
    expected = {
        "directed": False,
        "multigraph": False,
        "graph": dict(g.graph),
        "nodes": [{**d, "id": n} for n, d in g.nodes(data=True)],
        "edges": [{**d, "source": a, "target": b} for a, b, d in g.edges(data=True)],
    }
    assert text == json.dumps(expected, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
    graphml = gzip.decompress((tmp_path / 't"<&>.graphml.gz').read_bytes()).decode()
    for n in odd:
        assert f"<node id={quoteattr(n)}>" in graphml
    assert "a &quot;b&quot; &lt;c&gt;" not in graphml and 'a "b" &lt;c&gt;' in graphml  # element text: <>& only
    back = nx.read_graphml(tmp_path / 't"<&>.graphml.gz')
    assert list(back.nodes) == odd and back.edges[odd[3], odd[0]]["links"] == 2
    assert back.edges[odd[0], odd[1]]["note"] == 'a "b" <c>' and back.graph["title"] == "a\nb"


def test_blocks_stamped_node_by_node_are_the_graph_stamped_link_by_link(built_registry, monkeypatch):
    """A cluster's blocks get each node's neighbour dict in one step (`build._links`); the graph is the one
    stamping link by link gives: same nodes and attributes in the same order, every node's neighbours in the
    same order with equal link attributes. The smallest shipped cluster, built both ways."""
    from fabricref.topology import build as topology_build

    cluster = min(stage.load_clusters(built_registry), key=lambda c: c.blocks).id
    made = []
    links = topology_build._links
    monkeypatch.setattr(topology_build, "_links", lambda t, shared: made.append(links(t, shared)) or made[-1])
    fast = stage.build(built_registry, cluster)
    assert made and made[0] is not None  # the one-step path was taken
    monkeypatch.setattr(topology_build, "_links", lambda t, shared: None)
    slow = stage.build(built_registry, cluster)
    assert list(fast.nodes(data=True)) == list(slow.nodes(data=True))
    assert [(n, list(nbrs.items())) for n, nbrs in fast.adj.items()] == [
        (n, list(nbrs.items())) for n, nbrs in slow.adj.items()
    ]


def test_a_template_with_a_repeated_dangling_or_looped_link_is_stamped_link_by_link():
    """Only a template whose links each join two of its nodes once is stamped node by node (`_links`); a link
    repeated (either way round), to a node outside it, or from a node to itself leaves it to `_add_edges`."""
    from fabricref.topology.blocks import Template
    from fabricref.topology.build import _links, _Shared

    t = Template()
    t.node("a", "cpu")
    t.node("b", "nic")
    t.node("c", "nic")
    t.link("a", "b", {"network": "host"})
    t.link("c", "a", {"network": "host"})
    plan = _links(t, _Shared())
    assert plan is not None
    assert plan.neighbours == [[1, 2], [0], [0]]
    for a, b in (("b", "a"), ("a", "b"), ("a", "x"), ("c", "c")):
        bad = Template(nodes=list(t.nodes), edges=[*t.edges, (a, b, {"network": "host"})])
        assert _links(bad, _Shared()) is None
