"""Deterministic exports: node-link JSON and GraphML per reference and cluster, and rows for the registry tables."""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

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


# Nodes and neighbours are read from networkx's own dicts (`g._node`, `g._adj`, as pipeline/traffic/routing.py
# does): its view objects iterate through Python-level Mapping code, seconds on a 24,576-GPU cluster.


def node_rows(g: nx.Graph) -> list[tuple[Any, ...]]:
    tid = g.graph["topology_id"]
    _check_attrs(g, g._node.values(), NODE_ATTRS, "node")
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
        for i, (n, d) in enumerate(g._node.items())
    ]


def edge_rows(g: nx.Graph) -> list[tuple[Any, ...]]:
    """One row per edge, oriented as `g.edges()` gives it (the end that comes first in node order is the source),
    `position` its rank in `insertion_order`. Built straight from that order: no lookup table over the edges."""
    tid = g.graph["topology_id"]
    order = insertion_order(g)
    _check_attrs(g, (d for _, _, d in order), EDGE_ATTRS, "edge")
    pos = {n: i for i, n in enumerate(g)}
    rows = []
    for i, (u, v, d) in enumerate(order):
        a, b = (u, v) if pos[u] <= pos[v] else (v, u)
        rows.append(
            (
                tid,
                a,
                b,
                i,
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
        )
    return rows


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
    next in the lists of both its ends; the order it was built in proves such an order exists. Nodes are
    numbered first so the loop touches only lists of ints (the 24,576-GPU cluster has 233,792 edges)."""
    nodes = list(g)
    index = {n: i for i, n in enumerate(nodes)}
    items = [list(nbrs.items()) for nbrs in g._adj.values()]
    adj = [[index[v] for v, _ in row] for row in items]
    head = [0] * len(nodes)
    out: list[tuple[str, str, dict[str, Any]]] = []
    stack = list(range(len(nodes) - 1, -1, -1))
    while stack:
        u = stack.pop()
        au = adj[u]
        while head[u] < len(au):
            hu = head[u]
            v = au[hu]
            hv = head[v]
            if hv >= len(adj[v]) or adj[v][hv] != u:
                break  # (u, v) waits for v's earlier neighbours; v's own turn re-examines it
            out.append((nodes[u], nodes[v], items[u][hu][1]))
            head[u] += 1
            head[v] += 1
            stack.append(v)
    if len(out) != g.number_of_edges():
        raise ValueError(f"topology {g.graph['topology_id']}: neighbour orders admit no edge order")
    return out


_PY_TYPES: dict[str, type] = {"VARCHAR": str, "DOUBLE": float, "INTEGER": int, "BOOLEAN": bool}
_NOT_ATTRS = {"topology_id", "node", "source", "target", "position"}


def _types(columns: list[tuple[str, str]]) -> dict[str, type]:
    return {c: _PY_TYPES[t] for c, t in columns if c not in _NOT_ATTRS}


def _typed(attrs: dict[str, Any], types: dict[str, type], where: str) -> dict[str, Any]:
    """One type per attribute, the table column's (GraphML declares a key's type once, and Gephi / yEd read a
    key typed `long` on one graph and `double` on another as different columns); None left out (GraphML has no
    null); an attribute without a column keeps bool / int / float / str, anything else becomes JSON text."""
    out: dict[str, Any] = {}
    for k, v in sorted(attrs.items()):
        if v is None:
            continue
        if type(v) is types.get(k):  # already the column's exact type (bool is not int here): kept as is
            out[k] = v
            continue
        if hasattr(v, "item") and not isinstance(v, str | bytes):
            v = v.item()  # numpy scalars
        t = types.get(k)
        if t is None:
            out[k] = v if isinstance(v, bool | int | float | str) else json.dumps(v, sort_keys=True, default=str)
        elif t is bool:
            if not isinstance(v, bool):
                raise ValueError(f"{where}: attribute {k}={v!r} is not a boolean")
            out[k] = v
        elif t is int:
            if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v):
                raise ValueError(f"{where}: attribute {k}={v!r} is not an integer")
            out[k] = int(v)
        elif t is float:
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise ValueError(f"{where}: attribute {k}={v!r} is not a number")
            out[k] = float(v)
        else:
            out[k] = str(v)
    return out


@dataclass(frozen=True)
class _Typed:
    """A graph's attributes typed and None-free, nodes and edges in graph order (one pass for both exports)."""

    graph: dict[str, Any]
    nodes: list[tuple[str, dict[str, Any]]]
    edges: list[tuple[str, str, dict[str, Any]]]


