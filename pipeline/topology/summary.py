"""What a topology amounts to: counts, per-accelerator bandwidth by network, oversubscription, bisection, hops;
one pass over the edges and two small searches, never every pair of accelerators."""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from typing import Any

import networkx as nx

TIER_OF = {"leaf": 1, "spine": 2, "core": 3}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def summarize(g: nx.Graph) -> dict[str, Any]:
    kind = nx.get_node_attributes(g, "kind")
    role = nx.get_node_attributes(g, "role")
    nodes_by_kind = dict(sorted(Counter(kind.values()).items()))
    edges_by_network: Counter[str] = Counter()
    # Bandwidth between switch tiers and at endpoints, summed per direction; None if any link is unknown.
    down: dict[str, float] = defaultdict(float)  # per switch: sum of links toward endpoints
    up: dict[str, float] = defaultdict(float)
    tier_up_total: dict[int, float] = defaultdict(float)
    endpoint_total = 0.0
    unknown_bw = False
    for a, b, d in g.edges(data=True):  # in `g.edges()` order: every sum adds its terms in one order
        edges_by_network[d["network"]] += 1
        if d["network"] != "scale_out":
            continue
        ka, kb = kind[a], kind[b]
        bw = d["bandwidth_gbps"]
        if bw is None:
            unknown_bw = True
            continue
        if ka == "nic" or kb == "nic":
            sw = b if ka == "nic" else a
            down[sw] += bw
            endpoint_total += bw
            continue
        lo, hi = (a, b) if TIER_OF[ka] < TIER_OF[kb] else (b, a)
        up[lo] += bw
        down[hi] += bw
        tier_up_total[TIER_OF[kind[lo]]] += bw
    accelerators = [n for n, k in kind.items() if k == "accelerator"]
    domains = Counter(g.nodes[n].get("domain") for n in accelerators)
    sizes = sorted(set(domains.values()))
    first = accelerators[0] if accelerators else None
    per_acc: dict[str, Any] = {}
    assumed: list[str] = []  # the figures below that rest on a labelled assumption, as `per_accelerator.KEY`
    if first is not None:
        su_links = [d for _, _, d in g.edges(first, data=True) if d["network"] == "scale_up"]
        su = [d["bandwidth_gbps"] for d in su_links]
        per_acc["scale_up_gbps"] = None if not su or None in su else _round(sum(su))
        if per_acc["scale_up_gbps"] is not None and any(d.get("status") == "assumed" for d in su_links):
            assumed.append("per_accelerator.scale_up_gbps")
        block_nodes = _block_members(g, first)
        gpus = sum(1 for n in block_nodes if kind[n] == "accelerator")
        for key in ("scale_out", "frontend"):
            nics = [n for n in block_nodes if kind[n] == "nic" and role.get(n) == key]
            speed = g.graph.get(f"{key}_nic_gbps")
            per_acc[f"{key}_nics"] = _round(len(nics) / gpus) if gpus else None
            per_acc[f"{key}_gbps"] = None if speed is None or not gpus else _round(len(nics) * speed / gpus)
            counted = any(g.nodes[n].get("assumed") for n in nics)
            if counted and per_acc[f"{key}_nics"]:
                assumed.append(f"per_accelerator.{key}_nics")
            if per_acc[f"{key}_gbps"] and (counted or g.graph.get(f"{key}_nic_status") == "assumed"):
                assumed.append(f"per_accelerator.{key}_gbps")
    labels = _part_labels(g)
    oversub: dict[str, Any] = {}
    for tier_kind in ("leaf", "spine"):
        sw = next((n for n, k in kind.items() if k == tier_kind), None)
        if sw is not None and up.get(sw):
            oversub[tier_kind] = _round(down[sw] / up[sw])
    bisection = None
    if endpoint_total and not unknown_bw:
        capacities = [endpoint_total, *(tier_up_total[t] for t in sorted(tier_up_total))]
        bisection = _round(min(capacities) / 2)
    out = {
        "topology_id": g.graph["topology_id"],
        "title": g.graph.get("title"),
        "kind": g.graph.get("kind"),
        "nodes_by_kind": nodes_by_kind,
        "edges_by_network": dict(sorted(edges_by_network.items())),
        "accelerators": len(accelerators),
        "scale_up_domains": len(domains),
        "scale_up_domain_size": sizes[0] if len(sizes) == 1 else sizes,
        "per_accelerator": per_acc,
        "assumed_figures": assumed,
        # Parts (as `nodes_by_kind_and_role` names them) counted on a labelled assumption, and parts drawn as one
        # aggregate node for several a source does not count (a rack's switch chips).
        "assumed_parts": sorted({labels[n] for n, d in g.nodes(data=True) if d.get("assumed")}),
        "aggregate_parts": sorted({labels[n] for n, d in g.nodes(data=True) if d.get("aggregate")}),
        "oversubscription": oversub,
        "bisection_bandwidth_gbps": bisection,
        "bisection_note": None
        if bisection is not None
        else "no scale-out fabric in this topology (a single building block)",
        "hops": _hops(g, kind, accelerators, domains),
        "scale_out_protocol": g.graph.get("scale_out_protocol"),
        "scale_out_in_network_reduction": g.graph.get("scale_out_in_network_reduction"),
        "caveat": g.graph.get("caveat"),
    }
    if g.graph.get("switch_product"):
        # The named switch product and the fields its radix and port speed came from (with their statuses).
        out["switch"] = {
            "product": g.graph["switch_product"],
            "radix": g.graph.get("switch_radix"),
            "port_gbps": g.graph.get("switch_port_gbps"),
            "lineage": json.loads(g.graph.get("switch_lineage") or "[]"),
        }
    return out


