"""Deterministic exports: node-link JSON and GraphML per reference and cluster, and rows for the registry tables.

The graph is read once (`read_columns`) into columns: node names and one value list per node attribute, and the
edges as node numbers with a link-class number (a cluster's ~10^5 links share a few attribute sets), both in
`g.edges()` order (the exports) and in `insertion_order` (the tables). The table rows, the node-link JSON and the
GraphML are all written from those columns, so nothing walks networkx's views or types a dict per edge twice.
"""

from __future__ import annotations

import json
import operator
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate, chain, compress, repeat
from json.encoder import encode_basestring
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.columns import Coded
from ..core.files import atomic_write_bytes
from ..core.graphs import EDGE_ATTRS, GRAPH_COLUMNS, NODE_ATTRS

if TYPE_CHECKING:
    import networkx as nx

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
_EDGE_VALUES = [c for c, _ in EDGE_COLUMNS[4:]]


@dataclass(frozen=True)
class Columns:
    """One graph read once, for the tables and both exports. Nodes are numbered in graph order.

    `node_values[name][i]` is node i's attribute `name` (None where absent), for every name some node has.
    `classes` holds one attribute dict per link class (equal contents: one class), first met in `g.edges()`
    order, and `firsts` that first edge. Edges are columns of node numbers and class numbers: `eu`, `ev`, `ek`
    in `g.edges()` order, `iu`, `iv`, `ik` in `insertion_order`; the first end is the one earlier in node order.
    Columns, not one tuple per edge, so that the writers run through them with `map` and `zip` in C.

    The `insertion_order` columns are worked out on first use (only the tables need them): the stage hands the
    exports to a second process first, and orders the edges for the tables meanwhile."""

    tid: Any
    graph: dict[str, Any]
    nodes: list[Any]
    node_values: dict[str, list[Any]]
    classes: list[dict[str, Any]]
    firsts: list[tuple[int, int]]
    eu: list[int]
    ev: list[int]
    ek: list[int]
    # What `insertion_order` needs: every node's neighbours as node numbers, node after node (`_degrees` of
    # them each), and the edge dicts beside them (alive, so their ids stay theirs: an id gives a slot its class).
    _flat: np.ndarray = field(repr=False, compare=False)
    _degrees: list[int] = field(repr=False, compare=False)
    _flat_dicts: list[dict[str, Any]] = field(repr=False, compare=False)
    # `eu`, `ev`, `ek` as int64 arrays, for the exports to pick each edge's pieces with (`_interleaved`).
    _edges: tuple[np.ndarray, np.ndarray, np.ndarray] = field(repr=False, compare=False, default=())  # type: ignore[assignment]

    @cached_property
    def _inserted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(iu, iv, ik) as int64 arrays: Kahn's order over the neighbour lists (`_kahn`, on the flat list), each
        edge's class that of the edge `g.edges()` met it as (both slots of an edge hold one dict, checked by id),
        in NumPy rather than a Python step per edge."""
        flat, degrees = self._flat, self._degrees
        ends = np.repeat(np.arange(len(degrees), dtype=np.int64), degrees)
        rev = _reverse_slots(ends, flat)
        offsets = np.zeros(len(degrees) + 1, dtype=np.int64)
        np.cumsum(degrees, out=offsets[1:])
        order = np.asarray(
            _kahn(flat.tolist(), offsets.tolist(), rev.tolist(), bool((ends == flat).any())), dtype=np.int64
        )
        if len(order) != len(self.eu):
            raise ValueError(f"topology {self.tid}: neighbour orders admit no edge order")
        ids = np.fromiter(map(id, self._flat_dicts), dtype=np.int64, count=len(self._flat_dicts))
        if not (ids == ids[rev]).all():
            raise ValueError(f"topology {self.tid}: an edge's two ends hold different attribute dicts")
        # Slot i's edge in `g.edges()` order: the slot read from the end earlier in node order (`keep`).
        keep = flat >= ends
        edge_of = np.cumsum(keep) - 1
        slot_class = np.asarray(self.ek, dtype=np.int64)[edge_of[np.where(keep, np.arange(len(flat)), rev)]]
        u, v = ends[order], flat[order]
        return np.minimum(u, v), np.maximum(u, v), slot_class[order]

    @property
    def iu(self) -> list[int]:
        return self._inserted[0].tolist()

    @property
    def iv(self) -> list[int]:
        return self._inserted[1].tolist()

    @property
    def ik(self) -> list[int]:
        return self._inserted[2].tolist()


def _classify(dicts: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """A class number per edge dict (equal items: one class), and each class's first edge. Edges that share a
    dict (the build shares one per link class) are grouped by its id first: only the distinct dicts are compared."""
    ids = list(map(id, dicts))
    first_of = dict(zip(reversed(ids), range(len(ids) - 1, -1, -1), strict=True))  # id -> its first edge
    if len(first_of) == len(ids):
        return _classify_items(dicts)
    distinct = sorted(first_of.values())
    classes, _ = _classify_items([dicts[i] for i in distinct])
    numbers = dict(zip((ids[i] for i in distinct), classes, strict=True))
    classes = list(map(numbers.__getitem__, ids))
    return classes, _firsts(classes)


def _classify_items(dicts: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """`_classify` of dicts compared by their items.

    Grouped by the tuple of values (cheap to hash), then every dict compared with its class's first as a
    mapping (`dict.__eq__`, in C): if one differs (the same values under other keys), grouped by items instead."""
    try:
        classes = _numbered(list(map(tuple, map(dict.values, dicts))))
        first = _firsts(classes)
        if all(map(dict.__eq__, dicts, map(dicts.__getitem__, map(first.__getitem__, classes)))):
            return classes, first
        classes = _numbered(list(map(tuple, map(dict.items, dicts))))
    except TypeError:  # an unhashable value: that edge is a class of its own
        marks: list[Any] = []
        by_key: dict[Any, int] = {}
        for n, d in enumerate(dicts):
            try:
                marks.append(by_key.setdefault(tuple(d.items()), -1 - n))
            except TypeError:
                marks.append(n)
        classes = _numbered(marks)
    return classes, _firsts(classes)


def _numbered(keys: list[Any]) -> list[int]:
    """0, 1, 2, ... for the distinct keys in order of first appearance, one number per key given."""
    numbers: dict[Any, int] = {}
    return [numbers.setdefault(k, len(numbers)) for k in keys]


def _firsts(classes: list[int]) -> list[int]:
    """The index of each class's first member (classes numbered 0, 1, 2, ... in order of first appearance)."""
    first = dict(zip(reversed(classes), range(len(classes) - 1, -1, -1), strict=True))
    return [first[c] for c in range(len(first))]


