"""The traffic stage's graphs come from the topology stage's tables, and they are the graphs that stage built."""

from __future__ import annotations

import copy

import networkx as nx
import pytest
from fabricref.core.graphs import Topologies, load_topology
from fabricref.errors import UsageError
from fabricref.topology import tables
from fabricref.topology.facts import defaults
from fabricref.topology.summary import summarize


def _clean(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


@pytest.mark.slow
def test_every_exported_topology_comes_back_identical(built_registry, built_graph):
    """Same nodes in the same order with the same attributes, same edges, every node's neighbours in the same
    order (networkx iteration order decides tie-breaks in routing), same graph attributes and summary."""
    with Topologies(built_registry) as topologies:
        assert topologies.ids  # the shipped references and clusters
        for tid in topologies.ids:
            built = built_graph(tid)
            loaded = topologies.get(tid)
            g = loaded.graph
            assert list(g.nodes) == list(built.nodes), tid
            for n, d in built.nodes(data=True):
                expected = {**_clean(d), "assumed": bool(d.get("assumed", False))}
                assert g.nodes[n] == expected, (tid, n)
            # Every node's neighbours in the same order, each edge with the same attributes. With the nodes in
            # the same order this is `list(g.edges(data=True)) == list(built.edges(data=True))` (networkx lists
            # edges by node, then neighbour, in those orders), without building two lists of 233,792 edges.
            for n, neighbours in built.adj.items():
                assert list(g.adj[n].items()) == list(neighbours.items()), (tid, n)
            assert _clean(g.graph) == _clean(built.graph), tid
            assert loaded.summary == summarize(built), tid
            assert loaded.endpoint_latency_ns == defaults(built_registry).latency_ns["endpoint"]


def test_insertion_order_restores_neighbour_order_that_edge_order_alone_loses():
    """Edges added (z, y) then (z, x): z's neighbours are [y, x]. Re-adding in `g.edges()` order gives [x, y]."""
    g = nx.Graph(topology_id="t")
    g.add_nodes_from("xyz")
    g.add_edge("z", "y")
    g.add_edge("z", "x")
    naive = nx.Graph()
    naive.add_nodes_from(g)
    naive.add_edges_from(g.edges())
    assert list(naive.adj["z"]) == ["x", "y"]  # the problem
    again = nx.Graph()
    again.add_nodes_from(g)
    again.add_edges_from((u, v) for u, v, _ in tables.insertion_order(g))
    assert {n: list(again.adj[n]) for n in g} == {n: list(g.adj[n]) for n in g}


def test_an_attribute_without_a_column_is_refused():
    g = nx.Graph(topology_id="t")
    g.add_node("a", kind="nic", colour="red")
    with pytest.raises(ValueError, match=r"node attributes \['colour'\] have no column"):
        tables.node_rows(g)


def test_an_unknown_topology_names_the_known_ones(built_registry):
    with Topologies(built_registry) as topologies, pytest.raises(UsageError, match="nvidia-gb200-nvl72"):
        topologies.get("no-such-topology")


def test_edges_with_the_same_attributes_share_one_read_only_dict(built_registry):
    """The traffic stage's graphs: one dict per distinct attribute row, which nothing can change (so no edge
    changes another's); the API's graphs (`load_topology`) give every edge a dict of its own."""
    with Topologies(built_registry) as topologies:
        g = topologies.get("nvidia-dgx-h100").graph
    dicts = [d for _, _, d in g.edges(data=True)]
    distinct = {id(d) for d in dicts}
    rows = {tuple(sorted(d.items(), key=lambda kv: kv[0])) for d in dicts}
    assert len(distinct) == len(rows) < len(dicts)  # 58 edges, a few rows
    u, v, d = next(iter(g.edges(data=True)))
    for change in (
        lambda: d.__setitem__("network", "x"),
        lambda: d.update(network="x"),
        lambda: d.pop("network"),
        lambda: d.setdefault("colour", "red"),
        lambda: d.clear(),
        lambda: g.add_edge(u, v, network="x"),
    ):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert g[u][v]["network"] == d["network"] != "x"
    mine = copy.copy(d)
    mine["network"] = "x"  # a copy is a plain dict
    assert type(mine) is dict and d["network"] != "x"

    api = load_topology(built_registry, "nvidia-dgx-h100").graph
    api_dicts = [d for _, _, d in api.edges(data=True)]
    assert len({id(d) for d in api_dicts}) == len(api_dicts) and all(type(d) is dict for d in api_dicts)
    assert api_dicts == dicts


def test_a_deep_copy_or_pickle_of_a_shared_graph_never_shares_a_changeable_dict():
    """copy.deepcopy / pickle keep one object per object (memo): had a shared read-only dict become a plain dict,
    the copy's edges with the same attributes would share it, and changing one edge would silently change the
    others. They stay shared and read-only instead (changing them raises), while copy.copy of one edge's dict is
    a plain dict of its own."""
    import pickle

    from fabricref.core.graphs import EdgeAttrs, _add_edges

    g = nx.Graph()
    g.add_nodes_from("abc")
    _add_edges(g, [("a", "b", 7), ("b", "c", 7)], {7: {"network": "scale_up", "bandwidth_gb_per_s": 450.0}})
    assert g["a"]["b"] is g["b"]["c"]
    for copied in (copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        assert copied["a"]["b"] == {"network": "scale_up", "bandwidth_gb_per_s": 450.0}
        assert type(copied["a"]["b"]) is EdgeAttrs
        with pytest.raises(TypeError, match="read-only"):
            copied["a"]["b"]["bandwidth_gb_per_s"] = 900.0
        assert copied["b"]["c"]["bandwidth_gb_per_s"] == 450.0
    mine = copy.copy(g["a"]["b"])
    mine["bandwidth_gb_per_s"] = 900.0
    assert type(mine) is dict and g["b"]["c"]["bandwidth_gb_per_s"] == 450.0
