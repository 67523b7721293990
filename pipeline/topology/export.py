"""Deterministic exports: node-link JSON and GraphML per reference, and rows for the registry tables."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import networkx as nx

from ..core.files import atomic_write_bytes

NODE_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("node", "VARCHAR"),
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
]
EDGE_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("source", "VARCHAR"),
    ("target", "VARCHAR"),
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
    return [
        (
            tid,
            n,
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
        )
        for n, d in g.nodes(data=True)
    ]


def edge_rows(g: nx.Graph) -> list[tuple[Any, ...]]:
    tid = g.graph["topology_id"]
    return [
        (
            tid,
            a,
            b,
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
