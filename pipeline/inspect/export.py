"""`fabricref export graph`: a topology's graph as GraphML or node-link JSON, written on demand from the topology
stage's tables (nothing in the pipeline reads either format, so the stage does not write them on every run).

Both are networkx's own writers, so `networkx.read_graphml` and `networkx.node_link_graph` read the files back
as the same graph. GraphML has no null: an attribute that is None (an unknown bandwidth) is left out of both
formats. The bytes depend on the tables alone: same registry, same file."""

from __future__ import annotations

import io
import json

import networkx as nx

from ..core.graphs import load_topology
from ..core.paths import Layout, check_slug

FORMATS = ("graphml", "node-link")


def graph_bytes(lay: Layout, topology_id: str, fmt: str = "graphml") -> bytes:
    """The topology's graph, as registry/topology/ holds it, in `fmt` (one of FORMATS)."""
    return export_bytes(load_topology(lay, check_slug(topology_id, "topology id")).graph, fmt)


def export_bytes(g: nx.Graph, fmt: str = "graphml") -> bytes:
    """A graph in `fmt` (one of FORMATS), None attributes left out."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    plain = nx.Graph(**_known(g.graph))
    plain.add_nodes_from((n, _known(d)) for n, d in g.nodes(data=True))
    plain.add_edges_from((u, v, _known(d)) for u, v, d in g.edges(data=True))
    if fmt == "node-link":
        data = nx.node_link_data(plain, edges="edges")
        return (json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    out = io.BytesIO()
    nx.write_graphml(plain, out, infer_numeric_types=True)
    return out.getvalue()


def _known(attrs: dict) -> dict:
    return {k: v for k, v in sorted(attrs.items()) if v is not None}