def _transpose(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    return [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]


def _flat_adjacency(g: nx.Graph) -> tuple[list[Any], list[int], np.ndarray, list[dict[str, Any]], np.ndarray]:
    """Nodes in order, each node's degree, every neighbour slot flat (neighbour numbers, one NumPy array for the
    whole graph, in networkx's insertion order), each slot's edge dict, and each slot's own end."""
    nodes = list(g._node)
    index = {n: i for i, n in enumerate(nodes)}
    neighbours = g._adj.values()
    degrees = list(map(len, neighbours))
    flat = np.fromiter(map(index.__getitem__, chain.from_iterable(neighbours)), dtype=np.int64, count=sum(degrees))
    dicts = list(chain.from_iterable(map(dict.values, neighbours)))
    ends = np.repeat(np.arange(len(nodes), dtype=np.int64), degrees)
    return nodes, degrees, flat, dicts, ends


def read_columns(g: nx.Graph) -> Columns:
    """The graph's columns (see `Columns`), read from networkx's own dicts (`g._node`, `g._adj`, as
    pipeline/traffic/routing.py does: its view objects iterate through Python-level Mapping code). The
    neighbour lists are read flat, one NumPy array for the whole graph, and the edges of `g.edges()` picked out
    of it by one comparison (each edge once, from its end earlier in node order): no Python step per edge."""
    tid = g.graph.get("topology_id")
    nodes, degrees, flat, flat_dicts, ends = _flat_adjacency(g)
    node_dicts = list(g._node.values())
    names = sorted(set().union(*node_dicts))
    node_values = {k: list(map(dict.get, node_dicts, repeat(k))) for k in names}
    keep = flat >= ends
    eu_array, ev_array = ends[keep], flat[keep]
    eu, ev = eu_array.tolist(), ev_array.tolist()
    found_dicts = list(compress(flat_dicts, keep.tolist()))
    ek, first = _classify(found_dicts)
    classes = [found_dicts[i] for i in first]
    firsts = [(eu[i], ev[i]) for i in first]
    edges = (eu_array, ev_array, np.fromiter(ek, dtype=np.int64, count=len(ek)))
    return Columns(tid, g.graph, nodes, node_values, classes, firsts, eu, ev, ek, flat, degrees, flat_dicts, edges)


def _columns(g: nx.Graph | Columns) -> Columns:
    return g if isinstance(g, Columns) else read_columns(g)


def node_columns(g: nx.Graph | Columns) -> list[list[Any]]:
    """The `NODE_COLUMNS` of every node, one list per column (the table is written from these)."""
    c = _columns(g)
    _check_attrs(c.tid, c.node_values, NODE_ATTRS, "node")
    n = len(c.nodes)
    none = [None] * n
    v = c.node_values
    kind = v.get("kind")
    if kind is None or None in kind:
        missing = c.nodes[0 if kind is None else kind.index(None)]
        raise ValueError(f"topology {c.tid}: node {missing} has no kind")
    cols = [v.get(name, none) for name, _ in NODE_COLUMNS[3:]]
    cols[9] = [bool(a) for a in cols[9]]  # `assumed`: absent is False
    return [[c.tid] * n, list(c.nodes), list(range(n)), *cols]


def node_rows(g: nx.Graph | Columns) -> list[tuple[Any, ...]]:
    return list(zip(*node_columns(g), strict=True))


def edge_columns(g: nx.Graph | Columns) -> list[list[Any]]:
    """The `EDGE_COLUMNS` of every edge, one list per column: oriented as `g.edges()` gives it (the end that comes
    first in node order is the source), `position` its rank in `insertion_order`, the attributes its class's."""
    c = _columns(g)
    _check_attrs(c.tid, {k: None for d in c.classes for k in d}, EDGE_ATTRS, "edge")
    nodes = c.nodes
    iu, iv, ik = c.iu, c.iv, c.ik
    n = len(ik)
    attrs = [list(map([d[k] for d in c.classes].__getitem__, ik)) for k in _EDGE_VALUES]
    return [[c.tid] * n, list(map(nodes.__getitem__, iu)), list(map(nodes.__getitem__, iv)), list(range(n)), *attrs]


def edge_rows(g: nx.Graph | Columns) -> list[tuple[Any, ...]]:
    return list(zip(*edge_columns(g), strict=True))


def table_columns(tables: Iterable[Columns]) -> tuple[list[Any], list[Any], bool]:
    """The `NODE_COLUMNS` and `EDGE_COLUMNS` of every topology (what `node_columns` and `edge_columns` give,
    concatenated), for `write_columns`, and whether the rows are already in the tables' order.

    Built on numbers: node names, ids and link-class attributes are held once and each row picks its values by
    index (`columns.Coded`), so no list per column is made of ~300,000 Python values. The rows are put in the
    tables' order, (topology_id, node) and (topology_id, source, target), with `presorted` True: topologies by
    id, a topology's nodes by name, its edges by the ranks of their ends' names, so `write_columns` skips
    DuckDB's sort on three text keys (a third of writing the tables). Python orders str by code point, as
    DuckDB orders VARCHAR by UTF-8 bytes; the keys are unique (one row per node, per edge of a simple graph), so
    the order is total and the bytes are the ones the sort gives. Ids or names that are not all str, or
    repeated topology ids, leave the rows in graph order (False: `write_columns` sorts them)."""
    tables = list(tables)
    tids = [c.tid for c in tables]
    presorted = len(set(tids)) == len(tids) and all(
        type(t) is str and set(map(type, c.nodes)) <= {str} for t, c in zip(tids, tables, strict=True)
    )
    if presorted:
        tables.sort(key=lambda c: c.tid)
        tids.sort()
    names: list[Any] = []  # every topology's node names, one after the other
    node_attrs: list[list[Any]] = [[] for _ in NODE_COLUMNS[3:]]
    classes: list[dict[str, Any]] = []
    node_parts: list[tuple[np.ndarray, ...]] = []  # (topology, node number, position) per topology
    edge_parts: list[tuple[np.ndarray, ...]] = []  # (topology, source, target, position, class)
    for number, c in enumerate(tables):
        for into, part in zip(node_attrs, node_columns(c)[3:], strict=True):
            into += part
        _check_attrs(c.tid, {k: None for d in c.classes for k in d}, EDGE_ATTRS, "edge")
        iu, iv, ik = c._inserted
        n, m = len(c.nodes), len(ik)
        if presorted:
            by_name = np.asarray(sorted(range(n), key=c.nodes.__getitem__), dtype=np.int64)
            rank = np.empty(n, dtype=np.int64)
            rank[by_name] = np.arange(n)
            # (rank of source, rank of target) as one int64 key, in one argsort.
            by_ends = np.argsort(rank[iu] * n + rank[iv], kind="stable")
        else:
            by_name, by_ends = np.arange(n), np.arange(m)
        node_parts.append((np.full(n, number), by_name + len(names), by_name))
        edge_parts.append(
            (
                np.full(m, number),
                iu[by_ends] + len(names),
                iv[by_ends] + len(names),
                by_ends,
                ik[by_ends] + len(classes),
            )
        )
        names += c.nodes
        classes += c.classes
    tn, node, npos = _concatenated(node_parts, 3)
    te, src, dst, epos, cls = _concatenated(edge_parts, 5)
    nodes = [Coded(tids, tn), Coded(names, node), npos, *(Coded(values, node) for values in node_attrs)]
    edges = [
        Coded(tids, te),
        Coded(names, src),
        Coded(names, dst),
        epos,
        *(Coded([d[k] for d in classes], cls) for k in _EDGE_VALUES),
    ]
    return nodes, edges, presorted


def _concatenated(parts: list[tuple[np.ndarray, ...]], width: int) -> list[np.ndarray]:
    """Each of `width` columns, its parts (one per topology) joined; int64, empty when there are no parts."""
    return (
        [np.concatenate([p[i] for p in parts]).astype(np.int64, copy=False) for i in range(width)]
        if parts
        else [np.zeros(0, dtype=np.int64) for _ in range(width)]
    )


def graph_row(g: nx.Graph | Columns, endpoint_latency_ns: float) -> tuple[Any, ...]:
    """The graph's own attributes, and the endpoint latency the traffic stage adds to every path."""
    attrs = {**g.graph, "endpoint_latency_ns": endpoint_latency_ns}
    extra = set(attrs) - {c for c, _ in GRAPH_COLUMNS}
    if extra:
        raise ValueError(f"topology {g.graph['topology_id']}: graph attributes {sorted(extra)} have no column")
    return tuple(attrs.get(c) for c, _ in GRAPH_COLUMNS)


def _check_attrs(tid: Any, names: Iterable[str], known: tuple[str, ...], what: str) -> None:
    """A new attribute must get a column, or the graph the traffic stage rebuilds would silently lack it."""
    extra = set(names) - set(known)
    if extra:
        raise ValueError(
            f"topology {tid}: {what} attributes {sorted(extra)} have no column in pipeline/topology/export.py"
        )


def _reverse_slots(ends: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """For each slot of the flat neighbour list (node `ends[i]`'s neighbour `flat[i]`), the slot of the same edge
    in the other end's list (a self-loop, listed once: its own slot). The two slots of an edge share the key
    (smaller end, larger end), so sorted by it they come in pairs."""
    n = len(ends)
    rev = np.arange(n, dtype=np.int64)
    pairs = np.flatnonzero(ends != flat)
    lo, hi = np.minimum(ends[pairs], flat[pairs]), np.maximum(ends[pairs], flat[pairs])
    by_key = np.argsort(lo * (int(hi.max(initial=0)) + 1) + hi, kind="stable")
    first, second = by_key[0::2], by_key[1::2]
    if len(first) != len(second) or (lo[first] != lo[second]).any() or (hi[first] != hi[second]).any():
        raise ValueError("a node's neighbour list names a node whose own list does not name it back")
    rev[pairs[first]], rev[pairs[second]] = pairs[second], pairs[first]
    return rev


def _kahn(flat: list[int], offsets: list[int], rev: list[int], loops: bool) -> list[int]:
    """`insertion_order` on node numbers: the slots (indices into the flat neighbour list `flat`, node u's
    neighbours at `offsets[u]:offsets[u + 1]`) of the edges in emitted order, each edge once, from the end whose
    run emitted it. An edge is next at its other end when that end's head is at its reverse slot (`rev`).
    u's head is kept in a local while u's run lasts (no other node's step reads it); the loop without the
    self-loop test when there are none (`loops` False)."""
    head = offsets[:-1]
    stop = offsets[1:]
    out: list[int] = []
    emit = out.append
    stack = list(range(len(head) - 1, -1, -1))
    pop, push = stack.pop, stack.append
    if loops:
        while stack:
            u = pop()
            i = head[u]
            end = stop[u]
            while i < end:
                v = flat[i]
                if v == u:  # a self-loop: listed once among u's own neighbours, so it is next at both its ends
                    emit(i)
                    i += 1
                    continue
                j = rev[i]
                if head[v] != j:
                    break  # (u, v) waits for v's earlier neighbours; v's own turn re-examines it
                emit(i)
                i += 1
                head[v] = j + 1
                push(v)
            head[u] = i
        return out
    while stack:
        u = pop()
        i = head[u]
        end = stop[u]
        while i < end:
            v = flat[i]
            j = rev[i]
            if head[v] != j:
                break
            emit(i)
            i += 1
            head[v] = j + 1
            push(v)
        head[u] = i
    return out


def insertion_order(g: nx.Graph) -> list[tuple[Any, Any, dict[str, Any]]]:
    """Edges in an order that, added to a graph holding the same nodes, gives every node its neighbours in
    the same order as in `g` (networkx iterates neighbours in insertion order, and the traffic stage's
    tie-breaks follow it). Kahn's algorithm over the per-node neighbour lists: an edge is emitted once it is
    next in the lists of both its ends; the order it was built in proves such an order exists. Nodes are
    numbered first so the loop touches only lists of ints (the 24,576-GPU cluster has 233,792 edges)."""
    nodes, degrees, flat, dicts, ends = _flat_adjacency(g)
    rev = _reverse_slots(ends, flat)
    order = _kahn(flat.tolist(), [0, *accumulate(degrees)], rev.tolist(), bool((ends == flat).any()))
    us, vs = ends.tolist(), flat.tolist()
    out = [(nodes[us[i]], nodes[vs[i]], dicts[i]) for i in order]
    if len(out) != g.number_of_edges():
        raise ValueError(f"topology {g.graph['topology_id']}: neighbour orders admit no edge order")
    return out


_PY_TYPES: dict[str, type] = {"VARCHAR": str, "DOUBLE": float, "INTEGER": int, "BOOLEAN": bool}
_NOT_ATTRS = {"topology_id", "node", "source", "target", "position"}


def _types(columns: list[tuple[str, str]]) -> dict[str, type]:
    return {c: _PY_TYPES[t] for c, t in columns if c not in _NOT_ATTRS}


def _typed_value(k: str, v: Any, t: type | None, where: str) -> Any:
    """One value as its column's type (see `_typed`); v is not None."""
    if type(v) is t:  # already the column's exact type (bool is not int here): kept as is
        return v
    if hasattr(v, "item") and not isinstance(v, str | bytes):
        v = v.item()  # numpy scalars
    if t is None:
        return v if isinstance(v, bool | int | float | str) else json.dumps(v, sort_keys=True, default=str)
    if t is bool:
        if not isinstance(v, bool):
            raise ValueError(f"{where}: attribute {k}={v!r} is not a boolean")
        return v
    if t is int:
        if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v):
            raise ValueError(f"{where}: attribute {k}={v!r} is not an integer")
        return int(v)
    if t is float:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"{where}: attribute {k}={v!r} is not a number")
        return float(v)
    return str(v)


