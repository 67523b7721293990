"""`fabricref export graph`: a topology's graph as GraphML or node-link JSON, written on demand from the topology
stage's tables by networkx's own writers (so networkx reads them back as the same graph). GraphML has no null: a
None attribute is left out of both formats.

Every edge also carries `weight`, its rate per direction in Gb/s (a rate: a larger weight is a fatter link), and
`compute_path`, false for the frontend and management networks (filter on it before a shortest path between
accelerators).
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from typing import Any

import networkx as nx

from ..core.graphs import load_topology
from ..core.paths import Layout, check_slug
from ..core.registry import Tables, table_paths
from ..errors import UsageError

FORMATS = ("graphml", "node-link")
# Networks whose links never carry a collective between accelerators.
NOT_COMPUTE = ("frontend", "management")


def graph_bytes(
    lay: Layout, topology_id: str, fmt: str = "graphml", workload: str | None = None, aggregate: bool = False
) -> bytes:
    """The topology's graph in `fmt` (one of FORMATS), with `workload`'s per-link loads; `aggregate`: tier × pod."""
    return export_bytes(export_graph(lay, topology_id, workload, aggregate), fmt)


def export_graph(lay: Layout, topology_id: str, workload: str | None = None, aggregate: bool = False) -> nx.Graph:
    """The graph an export writes: the registry's, with `weight`, `compute_path` and a workload's loads on edges."""
    g = load_topology(lay, check_slug(topology_id, "topology id")).graph
    for _u, _v, d in g.edges(data=True):
        d.update(tool_attrs(d))
    if workload is not None:
        add_workload(lay, g, topology_id, check_slug(workload, "workload id"))
    return aggregated(g) if aggregate else g


def tool_attrs(d: dict[str, Any]) -> dict[str, Any]:
    rate = d.get("bandwidth_gbps")
    if rate is not None and d.get("direction") == "bidirectional":
        rate = rate / 2
    return {"weight": rate, "compute_path": d.get("network") not in NOT_COMPUTE}


def add_workload(lay: Layout, g: nx.Graph, topology_id: str, workload: str) -> None:
    """The traffic stage's loads of `workload` as edge attributes (zero on idle links): `workload_bytes_forward`
    (source to target), `workload_bytes_reverse` and `workload_bytes` per iteration, and `workload_time_share`,
    the fraction of the workload's communication time the link is busy (Σ utilisation × phase time ÷ Σ phase
    time)."""
    tables = Tables({k: v for k, v in table_paths(lay, "traffic").items() if k in ("traffic", "traffic_links")})
    try:
        phases = tables.rows(
            "SELECT phase, count, total_seconds FROM traffic WHERE topology_id = ? AND workload_id = ?",
            topology_id,
            workload,
        )
        if not phases:
            known = [r["workload_id"] for r in tables.rows(
                "SELECT DISTINCT workload_id FROM traffic WHERE topology_id = ? ORDER BY 1", topology_id)]  # fmt: skip
            raise UsageError(
                f"--workload {workload}: the traffic stage laid no such workload on {topology_id} "
                f"(it laid {', '.join(known) or 'none'}; a workload's `targets` name its topologies and "
                "`dvc repro` lays it on them)"
            )
        links = tables.rows(
            "SELECT l.source, l.target, l.bytes_forward * t.count AS fwd, l.bytes_reverse * t.count AS rev, "
            "l.utilization * t.total_seconds AS busy FROM traffic_links l JOIN traffic t "
            "USING (topology_id, workload_id, phase) WHERE topology_id = ? AND workload_id = ? ORDER BY ALL",
            topology_id,
            workload,
        )
    finally:
        tables.close()
    total = sum(p["total_seconds"] or 0.0 for p in phases)
    loads: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for r in links:
        acc = loads[(r["source"], r["target"])]
        acc[0] += r["fwd"] or 0.0
        acc[1] += r["rev"] or 0.0
        acc[2] += r["busy"] or 0.0
    g.graph["workload"] = workload
    g.graph["workload_seconds"] = total
    for u, v, d in g.edges(data=True):
        fwd, rev, busy = loads.get((u, v), (0.0, 0.0, 0.0))
        if (u, v) not in loads and (v, u) in loads:
            rev, fwd, busy = loads[(v, u)]
        d["workload_bytes_forward"], d["workload_bytes_reverse"] = fwd, rev
        d["workload_bytes"] = fwd + rev
        d["workload_time_share"] = min(1.0, busy / total) if total > 0 else 0.0


def _group_of(g: nx.Graph) -> dict[str, str]:
    """Each node's group: its kind (and role, for a kind whose parts play several), in its pod; a part without a
    pod of its own (a server's GPU, NIC) is in the pod of the leaves its server's NICs reach."""
    block_pod: dict[Any, Any] = {}
    for u, v in g.edges():
        for a, b in ((u, v), (v, u)):
            block, pod = g.nodes[a].get("block"), g.nodes[b].get("pod")
            if block is not None and pod is not None and "pod" not in g.nodes[a]:
                block_pod.setdefault(block, pod)
    roles: dict[str, set[Any]] = defaultdict(set)
    for _n, d in g.nodes(data=True):
        roles[d.get("kind")].add(d.get("role"))
    groups = {}
    for n, d in g.nodes(data=True):
        kind, role = d.get("kind", "part"), d.get("role")
        name = kind if len(roles[kind]) == 1 or role is None else f"{kind}-{role}"
        pod = d.get("pod", block_pod.get(d.get("block")))
        groups[n] = name if pod is None else f"pod{pod}/{name}"
    return groups


def aggregated(g: nx.Graph) -> nx.Graph:
    """Tier × pod: one node per group (`_group_of`) with its `parts` count, one edge per pair of groups with the
    links between them summed (`links`, `edges`, `weight`, workload bytes; the time share weighted by rate)."""
    groups = _group_of(g)
    out = nx.Graph(**{**g.graph, "aggregated": "tier x pod"})
    for n, d in g.nodes(data=True):
        group = groups[n]
        if group not in out:
            attrs = {"kind": d.get("kind"), "role": d.get("role"), "pod": d.get("pod"), "parts": 0}
            if "pod" not in d and "/" in group:
                attrs["pod"] = int(group.split("/", 1)[0].removeprefix("pod"))
            out.add_node(group, **{k: v for k, v in attrs.items() if v is not None}, label=group)
        out.nodes[group]["parts"] += 1
    sums = ("links", "weight", "workload_bytes_forward", "workload_bytes_reverse", "workload_bytes")
    # An edge's source is the group met first (as the export lists it): forward bytes run from source to target.
    order = {group: i for i, group in enumerate(out)}
    for u, v, d in g.edges(data=True):
        a, b = groups[u], groups[v]
        if order[a] > order[b]:
            a, b, d = b, a, {**d, "workload_bytes_forward": d.get("workload_bytes_reverse"),
                             "workload_bytes_reverse": d.get("workload_bytes_forward")}  # fmt: skip
        if not out.has_edge(a, b):
            out.add_edge(a, b, edges=0, networks=set(), compute_path=False, busy=0.0, rated=0.0)
        e = out.edges[a, b]
        e["edges"] += 1
        e["networks"].add(d.get("network"))
        e["compute_path"] = e["compute_path"] or bool(d.get("compute_path"))
        for key in sums:
            if d.get(key) is not None:
                e[key] = e.get(key, 0) + d[key]
        if d.get("workload_time_share") is not None and d.get("weight"):
            e["busy"] += d["workload_time_share"] * d["weight"]
            e["rated"] += d["weight"]
    for _a, _b, e in out.edges(data=True):
        e["network"] = "+".join(sorted(n for n in e.pop("networks") if n))
        busy, rated = e.pop("busy"), e.pop("rated")
        if "workload_bytes" in e:
            e["workload_time_share"] = busy / rated if rated else 0.0
    return out


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
