"""Topology graphs as the topology stage wrote them: rebuilt from registry/topology/*.parquet.

The traffic stage lays workloads on these graphs. It reads the topology stage's outputs instead of importing
the topology package to build them again, so `dvc.yaml` can say exactly what traffic depends on (the tables),
and a change to the topology code reruns topology first. The rebuilt graph is the built one: same nodes in the
same order, same attributes, every node's neighbours in the same order (tests/test_topology.py checks it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import networkx as nx

from .errors import UnknownIdError, UsageError
from .paths import Layout
from .registry import Tables, table_paths

# Attribute names the exports carry (pipeline/topology/export.py refuses a graph with any other).
NODE_ATTRS = (
    "kind",
    "role",
    "label",
    "within",
    "domain",
    "block",
    "rail",
    "tier",
    "pod",
    "assumed",
    "index",
    "plane",
    "aggregate",
)
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
GRAPH_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("reference", "VARCHAR"),
    ("form_factor", "VARCHAR"),
    ("kind", "VARCHAR"),
    ("title", "VARCHAR"),
    ("caveat", "VARCHAR"),
    ("scale_out_protocol", "VARCHAR"),
    ("scale_out_in_network_reduction", "VARCHAR"),
    ("scale_out_in_network_reduction_basis", "VARCHAR"),
    ("scale_out_nic_gbps", "DOUBLE"),
    ("frontend_nic_gbps", "DOUBLE"),
    ("pods", "INTEGER"),
    ("leaves", "INTEGER"),
    ("rails", "INTEGER"),
    ("ecmp_mode", "VARCHAR"),
    ("ecmp_seed", "BIGINT"),
    ("placement", "VARCHAR"),
    ("endpoint_latency_ns", "DOUBLE"),
    ("switch_product", "VARCHAR"),
    ("switch_radix", "INTEGER"),
    ("switch_port_gbps", "DOUBLE"),
    ("switch_lineage", "VARCHAR"),
]
TOPOLOGY_TABLES = ("topology_graphs", "topology_nodes", "topology_edges", "topology_summaries")


@dataclass
class Topology:
    """An installed topology: the graph, its summary (as the topology stage computed it) and the endpoint
    latency (models/topology/defaults.yaml, as the topology stage read it)."""

    graph: nx.Graph
    summary: dict[str, Any]
    endpoint_latency_ns: float


class Topologies:
    """Reads topologies from registry/topology/, each rebuilt once and kept."""

    def __init__(self, lay: Layout) -> None:
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
        names, rows = self.tables.tuples(
            f"SELECT node, {', '.join(NODE_ATTRS)} FROM topology_nodes WHERE topology_id = ? ORDER BY position",
            topology_id,
        )
        attrs = names[1:]
        g.add_nodes_from((r[0], {k: v for k, v in zip(attrs, r[1:], strict=True) if v is not None}) for r in rows)
        names, rows = self.tables.tuples(
            f"SELECT source, target, {', '.join(EDGE_ATTRS)} FROM topology_edges WHERE topology_id = ? "
            "ORDER BY position",
            topology_id,
        )
        keys = names[2:]
        g.add_edges_from((r[0], r[1], dict(zip(keys, r[2:], strict=True))) for r in rows)
        (summary,) = self.tables.rows("SELECT summary FROM topology_summaries WHERE topology_id = ?", topology_id)
        return Topology(g, json.loads(summary["summary"]), endpoint)


def load_topology(lay: Layout, topology_id: str) -> Topology:
    with Topologies(lay) as topologies:
        return topologies.get(topology_id)