def _typed(attrs: dict[str, Any], types: dict[str, type], where: str) -> dict[str, Any]:
    """One type per attribute, the table column's (GraphML declares a key's type once, and Gephi / yEd read a
    key typed `long` on one graph and `double` on another as different columns); None left out (GraphML has no
    null); an attribute without a column keeps bool / int / float / str, anything else becomes JSON text."""
    return {k: _typed_value(k, v, types.get(k), where) for k, v in sorted(attrs.items()) if v is not None}


_NONE = type(None)
_PLAIN_KINDS = {bool, int, float, str}


@dataclass(frozen=True)
class _Typed:
    """A graph's attributes typed and None-free, from its columns (one pass for both exports).

    `nodes[name]` is typed per node (None where absent), for the names some node has a value for, sorted."""

    columns: Columns
    graph: dict[str, Any]
    nodes: dict[str, list[Any]]
    classes: list[dict[str, Any]]
    kinds: dict[str, set[type]] = field(default_factory=dict)  # per node attribute: the types of its values

    @cached_property
    def coded(self) -> dict[str, tuple[list[Any], np.ndarray] | None]:
        """Per node attribute of one type: its distinct values and, per node, 0 (None) or 1 + the index of its
        value; once for both exports, which format only the distinct values (see `_per_value`). Worked out on
        first use, in the process that writes the export: the stage hands a topology's exports to one process
        largest first, so this stays off the path before the fork."""
        return {k: _code(values, self.kinds[k]) for k, values in self.nodes.items()}


