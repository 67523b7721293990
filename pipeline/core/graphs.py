"""Topology graphs rebuilt from registry/topology/*.parquet, exactly as the topology stage built them.

The traffic stage reads the topology stage's outputs instead of importing its code, so `dvc.yaml` says exactly
what traffic depends on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import networkx as nx

from ..errors import UnknownIdError, UsageError
from .paths import Layout
from .registry import Tables, columns, table_paths

# The attribute names the exports carry; nodes' with their column's type in topology_nodes.
NODE_TYPES = {
    "kind": "VARCHAR",
    "role": "VARCHAR",
    "label": "VARCHAR",
    "within": "VARCHAR",
    "domain": "VARCHAR",
    "block": "INTEGER",
    "rail": "INTEGER",
    "tier": "INTEGER",
    "pod": "INTEGER",
    "assumed": "BOOLEAN",
    "index": "INTEGER",
    "plane": "INTEGER",
    "aggregate": "BOOLEAN",
}
NODE_ATTRS = tuple(NODE_TYPES)
EDGE_ATTRS = (
    "network",
    "bandwidth_gbps",
    "unit",
    "direction",
    "links",
    "latency_ns",
    "field",
    "status",
    "note",
    "confidence",
)
GRAPH_COLUMNS = columns(
    "topology_id reference form_factor kind title caveat scale_out_protocol scale_out_in_network_reduction "
    "scale_out_in_network_reduction_basis scale_out_nic_gbps:DOUBLE scale_out_nic_status frontend_nic_gbps:DOUBLE "
    "frontend_nic_status pods:INTEGER "
    "leaves:INTEGER rails:INTEGER ecmp_mode ecmp_seed:BIGINT placement endpoint_latency_ns:DOUBLE switch_product "
    "switch_radix:INTEGER switch_port_gbps:DOUBLE switch_lineage"
)
# An edge's attribute row by its hash. The values are hashed as text, so that rows SQL calls equal but Python
# tells apart (0.0 and -0.0) get different hashes and each edge keeps its own values.
_EDGE_HASH = f"hash({', '.join(f'CAST({a} AS VARCHAR)' for a in EDGE_ATTRS)})"
TOPOLOGY_TABLES = ("topology_graphs", "topology_nodes", "topology_edges", "topology_summaries")


@dataclass
class Topology:
    """An installed topology: the graph, its summary and the endpoint latency, as the topology stage wrote them."""

    graph: nx.Graph
    summary: dict[str, Any]
    endpoint_latency_ns: float


class EdgeAttrs(dict):
    """The attributes shared by the edges that have the same ones (233,792 edges of the largest cluster have 8
    distinct rows). Read-only, so that changing one edge's cannot silently change another's (`dict(d)` and
    `copy.copy` give a changeable copy); a deep copy or a pickle keeps them shared and read-only."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            "a topology's edge attributes are shared by every edge with the same ones and read-only; "
            "change a copy (dict(attrs)), or load with Topologies(lay, read_only=False)"
        )

    __setitem__ = __delitem__ = __ior__ = update = pop = popitem = clear = setdefault = _refuse  # type: ignore[assignment]

    def __copy__(self) -> dict[str, Any]:
        return dict(self)  # one edge's attributes to change

    def __reduce__(self) -> tuple[Any, ...]:
        return (EdgeAttrs, (dict(self),))  # copy.deepcopy, pickle: still read-only


