"""Deterministic exports: node-link JSON and GraphML per reference, and rows for the registry tables."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import networkx as nx

from ..core.files import atomic_write_bytes
from ..core.graphs import EDGE_ATTRS, GRAPH_COLUMNS, NODE_ATTRS

# The tables carry every attribute of the graph, so the traffic stage rebuilds the very same networkx graph from
# them (pipeline/core/graphs.py) instead of importing this stage. `position` keeps networkx's iteration order:
# node order, and an edge order under which every node's neighbours come back in the order they were added.
NODE_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("node", "VARCHAR"),
    ("position", "INTEGER"),
    ("kind", "VARCHAR"),
    ("role", "VARCHAR"),
    ("label", "VARCHAR"),
    ("within", "VARCHAR"),
    ("domain", "VARCHAR"),
    ("block", "INTEGER"),
    ("rail", "INTEGER"),
    ("tier", "INTEGER"),
    ("pod", "INTEGER"),
    ("assumed", "BOOLEAN"),
    ("index", "INTEGER"),
    ("plane", "INTEGER"),
    ("aggregate", "BOOLEAN"),
]
EDGE_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("source", "VARCHAR"),
    ("target", "VARCHAR"),
    ("position", "INTEGER"),
    ("network", "VARCHAR"),
    ("bandwidth_gbps", "DOUBLE"),
    ("unit", "VARCHAR"),
    ("direction", "VARCHAR"),
    ("links", "INTEGER"),
    ("latency_ns", "DOUBLE"),
    ("field", "VARCHAR"),
    ("status", "VARCHAR"),
    ("confidence", "VARCHAR"),
    ("note", "VARCHAR"),
]


def node_rows(g: nx.Graph) -> list[tuple[Any, ...]]:
    tid = g.graph["topology_id"]
    _check_attrs(g, (a for _, a in g.nodes(data=True)), NODE_ATTRS, "node")
    return [
        (
            tid,
            n,
            i,
            d["kind"],
            d.get("role"),
            d.get("label"),
            d.get("within"),
            d.get("domain"),
            d.get("block"),
            d.get("rail"),
            d.get("tier"),
            d.get("pod"),
            bool(d.get("assumed", False)),
            d.get("index"),
            d.get("plane"),
            d.get("aggregate"),
        )
        for i, (n, d) in enumerate(g.nodes(data=True))
    ]


def edge_rows(g: nx.Graph) -> list[tuple[Any, ...]]:
    tid = g.graph["topology_id"]
    _check_attrs(g, (d for _, _, d in g.edges(data=True)), EDGE_ATTRS, "edge")
    rank = {(u, v): i for i, (u, v, _) in enumerate(insertion_order(g))}
    return [
        (
            tid,
            a,
            b,
            rank[(a, b)] if (a, b) in rank else rank[(b, a)],
            d["network"],
            d["bandwidth_gbps"],
            d["unit"],
            d["direction"],
            d["links"],
            d["latency_ns"],
            d["field"],
            d["status"],
            d["confidence"],
            d["note"],
        )
        for a, b, d in g.edges(data=True)
    ]


def graph_row(g: nx.Graph, endpoint_latency_ns: float) -> tuple[Any, ...]:
    """The graph's own attributes, and the endpoint latency the traffic stage adds to every path."""
    attrs = {**g.graph, "endpoint_latency_ns": endpoint_latency_ns}
    extra = set(attrs) - {c for c, _ in GRAPH_COLUMNS}
    if extra:
        raise ValueError(f"topology {g.graph['topology_id']}: graph attributes {sorted(extra)} have no column")
    return tuple(attrs.get(c) for c, _ in GRAPH_COLUMNS)


def _check_attrs(g: nx.Graph, dicts: Any, known: tuple[str, ...], what: str) -> None:
    """A new attribute must get a column, or the graph the traffic stage rebuilds would silently lack it."""
    seen: set[int] = set()
    allowed = set(known)
    for d in dicts:
        if id(d) in seen:  # stamped templates share one dict per link class
            continue
        seen.add(id(d))
        extra = set(d) - allowed
        if extra:
            raise ValueError(
                f"topology {g.graph['topology_id']}: {what} attributes {sorted(extra)} have no column in "
                "pipeline/topology/export.py"
            )


def insertion_order(g: nx.Graph) -> list[tuple[str, str, dict[str, Any]]]:
    """Edges in an order that, added to a graph holding the same nodes, gives every node its neighbours in
    the same order as in `g` (networkx iterates neighbours in insertion order, and the traffic stage's
    tie-breaks follow it). Kahn's algorithm over the per-node neighbour lists: an edge is emitted once it is
    next in the lists of both its ends; the order it was built in proves such an order exists."""
    adj = {n: list(nbrs) for n, nbrs in g.adj.items()}
    head = dict.fromkeys(adj, 0)
    out: list[tuple[str, str, dict[str, Any]]] = []
    stack = list(reversed(adj))
    while stack:
        u = stack.pop()
        while head[u] < len(adj[u]):
            v = adj[u][head[u]]
            if head[v] >= len(adj[v]) or adj[v][head[v]] != u:
                break  # (u, v) waits for v's earlier neighbours; v's own turn re-examines it
            out.append((u, v, g.adj[u][v]))
            head[u] += 1
            head[v] += 1
            stack.append(v)
    if len(out) != g.number_of_edges():
        raise ValueError(f"topology {g.graph['topology_id']}: neighbour orders admit no edge order")
    return out


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sorted(attrs.items()) if v is not None}


def write_node_link(g: nx.Graph, path: Path) -> None:
    data = nx.node_link_data(g, edges="links")
    data["graph"] = _clean(data["graph"])
    data["nodes"] = [_clean(n) for n in data["nodes"]]
    data["links"] = [_clean(e) for e in data["links"]]
    atomic_write_bytes(path, (json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode())


def write_graphml(g: nx.Graph, path: Path) -> None:
    """GraphML has no null: absent attributes are left out rather than written as empty strings."""
    h = nx.Graph()
    h.graph.update(_clean(g.graph))
    h.add_nodes_from((n, _clean(d)) for n, d in g.nodes(data=True))
    h.add_edges_from((a, b, _clean(d)) for a, b, d in g.edges(data=True))
    buf = io.BytesIO()
    nx.write_graphml(h, buf, prettyprint=True)
    atomic_write_bytes(path, buf.getvalue())