def _code(values: list[Any], kinds: set[type]) -> tuple[list[Any], np.ndarray] | None:
    """A column of one type as (distinct values, codes); None for several types (a set would merge 1, 1.0 and
    True, which format differently) or a value its own set cannot find."""
    if len(kinds) > 1:
        return None
    distinct = list(set(values) - {None})
    index = dict(zip(distinct, range(1, len(distinct) + 1), strict=True))
    index[None] = 0
    try:
        return distinct, np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))
    except KeyError:
        return None


def _typed_columns(c: Columns) -> _Typed:
    node_types, edge_types = _types(NODE_COLUMNS), _types(EDGE_COLUMNS)
    nodes: dict[str, list[Any]] = {}
    node_kinds: dict[str, set[type]] = {}
    for k, values in c.node_values.items():  # sorted by name
        t = node_types.get(k)
        kinds = set(map(type, values)) - {_NONE}
        if not kinds:
            continue
        if kinds != {t} and not (t is None and kinds <= _PLAIN_KINDS):
            values = [
                None if v is None else _typed_value(k, v, t, f"topology {c.tid} node {n}")
                for n, v in zip(c.nodes, values, strict=True)
            ]
            kinds = set(map(type, values)) - {_NONE}
        nodes[k] = values
        node_kinds[k] = kinds
    classes = [
        _typed(d, edge_types, f"topology {c.tid} edge {c.nodes[a]}-{c.nodes[b]}")
        for d, (a, b) in zip(c.classes, c.firsts, strict=True)
    ]
    return _Typed(c, _typed(c.graph, {}, f"topology {c.tid}"), nodes, classes, node_kinds)