def _typed_graph(g: nx.Graph) -> _Typed:
    tid = g.graph.get("topology_id")
    node_types, edge_types = _types(NODE_COLUMNS), _types(EDGE_COLUMNS)
    memo: dict[tuple[Any, ...], dict[str, Any]] = {}  # a cluster's ~10^5 links fall in a few link classes

    by_id: dict[int, dict[str, Any]] = {}  # the graph holds every dict, so an id stays unique meanwhile

    def edge(a: str, b: str, d: dict[str, Any]) -> dict[str, Any]:
        typed = by_id.get(id(d))
        if typed is not None:
            return typed
        try:
            key = tuple(d.items())
            hash(key)
        except TypeError:  # an unhashable value: typed on its own
            return _typed(d, edge_types, f"topology {tid} edge {a}-{b}")
        if key not in memo:
            memo[key] = _typed(d, edge_types, f"topology {tid} edge {a}-{b}")
        by_id[id(d)] = memo[key]
        return memo[key]

    return _Typed(
        graph=_typed(g.graph, {}, f"topology {tid}"),
        nodes=[(n, _typed(d, node_types, f"topology {tid} node {n}")) for n, d in g._node.items()],
        edges=[(a, b, edge(a, b, d)) for a, b, d in g.edges(data=True)],
    )


def _write(path: Path, data: bytes) -> None:
    """A `.gz` path is gzip-compressed with mtime 0 and a fixed level, so the bytes depend on the graph alone.
    Level 1: the 24,576-GPU cluster's 230 MB of text compress 3× faster than at level 6, to ~6 MB instead of
    ~4 MB (these files are DVC outputs, not in git)."""
    if path.suffix == ".gz":
        data = gzip.compress(data, compresslevel=1, mtime=0)
    atomic_write_bytes(path, data)


def write_node_link(g: nx.Graph, path: Path) -> None:
    """Node-link JSON as `networkx.node_link_data(g)` writes it, default keys included (`edges`, `id`, `source`,
    `target`), so `networkx.node_link_graph(data)` reads it as is; attributes typed as in the GraphML export.
    Indented when plain (a reference, read by people), compact when gzip-compressed (a cluster)."""
    _write_node_link(_typed_graph(g), path)