class Topologies:
    """Topologies from registry/topology/, each rebuilt once; `read_only`: edges share `EdgeAttrs`."""

    def __init__(self, lay: Layout, read_only: bool = True) -> None:
        self.read_only = read_only
        paths = table_paths(lay, "topology")
        missing = [t for t in TOPOLOGY_TABLES if t not in paths]
        if missing:
            raise UsageError(
                f"{lay.relative(lay.registry_dir / 'topology')}/ has no {', '.join(missing)}: "
                "run `dvc repro` (or `fabricref topology --all`) first"
            )
        self.tables = Tables({t: paths[t] for t in TOPOLOGY_TABLES})
        self._cache: dict[str, Topology] = {}
        self.ids = [r["topology_id"] for r in self.tables.rows("SELECT topology_id FROM topology_graphs ORDER BY 1")]

    def close(self) -> None:
        self.tables.close()

    def __enter__(self) -> Topologies:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, topology_id: str) -> Topology:
        if topology_id not in self._cache:
            self._cache[topology_id] = self._load(topology_id)
        return self._cache[topology_id]

    def _load(self, topology_id: str) -> Topology:
        if topology_id not in self.ids:
            raise UnknownIdError(
                "topology",
                topology_id,
                self.ids,
                "registry/topology/ holds the built ones: a new reference or cluster needs `dvc repro` first",
            )
        (graph_row,) = self.tables.rows("SELECT * FROM topology_graphs WHERE topology_id = ?", topology_id)
        endpoint = graph_row.pop("endpoint_latency_ns")
        g = nx.Graph(**{k: v for k, v in graph_row.items() if v is not None})
        # Straight into networkx's node and adjacency dicts, as `add_nodes_from` would fill them on a new graph
        # (which also checks every node for being new and copies its attributes).
        g._node.update(self._nodes(topology_id))
        g._adj.update((n, {}) for n in g._node)
        protos = self._edge_attrs(topology_id) if self.read_only else None
        if protos is None:
            g.add_edges_from(self._edge_rows(topology_id))
        else:
            _add_edges(g, self._edge_ends(topology_id), protos)
        (summary,) = self.tables.rows("SELECT summary FROM topology_summaries WHERE topology_id = ?", topology_id)
        return Topology(g, json.loads(summary["summary"]), endpoint)

    def _nodes(self, topology_id: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """One topology's nodes in `position` order, each with its non-NULL attributes."""
        _, rows = self.tables.tuples(
            f"SELECT node, {', '.join(NODE_ATTRS)} FROM topology_nodes WHERE topology_id = ? ORDER BY position",
            topology_id,
        )
        return ((n, {a: v for a, v in zip(NODE_ATTRS, r, strict=True) if v is not None}) for n, *r in rows)

    def _edge_ends(self, topology_id: str) -> list[tuple[str, str, int]]:
        """Each edge's ends and the hash of its attributes (the key of `_edge_attrs`), in `position` order."""
        return self.tables.tuples(
            f"SELECT source, target, {_EDGE_HASH} FROM topology_edges WHERE topology_id = ? ORDER BY position",
            topology_id,
        )[1]

    def _edge_attrs(self, topology_id: str) -> dict[int, dict[str, Any]] | None:
        """The distinct attribute rows of a topology's edges by their hash; None if two distinct rows share one."""
        _, rows = self.tables.tuples(
            f"SELECT {_EDGE_HASH} AS h, {', '.join(EDGE_ATTRS)} FROM topology_edges WHERE topology_id = ? GROUP BY ALL",
            topology_id,
        )
        protos = {r[0]: dict(zip(EDGE_ATTRS, r[1:], strict=True)) for r in rows}
        return protos if len(protos) == len(rows) else None

    def _edge_rows(self, topology_id: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Every edge with a dict of its own."""
        _, rows = self.tables.tuples(
            f"SELECT source, target, {', '.join(EDGE_ATTRS)} FROM topology_edges WHERE topology_id = ? "
            "ORDER BY position",
            topology_id,
        )
        return ((r[0], r[1], dict(zip(EDGE_ATTRS, r[2:], strict=True))) for r in rows)


def _add_edges(g: nx.Graph, ends: list[tuple[str, str, int]], protos: dict[int, dict[str, Any]]) -> None:
    """The edges, those with the same row sharing one `EdgeAttrs`, set straight into the adjacency dicts
    (`add_edges_from` would give each a copy)."""
    attrs = {h: EdgeAttrs(d) for h, d in protos.items()}
    adj = g._adj
    for u, v, h in ends:
        adj[u][v] = adj[v][u] = attrs[h]


def load_topology(lay: Layout, topology_id: str) -> Topology:
    """One topology, every edge with attributes of its own (its user may change them)."""
    with Topologies(lay, read_only=False) as topologies:
        return topologies.get(topology_id)