def _per_value(t: _Typed, name: str, fmt: Callable[[list[Any]], Iterable[str]]) -> Sequence[bytes]:
    """`fmt` of node attribute `name`'s every value (it formats a list of values) as UTF-8, nothing for None;
    formatted once per distinct value when the column has one type (`_Typed.coded`), and picked out per node
    by NumPy."""
    coded = t.coded.get(name)
    if coded is None:
        return _per_value_of(t.nodes[name], fmt)
    distinct, codes = coded
    texts = np.empty(len(distinct) + 1, dtype=object)
    texts[:] = [b"", *map(str.encode, fmt(distinct))]
    return texts[codes]  # type: ignore[no-any-return]


def _per_value_of(values: list[Any], fmt: Callable[[list[Any]], Iterable[str]]) -> list[bytes]:
    """`_per_value` of a column that is not coded."""
    kinds = set(map(type, values)) - {_NONE}
    if len(kinds) > 1:
        return [b"" if v is None else text.encode() for v, text in zip(values, fmt(values), strict=True)]
    distinct = list(set(values) - {None})
    memo: dict[Any, bytes] = dict(zip(distinct, map(str.encode, fmt(distinct)), strict=True))
    memo[None] = b""
    try:
        return list(map(memo.__getitem__, values))
    except KeyError:  # NaN: a distinct object per value, never equal to itself
        return [memo[v] if v in memo else next(iter(fmt([v]))).encode() for v in values]


