"""The topology stage's tables: one row per graph, node and edge."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import networkx as nx

from ..core.graphs import GRAPH_COLUMNS, NODE_ATTRS, NODE_TYPES
from ..core.registry import columns

# Every attribute of the graph, so the traffic stage rebuilds the very same graph (pipeline/core/graphs.py).
# `position` keeps networkx's iteration order: nodes, and edges so every node's neighbours come back in order.
NODE_COLUMNS = [("topology_id", "VARCHAR"), ("node", "VARCHAR"), ("position", "INTEGER"), *NODE_TYPES.items()]
EDGE_COLUMNS = columns(
    "topology_id source target position:INTEGER network bandwidth_gbps:DOUBLE unit direction links:INTEGER "
    "latency_ns:DOUBLE field status confidence note"
)
_EDGE_VALUES = [c for c, _ in EDGE_COLUMNS[4:]]


def node_rows(g: nx.Graph) -> list[tuple[Any, ...]]:
    """The `NODE_COLUMNS` of every node, in graph order (`position`); `assumed` absent is False."""
    tid = g.graph.get("topology_id")
    _check_attrs(tid, {k for _, d in g.nodes(data=True) for k in d}, NODE_ATTRS, "node")
    rows = []
    for position, (n, d) in enumerate(g.nodes(data=True)):
        if d.get("kind") is None:
            raise ValueError(f"topology {tid}: node {n} has no kind")
        values = [d.get(k) for k in NODE_ATTRS]
        values[NODE_ATTRS.index("assumed")] = bool(d.get("assumed"))
        rows.append((tid, n, position, *values))
    return rows


def edge_rows(g: nx.Graph) -> list[tuple[Any, ...]]:
    """The `EDGE_COLUMNS` of every edge: its source the end that comes first in node order (as `g.edges()` gives
    it), `position` its rank in `insertion_order`."""
    tid = g.graph.get("topology_id")
    edges = insertion_order(g)
    _check_attrs(tid, {k for _, _, d in edges for k in d}, _EDGE_VALUES, "edge")  # what is written
    rank = {n: i for i, n in enumerate(g)}
    rows = []
    for position, (u, v, d) in enumerate(edges):
        a, b = (u, v) if rank[u] <= rank[v] else (v, u)
        rows.append((tid, a, b, position, *map(d.get, _EDGE_VALUES)))
    return rows


def insertion_order(g: nx.Graph) -> list[tuple[Any, Any, dict[str, Any]]]:
    """Edges in an order that, added to a graph of the same nodes, gives every node its neighbours in `g`'s order
    (the traffic stage's tie-breaks follow it). Kahn's algorithm over the neighbour lists: an edge is emitted once
    it is next at both its ends; the order the graph was built in proves one exists."""
    raw = dict(g.adjacency())  # the neighbour dicts themselves (g.adj[u][v] goes through two views per edge)
    adj = {u: list(nbrs) for u, nbrs in raw.items()}
    head = dict.fromkeys(adj, 0)
    out: list[tuple[Any, Any, dict[str, Any]]] = []
    stack = list(reversed(adj))
    while stack:
        u = stack.pop()
        mine = adj[u]
        i = head[u]
        while i < len(mine):
            v = mine[i]
            if v != u:  # a self-loop is listed once among u's own neighbours: next at both its ends
                theirs = adj[v]
                if head[v] >= len(theirs) or theirs[head[v]] != u:
                    break  # (u, v) waits for v's earlier neighbours; v's own turn re-examines it
                head[v] += 1
                stack.append(v)
            out.append((u, v, raw[u][v]))
            i += 1
        head[u] = i
    if len(out) != g.number_of_edges():
        raise ValueError(f"topology {g.graph.get('topology_id')}: neighbour orders admit no edge order")
    return out


def graph_row(g: nx.Graph, endpoint_latency_ns: float) -> tuple[Any, ...]:
    """The graph's own attributes, and the endpoint latency the traffic stage adds to every path."""
    attrs = {**g.graph, "endpoint_latency_ns": endpoint_latency_ns}
    extra = set(attrs) - {c for c, _ in GRAPH_COLUMNS}
    if extra:
        raise ValueError(f"topology {g.graph['topology_id']}: graph attributes {sorted(extra)} have no column")
    return tuple(attrs.get(c) for c, _ in GRAPH_COLUMNS)


def _check_attrs(tid: Any, names: Iterable[str], known: Iterable[str], what: str) -> None:
    """A new attribute must get a column, or the graph the traffic stage rebuilds would silently lack it."""
    extra = set(names) - set(known)
    if extra:
        raise ValueError(
            f"topology {tid}: {what} attributes {sorted(extra)} have no column in pipeline/topology/tables.py"
        )