def _block_members(g: nx.Graph, node: str) -> list[str]:
    if g.nodes[node].get("block") is None:
        return list(g)
    # Blocks are stamped contiguously: the block's nodes are the run of names under its prefix.
    prefix = node.split("/", 1)[0] + "/"
    inside = itertools.dropwhile(lambda n: not n.startswith(prefix), g)
    return list(itertools.takewhile(lambda n: n.startswith(prefix), inside))


def _hops(g: nx.Graph, kind: dict[str, str], accelerators: list[str], domains: Counter[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not accelerators:
        return out
    first_domain = g.nodes[accelerators[0]].get("domain")
    members = [n for n in accelerators if g.nodes[n].get("domain") == first_domain][:128]
    # Every accelerator of a domain is wired to each of its scale-up switches (blocks.py: _scale_up).
    switches = {m for a in members for m in g[a] if kind[m] == "scale_up_switch"}
    sub = nx.Graph()
    sub.add_nodes_from(members)
    sub.add_nodes_from(switches)
    sub.add_edges_from((a, b) for a in members for b, d in g[a].items() if d["network"] == "scale_up" and b in sub)
    if sub.number_of_edges() and nx.is_connected(sub):
        ecc = nx.eccentricity(sub, v=members)
        out["within_domain_max"] = max(ecc.values())
    else:
        out["within_domain_max"] = None
    if len(domains) > 1:
        last = accelerators[-1]
        view = nx.subgraph_view(g, filter_edge=lambda a, b: g[a][b]["network"] in ("scale_out", "host"))
        try:
            out["across_fabric"] = nx.shortest_path_length(view, accelerators[0], last)
            out["across_fabric_between"] = [accelerators[0], last]
        except nx.NetworkXNoPath:
            out["across_fabric"] = None
    return out


def _part_labels(g: nx.Graph) -> dict[str, str]:
    """Each node's part: its kind, with its role where the kind has several ('nic (scale_out)', 'nic (frontend)')."""
    roles: dict[str, set[Any]] = defaultdict(set)
    for _, d in g.nodes(data=True):
        if "kind" in d:
            roles[d["kind"]].add(d.get("role"))
    return {
        n: d["kind"] if len(roles[d["kind"]]) == 1 or d.get("role") is None else f"{d['kind']} ({d['role']})"
        for n, d in g.nodes(data=True)
        if "kind" in d
    }


def nodes_by_kind_and_role(g: nx.Graph) -> dict[str, int]:
    """`nodes_by_kind`, a kind with several roles counted per role ('nic (scale_out)', 'nic (frontend)')."""
    return dict(sorted(Counter(_part_labels(g).values()).items()))