def _objects(items: Sequence[bytes]) -> np.ndarray:
    """The items as a NumPy object array, to be picked from by index arrays."""
    if isinstance(items, np.ndarray) and items.dtype == object:
        return items
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def _interleaved(columns: Sequence[np.ndarray]) -> bytes:
    """Row after row, each row's pieces in column order, joined: the text of `b"".join(map(b"".join, zip(*columns)))`
    with the pieces laid out by NumPy (strided assignment into one object array) instead of a tuple and a bytes
    object per row."""
    width = len(columns)
    out = np.empty(width * len(columns[0]), dtype=object)
    for i, column in enumerate(columns):
        out[i::width] = column
    return b"".join(out.tolist())


_CHUNK = 8192  # nodes or edges per piece of text: the 24,576-GPU cluster's 200 MB of GraphML never sit whole


def _slices(n: int) -> Iterator[slice]:
    return (slice(i, i + _CHUNK) for i in range(0, n, _CHUNK))


def _write(path: Path, chunks: Iterable[bytes]) -> None:
    """A `.gz` path is gzip-compressed with mtime 0 and a fixed level, so the bytes depend on the graph alone:
    the text is fed to one zlib stream piece by piece, which gives the very bytes `gzip.compress(text,
    compresslevel=1, mtime=0)` gives (zlib's output does not depend on how its input is split; a test checks).
    Level 1: the 24,576-GPU cluster's 230 MB of text compress 3× faster than at level 6, to ~6 MB instead of
    ~4 MB (these files are DVC outputs, not in git)."""
    if path.suffix == ".gz":
        z = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: a gzip wrapper, mtime 0
        parts = [z.compress(data) for data in chunks]
        parts.append(z.flush())
        atomic_write_bytes(path, b"".join(parts))
    else:
        atomic_write_bytes(path, b"".join(chunks))


def write_node_link(g: nx.Graph | Columns, path: Path) -> None:
    """Node-link JSON as `networkx.node_link_data(g)` writes it, default keys included (`edges`, `id`, `source`,
    `target`), so `networkx.node_link_graph(data)` reads it as is; attributes typed as in the GraphML export.
    Indented when plain (a reference, read by people), compact when gzip-compressed (a cluster)."""
    _write_node_link(_typed_columns(_columns(g)), path)


