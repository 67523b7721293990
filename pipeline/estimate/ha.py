"""Failure scenarios: does a route survive, and how does bandwidth change? A surviving route says nothing
about session continuity, failover time or workload throughput, and every result says so."""

from __future__ import annotations

from typing import Any

import networkx as nx

from ..core.format import format_count, format_quantity
from .view import View

NOT_ESTABLISHED = (
    "A surviving route is not failover: session continuity, failover time and workload throughput are not "
    "established by this analysis."
)


def _route(g: nx.Graph, a: str, b: str, removed_nodes: set[str], removed_edges: set[frozenset[str]]) -> bool:
    def keep_edge(u: str, v: str) -> bool:
        return g[u][v]["network"] in ("scale_out", "host") and frozenset((u, v)) not in removed_edges

    view = nx.subgraph_view(g, filter_node=lambda n: n not in removed_nodes, filter_edge=keep_edge)
    return a in view and b in view and nx.has_path(view, a, b)


def scenarios(view: View, a: str, b: str) -> list[dict[str, Any]]:
    """Fail rank a's backend NIC, one of its leaf's uplink trunks, and one spine of its pod."""
    g = view.g
    out: list[dict[str, Any]] = []
    nics = view.nics(a)
    leaf = view.leaf(a)
    if not nics or leaf is None:
        return out
    nic_bw = sum(d["bandwidth_gbps"] or 0 for nic in nics for m, d in g[nic].items() if view.kind[m] == "leaf")
    # 1. The NIC beside accelerator a fails: traffic can only detour through the host to a neighbour's NIC.
    survives = _route(g, a, b, set(nics[:1]), set())
    detour = [
        n
        for cpu in g[a]
        if view.kind[cpu] == "cpu"
        for n in g[cpu]
        if view.kind[n] == "nic" and g.nodes[n].get("role") == "scale_out" and n not in nics[:1]
    ]
    out.append(
        {
            "failure": f"backend NIC {nics[0]} beside {a}",
            "route_survives": survives,
            "bandwidth_before_gbps": nic_bw,
            "bandwidth_after_gbps": (nic_bw / 2 if detour else 0.0) if survives else 0.0,
            "explanation": (
                "the rank detours through its CPU to a neighbouring NIC and shares it with that NIC's own "
                "rank (half the bandwidth each)"
                if survives and detour
                else "no detour: the rank is cut off"
            ),
        }
    )
    # 2. One uplink trunk of that leaf fails: the leaf's uplink capacity drops by one trunk.
    ups = [(m, d) for m, d in g[leaf].items() if view.kind[m] in ("spine",)]
    if ups:
        up_total = sum(d["bandwidth_gbps"] or 0 for _, d in ups)
        down_total = sum(d["bandwidth_gbps"] or 0 for m, d in g[leaf].items() if view.kind[m] == "nic")
        lost = ups[0][1]["bandwidth_gbps"] or 0
        out.append(
            {
                "failure": f"uplink {leaf} – {ups[0][0]}",
                "route_survives": _route(g, a, b, set(), {frozenset((leaf, ups[0][0]))}),
                "bandwidth_before_gbps": up_total,
                "bandwidth_after_gbps": up_total - lost,
                "explanation": (
                    f"the leaf's uplink capacity falls from {format_quantity(up_total, 'Gb/s')} to "
                    f"{format_quantity(up_total - lost, 'Gb/s')}: oversubscription "
                    f"{format_count(down_total / up_total)}:1 becomes {format_count(down_total / (up_total - lost))}:1 "
                    "for traffic leaving the leaf"
                ),
            }
        )
        # 3. That spine fails entirely: every leaf of the pod loses one trunk.
        spine = ups[0][0]
        out.append(
            {
                "failure": f"spine {spine}",
                "route_survives": _route(g, a, b, {spine}, set()),
                "bandwidth_before_gbps": up_total,
                "bandwidth_after_gbps": up_total - lost,
                "explanation": (
                    f"every leaf of pod {g.nodes[spine].get('pod')} loses one uplink trunk "
                    f"({format_quantity(lost, 'Gb/s')})"
                ),
            }
        )
    for row in out:
        row["not_established"] = NOT_ESTABLISHED
    return out
