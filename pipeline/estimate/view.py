"""What ranks can reach on an installed topology: the tier between two accelerators, routed paths, their latency,
and the fields (with status and confidence) behind each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np

from ..core.graphs import Topologies, load_topology
from ..core.paths import Layout
from ..formats.calibration import Calibration
from .calibration import load_calibration
from .routing import Routes, Wiring

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
        """The record behind a topology edge; a field of another reference (a cluster's switch product) is written
        `<reference>:<field>`."""
        field = d["field"] or "topology-defaults"
        if ":" in field:
            reference_id, field = field.split(":", 1)
        return cls(reference_id=reference_id, field=field, status=d["status"], confidence=d["confidence"])


@dataclass(frozen=True)
class Path:
    """A set of flows routed: the most hops and longest latency (endpoint included), the records behind every link
    they cross, and the routes."""

    routes: Routes
    hops: int
    latency_s: float
    lineage: frozenset[Lineage]


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

    @cached_property
    def wiring(self) -> Wiring:
        """The same graph as arrays for routing every flow (built once per view, links indexed as used)."""
        return Wiring(self.g)

    @property
    def order(self) -> list[str]:
        """The accelerators in the order placement lays ranks (`ordered_accelerators`), once per topology."""
        return self.wiring.order

    @cached_property
    def domain_size(self) -> int:
        size = self.summary["scale_up_domain_size"]
        return size if isinstance(size, int) else min(size)

    def domain(self, acc: str) -> str:
        return self.wiring.domain_of[acc]

    def nics(self, acc: str) -> list[str]:
        return [
            n for n, d in self.g[acc].items() if self.kind[n] == "nic" and self.g.nodes[n].get("role") == "scale_out"
        ]

    def leaf(self, acc: str) -> str | None:
        """The leaf of an accelerator's first scale-out NIC (kept: a large group asks for every member's, often)."""
        if acc not in self._leaves:
            self._leaves[acc] = next((m for nic in self.nics(acc) for m in self.g[nic] if self.kind[m] == "leaf"), None)
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

    def path(self, src: list[str], dst: list[str]) -> Path:
        """Flows src[i] → dst[i] routed over the installed wiring (the one router the traffic library uses)."""
        routes = self.wiring.route(src, dst)
        edges = np.unique(routes.incidence.tocoo().row // 2)
        return Path(
            routes=routes,
            hops=round(float(routes.hops.max(initial=0.0))),
            latency_s=self.endpoint_s + float(routes.latency_ns.max(initial=0.0)) * 1e-9,
            lineage=frozenset(Lineage.of_edge(self.reference, self.wiring.edge_data[e]) for e in edges.tolist()),
        )


def view_for(
    lay: Layout, topology_id: str, topologies: Topologies | None = None, facts: Callable[[str], Facts] | None = None
) -> View:
    """The installed wiring of a reference or cluster from the topology stage's output (through `topologies` and
    `facts` when the caller keeps them open), with the collective calibration."""
    topology = topologies.get(topology_id) if topologies is not None else load_topology(lay, topology_id)
    view = View(topology.graph, topology.endpoint_latency_ns, topology.summary)
    view.calibration = load_calibration(lay.root)
    view.scale_up_technology = technology(lay, view.reference, facts)
    return view


def technology(lay: Layout, reference: str, facts: Callable[[str], Facts] | None = None) -> str:
    """The reference's scale-up technology as its facts state it (what the calibration's link classes match)."""
    from ..core.facts import load_facts

    return (facts or (lambda r: load_facts(lay, r)))(reference).text("scale_up.technology")
