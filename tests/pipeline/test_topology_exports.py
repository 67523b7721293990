"""Every topology's export (`fabricref export graph`) read back by networkx into the graph the registry's tables
hold (tests/pipeline/test_graphs.py: the graph the topology stage built): same nodes in the same order, same edges in
`g.edges()` order, every attribute with its column's Python type, None left out (GraphML has no null). And the
edge order the tables keep restores every node's neighbour order."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import networkx as nx
import pytest
import yaml
from conftest import CLUSTERS, FAST_SYSTEMS, ROOT, SYSTEM_REFERENCES
from fabricref.core.graphs import load_topology
from fabricref.inspect.export import graph_bytes, tool_attrs
from fabricref.topology import tables

# Writing and reading back a cluster's GraphML takes seconds: the clusters are in the slow tier, each format a test
# of its own. The fast tier reads back a representative few systems (FAST_SYSTEMS); the whole suite every system,
# every cluster's node-link export, and the GraphML of every cluster but those whose file states more than
# GRAPHML_MAX_BLOCKS building blocks: there the GraphML is networkx's XML writer and parser over the attributes the
# smaller clusters carry (the 24,576-GPU cluster's: over a minute of CPU), and their node-link export is read back
# whole. A count taken from a parameter (`{param: servers}`) is read back.
FORMATS = ["node-link", "graphml"]
GRAPHML_MAX_BLOCKS = 1000


def _graphml_read_back(cluster: str) -> bool:
    blocks = yaml.safe_load((ROOT / "models" / "clusters" / f"{cluster}.yaml").read_text())["building_blocks"]
    return not isinstance(blocks, int) or blocks <= GRAPHML_MAX_BLOCKS


TOPOLOGIES = [
    *(
        (r, f) if r in FAST_SYSTEMS else pytest.param(r, f, marks=pytest.mark.slow)
        for r in SYSTEM_REFERENCES
        for f in FORMATS
    ),
    *(
        pytest.param(c, f, marks=pytest.mark.slow)
        for c in CLUSTERS
        for f in FORMATS
        if f == "node-link" or _graphml_read_back(c)
    ),
]

_TYPES = {"VARCHAR": str, "DOUBLE": float, "INTEGER": int, "BOOLEAN": bool}


def _expected(attrs: dict[str, Any], types: dict[str, type]) -> dict[str, tuple[type, Any]]:
    """`attrs` as read back: None left out, each value of its column's type (`types`)."""
    return {k: (types.get(k, type(v)), types.get(k, type(v))(v)) for k, v in attrs.items() if v is not None}


def _types(columns: list[tuple[str, str]]) -> dict[str, type]:
    return {c: _TYPES[t] for c, t in columns}


def _typed(attrs: dict[str, Any]) -> dict[str, tuple[type, Any]]:
    return {k: (type(v), v) for k, v in attrs.items()}


def _assert_same(built: nx.Graph, back: nx.Graph, what: str) -> None:
    assert list(back.nodes) == list(built.nodes), what
    assert list(back.edges) == list(built.edges), what
    graph = dict(back.graph)
    if what.endswith("graphml"):  # read_graphml records the (absent) GraphML key defaults
        assert (graph.pop("node_default"), graph.pop("edge_default")) == ({}, {}), what
    assert _typed(graph) == {k: (type(v), v) for k, v in built.graph.items() if v is not None}, what
    node_types = _types(tables.NODE_COLUMNS)
    for n, d in built.nodes(data=True):
        assert _typed(back.nodes[n]) == _expected(d, node_types), (what, n)
    edge_types = _types(tables.EDGE_COLUMNS)
    expected: dict[tuple, dict[str, tuple[type, Any]]] = {}  # by the built edge's items: most edges share them
    for a, b, d in built.edges(data=True):
        key = tuple((k, type(v), v) for k, v in d.items())
        if key not in expected:
            tools = _typed({k: v for k, v in tool_attrs(d).items() if v is not None})  # derived for graph tools
            expected[key] = {**_expected(d, edge_types), **tools}
        assert _typed(back.edges[a, b]) == expected[key], (what, a, b)


@pytest.mark.parametrize(("tid", "fmt"), TOPOLOGIES)
def test_exports_read_back_into_the_registrys_graph(built_registry, tid, fmt):
    data = graph_bytes(built_registry, tid, fmt)
    if fmt == "node-link":
        back = nx.node_link_graph(json.loads(data), edges="edges")
    else:
        back = nx.read_graphml(io.BytesIO(data))
    _assert_same(load_topology(built_registry, tid).graph, back, f"{tid} {fmt}")


def test_insertion_order_restores_every_neighbour_order_of_random_graphs():
    """Graphs built by adding edges (self-loops included) in a random order: re-adding the edges in
    `insertion_order` gives every node its neighbours in the same order, and every edge comes once."""
    rnd = random.Random(16)
    for _ in range(300):
        n = rnd.randint(1, 10)
        g = nx.Graph(topology_id="t")
        g.add_nodes_from(range(n))
        g.add_edges_from((rnd.randrange(n), rnd.randrange(n)) for _ in range(rnd.randint(0, 25)))
        order = tables.insertion_order(g)
        again = nx.Graph()
        again.add_nodes_from(g)
        again.add_edges_from((u, v) for u, v, _ in order)
        assert len(order) == g.number_of_edges()
        assert {u: list(again.adj[u]) for u in g} == {u: list(g.adj[u]) for u in g}


def test_built_edges_of_a_link_class_share_one_read_only_dict(built_graph):
    """A link class's attributes are one read-only dict: changing them through one edge raises instead of
    silently changing every edge of the class; a copy can be changed."""
    g = built_graph("illustrative-h100-4096")
    attrs = [d for _, _, d in g.edges(data=True)]
    assert len({id(d) for d in attrs}) < 20 < len(attrs)
    a, b, d = next(iter(g.edges(data=True)))
    with pytest.raises(TypeError, match="read-only"):
        g.edges[a, b]["note"] = "changed"
    copy = dict(d)
    copy["note"] = "changed"
    assert g.edges[a, b]["note"] != "changed"
