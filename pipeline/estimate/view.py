"""What ranks can reach on an installed topology: per-rank bandwidth on each network, the tier two
accelerators are separated by, path latency, oversubscription, and the fields (with status and confidence)
behind each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import networkx as nx

from ..core.graphs import Topologies, load_topology
from ..core.paths import Layout
from ..errors import UsageError
from .calibration import Calibration, load_calibration
from .routing import Wiring

if TYPE_CHECKING:
    from ..core.facts import Facts

# Tier separating two accelerators: 0 same scale-up domain, 1 same leaf, 2 same pod (via spine), 3 via core.
TIER_NAMES = {
    0: "scale-up domain",
    1: "one leaf",
    2: "leaf-spine (same pod)",
    3: "spine-core (across pods)",
    9: "host path (no backend fabric)",
}


@dataclass(frozen=True, kw_only=True, order=True)
class Lineage:
    """One record a figure rests on: the field (or labelled topology default) with its status and confidence."""

    reference_id: str
    field: str
    status: str  # published | preliminary | derived | assumed | unknown
    confidence: str  # published | preliminary | assumed | unknown (core.confidence)

    @classmethod
    def of_edge(cls, reference_id: str, d: dict[str, Any]) -> Lineage:
        """The record behind a topology edge: its field (or the topology defaults) as the edge carries it. A field
        of another reference (a cluster's named switch product) is written `<reference>:<field>`."""
        field = d["field"] or "topology-defaults"
        if ":" in field:
            reference_id, field = field.split(":", 1)
        return cls(
            reference_id=reference_id,
            field=field,
            status=d["status"],
            confidence=d["confidence"],
        )


@dataclass(kw_only=True)
class Route:
    """What one rank gets towards another on one network: per-rank bandwidth, latency, hops, and lineage."""

    tier: int
    network: str
    per_rank_gbps: float | None
    latency_s: float
    hops: int
    lineage: set[Lineage] = field(default_factory=set)


class View:
    def __init__(self, g: nx.Graph, endpoint_ns: float, summary: dict[str, Any]) -> None:
        """`summary` is the topology stage's summary of `g` (registry/topology), not recomputed here."""
        self.g = g
        self.endpoint_s = endpoint_ns * 1e-9
        self.reference = g.graph.get("reference")
        self.kind = nx.get_node_attributes(g, "kind")
        self.accelerators = [n for n, k in self.kind.items() if k == "accelerator"]
        self.summary = summary
        # Set by `view_for`: the collective calibration and the scale-up technology it is matched on.
        self.calibration: Calibration | None = None
        self.scale_up_technology: str | None = None
        self._leaves: dict[str, str | None] = {}
        self._paths: dict[tuple[str, str], list[str]] = {}

    @cached_property
    def wiring(self) -> Wiring:
        """The same graph as arrays for routing every flow (built once per view, links indexed as used)."""
        return Wiring(self.g)

    @cached_property
    def domain_size(self) -> int:
        size = self.summary["scale_up_domain_size"]
        return size if isinstance(size, int) else min(size)

    def check_size(self, needed: int, what: str) -> None:
        if needed > len(self.accelerators):
            raise UsageError(
                f"{what} needs {needed} accelerators; topology {self.g.graph['topology_id']} has "
                f"{len(self.accelerators)}"
            )

    def domain(self, acc: str) -> str:
        return self.g.nodes[acc]["domain"]

    def _lineage(self, d: dict[str, Any]) -> Lineage:
        return Lineage.of_edge(self.reference, d)

    def nics(self, acc: str) -> list[str]:
        return [
            n for n, d in self.g[acc].items() if self.kind[n] == "nic" and self.g.nodes[n].get("role") == "scale_out"
        ]

    def leaf(self, acc: str) -> str | None:
        """The leaf of an accelerator's first scale-out NIC (kept: a large group asks for every member's, often)."""
        if acc not in self._leaves:
            self._leaves[acc] = next(
                (m for nic in self.nics(acc) for m in self.g[nic] if self.kind[m] == "leaf"),
                None,
            )
        return self._leaves[acc]

    def tier(self, a: str, b: str) -> int:
        if self.domain(a) == self.domain(b):
            return 0
        la, lb = self.leaf(a), self.leaf(b)
        if la is None or lb is None:
            return 9
        if la == lb:
            return 1
        if self.g.nodes[la].get("pod") == self.g.nodes[lb].get("pod") or "core" not in self.summary["nodes_by_kind"]:
            return 2
        return 3

    def scale_up(self, acc: str) -> Route:
        edges = [d for _, d in self.g[acc].items() if d["network"] == "scale_up"]
        bws = [d["bandwidth_gbps"] for d in edges]
        gbps = None if not bws or None in bws else sum(bws)
        hops = self.summary["hops"].get("within_domain_max") or 1
        latency = self.endpoint_s + hops * (edges[0]["latency_ns"] * 1e-9 if edges else 0)
        return Route(
            tier=0,
            network="scale_up",
            per_rank_gbps=gbps,
            latency_s=latency,
            hops=hops,
            lineage={self._lineage(d) for d in edges},
        )

    def _backend_path(self, a: str, b: str) -> list[str]:
        """A shortest path over the scale-out and host links (kept per pair: the graph does not change, and the
        same group ends are asked again by every estimate of a workload's variants)."""
        if (a, b) not in self._paths:
            backend = nx.subgraph_view(
                self.g, filter_edge=lambda u, v: self.g[u][v]["network"] in ("scale_out", "host")
            )
            self._paths[(a, b)] = nx.shortest_path(backend, a, b)
        return self._paths[(a, b)]

    def scale_out(self, a: str, b: str, tier: int, concurrent: bool = True) -> tuple[Route, float]:
        """Path between accelerators in different domains, and the oversubscription factor a fully busy fabric
        imposes on it (1 when the path stays under one leaf)."""
        if tier == 9:
            raise UsageError(
                f"topology {self.g.graph['topology_id']} has no backend fabric between "
                f"{a} and {b}: build a cluster to cross scale-up domains"
            )
        nic_edges = [d for nic in self.nics(a) for m, d in self.g[nic].items() if self.kind[m] == "leaf"]
        host = [d for nic in self.nics(a) for m, d in self.g[nic].items() if m == a]
        gbps = sum(d["bandwidth_gbps"] for d in nic_edges) if nic_edges else None
        path = self._backend_path(a, b)
        pairs = list(pairwise(path))
        latency = self.endpoint_s + sum(self.g[u][v]["latency_ns"] for u, v in pairs) * 1e-9
        lineage = {self._lineage(self.g[u][v]) for u, v in pairs} | {self._lineage(d) for d in nic_edges + host}
        factor = 1.0
        over = self.summary["oversubscription"]
        if concurrent and tier >= 2:
            factor *= over.get("leaf", 1.0)
        if concurrent and tier >= 3:
            factor *= over.get("spine", 1.0)
        route = Route(
            tier=tier, network="scale_out", per_rank_gbps=gbps, latency_s=latency, hops=len(pairs), lineage=lineage
        )
        return route, factor


def view_for(
    lay: Layout,
    topology_id: str,
    topologies: Topologies | None = None,
    facts: Callable[[str], Facts] | None = None,
) -> View:
    """The installed wiring of a reference or cluster, as the traffic stage sees it: the topology stage's output
    (registry/topology/), read through `topologies` when the caller keeps them open (and the facts through
    `facts`, when it keeps those: `traffic.Views`), with the calibration the collectives are costed on."""
    topology = topologies.get(topology_id) if topologies is not None else load_topology(lay, topology_id)
    view = View(topology.graph, topology.endpoint_latency_ns, topology.summary)
    view.calibration = load_calibration(lay.root)
    view.scale_up_technology = technology(lay, view.reference, facts)
    return view


def technology(lay: Layout, reference: str, facts: Callable[[str], Facts] | None = None) -> str:
    """The reference's scale-up technology as its facts state it (what the calibration's link classes match)."""
    from ..core.facts import load_facts

    return (facts or (lambda r: load_facts(lay, r)))(reference).text("scale_up.technology")