def _write_node_link(t: _Typed, path: Path) -> None:
    if path.suffix == ".gz":
        _write(path, _compact_node_link(t).encode())
        return
    data = {
        "directed": False,
        "multigraph": False,
        "graph": t.graph,
        "nodes": [{**d, "id": n} for n, d in t.nodes],
        "edges": [{**d, "source": a, "target": b} for a, b, d in t.edges],
    }
    _write(path, (json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n").encode())


_JSON = {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":")}
_HOLES = ("\x00source\x00", "\x00target\x00")  # stand-ins no attribute value can contain (JSON escapes NUL)


def _compact_node_link(t: _Typed) -> str:
    """The text `json.dumps(node_link, sort_keys=True, ensure_ascii=False, separators=(",", ":"))` gives, built
    without one dict per edge: each link class's edge object is encoded once with stand-ins for its two ends,
    and every edge fills them with its ends' encoded ids (the 24,576-GPU cluster: 233,792 edges, 7 classes)."""
    holes = [json.dumps(h, **_JSON) for h in _HOLES]
    parts: dict[int, tuple[str, str, str]] = {}
    for _, _, d in t.edges:
        if id(d) not in parts:
            text = json.dumps({**d, "source": _HOLES[0], "target": _HOLES[1]}, **_JSON)
            head, rest = text.split(holes[0])
            mid, tail = rest.split(holes[1])
            parts[id(d)] = (head, mid, tail)
    ids = {n: json.dumps(n, **_JSON) for n, _ in t.nodes}
    edges = []
    for a, b, d in t.edges:
        head, mid, tail = parts[id(d)]
        edges.append(f"{head}{ids[a]}{mid}{ids[b]}{tail}")
    nodes = json.dumps([{**d, "id": n} for n, d in t.nodes], **_JSON)
    graph = json.dumps(t.graph, **_JSON)
    return f'{{"directed":false,"edges":[{",".join(edges)}],"graph":{graph},"multigraph":false,"nodes":{nodes}}}\n'


def write_exports(g: nx.Graph, directory: Path, compress: bool) -> list[str]:
    """`<id>.json` and `<id>.graphml` (`.gz` added when `compress`); returns the file names written."""
    t = _typed_graph(g)
    names = [f"{g.graph['topology_id']}.{ext}{'.gz' if compress else ''}" for ext in ("json", "graphml")]
    _write_node_link(t, directory / names[0])
    _write_graphml(t, directory / names[1])
    return names


def _graphml_type(values: list[Any]) -> str:
    kinds = {type(v) for v in values}
    if kinds <= {bool}:
        return "boolean"
    if kinds <= {int}:
        return "long"
    if kinds <= {int, float}:
        return "double"
    return "string"


_PLAIN = re.compile(r"[&<>\"'\n\r\t]")


def _escape(text: str) -> str:
    """`xml.sax.saxutils.escape`, skipped for the usual text that has nothing to escape."""
    return escape(text) if _PLAIN.search(text) else text


def _quoteattr(text: str) -> str:
    """`xml.sax.saxutils.quoteattr`, skipped for the usual text that has nothing to escape."""
    return quoteattr(text) if _PLAIN.search(text) else f'"{text}"'


def _graphml_value(v: Any, kind: str) -> str:
    if kind == "boolean":
        return "true" if v else "false"
    if kind == "double":
        return repr(float(v))
    return _escape(str(v))


def write_graphml(g: nx.Graph, path: Path) -> None:
    """GraphML with typed keys (boolean / long / double / string) for Gephi and yEd; absent attributes left out.

    Streamed by hand rather than through networkx's ElementTree writer, which takes minutes on the 24,576-GPU
    cluster; keys sorted by scope and name, nodes and edges in graph order, so the bytes are deterministic.
    `networkx.read_graphml` reads it back with the same types.
    """
    _write_graphml(_typed_graph(g), path)


def _write_graphml(h: _Typed, path: Path) -> None:
    unique_edge_dicts = list({id(d): d for _, _, d in h.edges}.values())
    scopes = {"graph": [h.graph], "node": [d for _, d in h.nodes], "edge": unique_edge_dicts}
    keys: dict[tuple[str, str], tuple[str, str]] = {}  # (scope, name) -> (id, type)
    lines = [
        "<?xml version='1.0' encoding='utf-8'?>",
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
        'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">',
    ]
    for scope in ("graph", "node", "edge"):
        names = sorted({k for d in scopes[scope] for k in d})
        for name in names:
            kind = _graphml_type([d[name] for d in scopes[scope] if name in d])
            kid = f"d{len(keys)}"
            keys[(scope, name)] = (kid, kind)
            lines.append(f'  <key id="{kid}" for="{scope}" attr.name={_quoteattr(name)} attr.type="{kind}" />')

    def data(scope: str, attrs: dict[str, Any], indent: str) -> list[str]:
        out = []
        for name, v in attrs.items():
            kid, kind = keys[(scope, name)]
            out.append(f'{indent}<data key="{kid}">{_graphml_value(v, kind)}</data>')
        return out

    lines.append('  <graph edgedefault="undirected">')
    lines += data("graph", h.graph, "    ")
    quoted = {n: _quoteattr(str(n)) for n, _ in h.nodes}  # each id once, not once per edge end
    for n, d in h.nodes:
        lines.append(f"    <node id={quoted[n]}>")
        lines += data("node", d, "      ")
        lines.append("    </node>")
    edge_data = {id(d): "\n".join([*data("edge", d, "      "), "    </edge>"]) for d in unique_edge_dicts}
    for a, b, d in h.edges:
        lines.append(f"    <edge source={quoted[a]} target={quoted[b]}>")
        lines.append(edge_data[id(d)])
    lines += ["  </graph>", "</graphml>", ""]
    _write(path, "\n".join(lines).encode())