def _write_node_link(t: _Typed, path: Path) -> None:
    if path.suffix == ".gz":
        _write(path, _compact_node_link(t))
        return
    c = t.columns
    names = list(t.nodes)
    per_node = list(zip(*t.nodes.values(), strict=True)) if names else [()] * len(c.nodes)
    node_dicts = [
        {**{k: v for k, v in zip(names, values, strict=True) if v is not None}, "id": n}
        for n, values in zip(c.nodes, per_node, strict=True)
    ]
    data = {
        "directed": False,
        "multigraph": False,
        "graph": t.graph,
        "nodes": node_dicts,
        "edges": [
            {**t.classes[k], "source": c.nodes[a], "target": c.nodes[b]}
            for a, b, k in zip(c.eu, c.ev, c.ek, strict=True)
        ],
    }
    _write(path, [(json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n").encode()])


_JSON: dict[str, Any] = {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":")}
_HOLES = ("\x00source\x00", "\x00target\x00")  # stand-ins no attribute value can contain (JSON escapes NUL)


def _all_str(values: list[Any]) -> bool:
    """Every value a str (one C pass over the types, not a Python step per value)."""
    return set(map(type, values)) <= {str}


def _json(v: Any) -> str:
    """`json.dumps(v)` as the compact export writes it (strings through the same C encoder json.dumps uses)."""
    return encode_basestring(v) if type(v) is str else json.dumps(v, **_JSON)


def _member(key: str, before_id: bool = False) -> Callable[[list[Any]], Iterable[str]]:
    """`,"key":value` for each value, as json.dumps writes it (strings through its C encoder, in one map);
    `"key":value,` for a key sorted before "id" (see `_compact_node_link`)."""
    prefix = f"{_json(key)}:" if before_id else f",{_json(key)}:"

    def fmt(values: list[Any]) -> Iterable[str]:
        texts = map(encode_basestring if _all_str(values) else _json, values)
        if before_id:
            texts = map(operator.add, texts, repeat(","))
        return map(prefix.__add__, texts)

    return fmt


def _compact_node_link(t: _Typed) -> Iterator[bytes]:
    """The text `json.dumps(node_link, sort_keys=True, ensure_ascii=False, separators=(",", ":"))` gives, in
    pieces, built without one dict per node or edge: each link class's edge object is encoded once with
    stand-ins for its two ends, and every edge fills them with its ends' encoded ids (the 24,576-GPU cluster:
    233,792 edges, 7 classes); each node object is its sorted keys' encoded pieces, joined."""
    c = t.columns
    holes = [json.dumps(h, **_JSON) for h in _HOLES]
    heads, mids, tails = [], [], []
    for d in t.classes:
        text = json.dumps({**d, "source": _HOLES[0], "target": _HOLES[1]}, **_JSON)
        head, rest = text.split(holes[0])
        mid, tail = rest.split(holes[1])
        heads.append(head.encode())
        mids.append(mid.encode())
        tails.append(tail.encode())
    ids = _json_texts(c.nodes)
    yield b'{"directed":false,"edges":['
    # Each edge ends in a comma (its class's tail carries it); the last edge's is left off.
    id_objects, eu, ev, ek = _objects(ids), *c._edges
    head_objects, mid_objects = _objects(heads), _objects(mids)
    tail_objects = _objects([tail + b"," for tail in tails])
    for s in _slices(len(c.ek)):
        ks = ek[s]
        text = _interleaved([head_objects[ks], id_objects[eu[s]], mid_objects[ks], id_objects[ev[s]], tail_objects[ks]])
        yield text[:-1] if s.stop >= len(c.ek) else text
    yield f'],"graph":{json.dumps(t.graph, **_JSON)},"multigraph":false,"nodes":['.encode()
    # `{**d, "id": n}` with sorted keys. Every node has "id", so a present key sorted before it is written
    # `"key":value,` and one after it `,"key":value`: a node is its pieces in key order between braces. Each
    # node ends in a comma (the closing piece carries it); the last node's is left off.
    # The ids are encoded already (for the edges) and all distinct: no formatting once per distinct value.
    id_member = f"{_json('id')}:".encode()
    every = np.zeros(len(c.nodes), dtype=np.int64)
    columns = [_objects([b"{"])[every]]
    for k in sorted({*t.nodes, "id"}):
        piece = list(map(id_member.__add__, ids)) if k == "id" else _per_value(t, k, _member(k, k < "id"))
        columns.append(_objects(piece))
    columns.append(_objects([b"},"])[every])
    for s in _slices(len(c.nodes)):
        text = _interleaved([col[s] for col in columns])
        yield text[:-1] if s.stop >= len(c.nodes) else text
    yield b"]}\n"


def write_exports(g: nx.Graph | Columns, directory: Path, compress: bool) -> list[str]:
    """`<id>.json` and `<id>.graphml` (`.gz` added when `compress`); returns the file names written."""
    t = typed(_columns(g))
    names = export_names(t, compress)
    for name in names:
        write_export(t, directory / name)
    return names


def typed(c: Columns) -> _Typed:
    """The columns typed for the exports, once for both (attribute type errors are raised here)."""
    return _typed_columns(c)


def export_names(t: _Typed, compress: bool) -> list[str]:
    """The file names of one topology's exports: node-link JSON, then GraphML (`.gz` added when `compress`)."""
    return [f"{t.columns.tid}.{ext}{'.gz' if compress else ''}" for ext in ("json", "graphml")]


def write_export(t: _Typed, path: Path) -> None:
    """One export file, its format named by `path` (`<id>.json[.gz]` or `<id>.graphml[.gz]`): the stage writes
    each file as one job, in whichever process takes it; its bytes depend on the columns alone."""
    kind = path.name.removesuffix(".gz").rsplit(".", 1)[-1]
    if kind == "json":
        _write_node_link(t, path)
    elif kind == "graphml":
        _write_graphml(t, path)
    else:
        raise ValueError(f"{path}: not an export (expected .json or .graphml, optionally .gz)")


def _graphml_type(kinds: set[type]) -> str:
    if kinds <= {bool}:
        return "boolean"
    if kinds <= {int}:
        return "long"
    if kinds <= {int, float}:
        return "double"
    return "string"


_PLAIN = re.compile(r"[&<>\"'\n\r\t]")


def escape(text: str) -> str:
    """`xml.sax.saxutils.escape(text)`: &, > and < as entities (the ampersand first).

    Written out here (as CPython has it) rather than imported: importing xml.sax.saxutils imports urllib.request,
    http.client and ssl, tens of milliseconds at every start of the stage, for three `str.replace` calls.
    tests/test_topology_parallel.py checks both against the library on every character that matters."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def quoteattr(text: str) -> str:
    """`xml.sax.saxutils.quoteattr(text)` (see `escape`): escaped, newline, return and tab as character
    references, and quoted with " unless it holds " but not ' (then '); with both, " becomes &quot;."""
    text = escape(text).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' in text:
        return '"' + text.replace('"', "&quot;") + '"' if "'" in text else "'" + text + "'"
    return '"' + text + '"'


def _escape(text: str) -> str:
    """`escape`, skipped for the usual text that has nothing to escape."""
    return escape(text) if _PLAIN.search(text) else text


def _quoteattr(text: str) -> str:
    """`quoteattr`, skipped for the usual text that has nothing to escape."""
    return quoteattr(text) if _PLAIN.search(text) else f'"{text}"'


def _graphml_value(v: Any, kind: str) -> str:
    if kind == "boolean":
        return "true" if v else "false"
    if kind == "double":
        return repr(float(v))
    return _escape(str(v))


def _plain_texts(values: list[Any]) -> bool:
    """Every value a str with nothing to escape: one search over them all joined instead of one call per value
    (the pattern matches single characters, so no match can span two values)."""
    return _all_str(values) and not _PLAIN.search("".join(values))


def _quoted(names: list[Any]) -> list[bytes]:
    """`_quoteattr(str(n))` of each name, UTF-8."""
    if _plain_texts(names):
        return [b'"%b"' % n for n in map(str.encode, names)]
    return [_quoteattr(str(n)).encode() for n in names]


def _json_texts(values: list[Any]) -> list[bytes]:
    """`_json(v)` of each value, UTF-8 (all str: one C encoder call each, mapped)."""
    if _all_str(values):
        return list(map(str.encode, map(encode_basestring, values)))
    return [_json(v).encode() for v in values]


def _data(prefix: str, kind: str) -> Callable[[list[Any]], Iterable[str]]:
    """A node's `<data>` element for each value (the `prefix` opens it)."""

    def fmt(values: list[Any]) -> Iterable[str]:
        if kind == "string" and _plain_texts(values):
            return [f"{prefix}{v}</data>" for v in values]
        if kind == "string" and _all_str(values):
            return [f"{prefix}{_escape(v)}</data>" for v in values]
        return [f"{prefix}{_graphml_value(v, kind)}</data>" for v in values]

    return fmt


def write_graphml(g: nx.Graph | Columns, path: Path) -> None:
    """GraphML with typed keys (boolean / long / double / string) for Gephi and yEd; absent attributes left out.

    Written by hand from the columns rather than through networkx's writer, which builds an ElementTree element
    per node, edge and attribute (minutes and gigabytes on the 24,576-GPU cluster): keys sorted by scope and
    name, nodes and edges in graph order, text escaped as `xml.sax.saxutils` escapes it, as ElementTree would, so the
    bytes are deterministic and `networkx.read_graphml` reads back the same graph with the same types (tests/
    test_topology_exports.py checks every shipped topology).
    """
    _write_graphml(_typed_columns(_columns(g)), path)


def _write_graphml(t: _Typed, path: Path) -> None:
    _write(path, _graphml(t))


def _graphml(t: _Typed) -> Iterator[bytes]:
    """The document in pieces, every line ending in a newline; a node or edge's lines always in one piece."""
    c = t.columns
    keys: dict[tuple[str, str], tuple[str, str]] = {}  # (scope, name) -> (id, type)
    lines = [
        "<?xml version='1.0' encoding='utf-8'?>",
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
        'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">',
    ]
    edge_names = sorted({k for d in t.classes for k in d})
    scopes: dict[str, dict[str, set[type]]] = {
        "graph": {k: {type(v)} for k, v in sorted(t.graph.items())},
        "node": t.kinds,
        "edge": {k: {type(d[k]) for d in t.classes if k in d} for k in edge_names},
    }
    for scope, kinds in scopes.items():
        for name, types in kinds.items():
            kid, kind = f"d{len(keys)}", _graphml_type(types)
            keys[(scope, name)] = (kid, kind)
            lines.append(f'  <key id="{kid}" for="{scope}" attr.name={_quoteattr(name)} attr.type="{kind}" />')

    def data(scope: str, attrs: dict[str, Any], indent: str) -> list[str]:
        out = []
        for name, v in attrs.items():
            kid, kind = keys[(scope, name)]
            out.append(f'{indent}<data key="{kid}">{_graphml_value(v, kind)}</data>')
        return out

    lines.append('  <graph edgedefault="undirected">')
    lines += data("graph", t.graph, "    ")
    yield ("\n".join(lines) + "\n").encode()
    quoted = _quoted(c.nodes)  # each id once, not once per edge end
    pieces = []
    for name in t.nodes:
        kid, kind = keys[("node", name)]
        prefix = f'\n      <data key="{kid}">'
        pieces.append(_per_value(t, name, _data(prefix, kind)))
    opens = _objects([b"    <node id=%b>" % q for q in quoted])
    closes = _objects([b"\n    </node>\n"])
    columns = [opens, *map(_objects, pieces), closes[np.zeros(len(c.nodes), dtype=np.int64)]]
    for s in _slices(len(c.nodes)):
        yield _interleaved([col[s] for col in columns])
    # An edge is its source's opening, its target's quoted id and its class's data: three pieces, joined in C.
    sources = [b"    <edge source=%b target=" % q for q in quoted]
    ends = [
        (">\n" + "".join(f"{line}\n" for line in [*data("edge", d, "      "), "    </edge>"])).encode()
        for d in t.classes
    ]
    source_objects, quoted_objects, end_objects = _objects(sources), _objects(quoted), _objects(ends)
    eu, ev, ek = c._edges
    for s in _slices(len(c.ek)):
        yield _interleaved([source_objects[eu[s]], quoted_objects[ev[s]], end_objects[ek[s]]])
    yield b"  </graph>\n</graphml>\n"
