"""A workload's phases on a topology: decompose → place → cost the representative group with the collective
registry (the time a rank spends) → route every group's flows of the algorithm chosen (what the links carry:
queueing, the bottleneck, the busiest links, the records of the slowest path) → the phase record. Client traffic
is costed on the frontend NIC's speed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from ..core import confidence
from ..errors import UsageError
from ..formats.calibration import Calibration
from . import collectives
from .calculator import UnknownBandwidth, collnet_note, place
from .collectives import Estimate, Shape
from .decompose import Communication, decompose
from .loads import RoutedPhase, hot_links, lineage_links, link_rows, route
from .placement import place as place_ranks
from .routing import GBPS_TO_BYTES
from .view import TIER_NAMES, Lineage, View
from .workloads import Workload

ROUTED_NOTE = (
    "every group of the phase routed at once over the installed links (shortest paths, ECMP split uniformly); "
    "each flow gets its max-min fair share; queueing only where a link's offered load exceeds its capacity"
)
TIER_ORDER = {"spine-core": 3, "leaf-spine": 2, "NIC-leaf": 1}
LOCAL = "local: both ends in one scale-up domain"
ACROSS = "crosses the scale-out fabric: the ends sit in different scale-up domains"


@dataclass(frozen=True, kw_only=True)
class Cost:
    """What a communication costs on its route."""

    algorithm: str
    bytes_on_wire_per_rank: float
    network: str
    tier: str
    hops: int
    bottleneck_gbps: float | None
    effective_gbps: float | None
    latency_s: float
    bandwidth_s: float
    queueing_s: float
    lineage: frozenset[Lineage] = frozenset()
    notes: str = ""
    links: tuple[dict[str, Any], ...] = ()
    # Bytes per rank by the network they enter (never NVLink and NIC bytes added together).
    bytes_on_wire_by_network: dict[str, float] = field(default_factory=dict)
    # Why the time is unknown (a bandwidth no source states), naming the field; "" when costed. An unknown cost
    # keeps its route and bytes and reports no seconds, never a made-up number.
    unknown: str = ""

    @property
    def seconds(self) -> float | None:
        if self.unknown:
            return None
        return self.latency_s + self.bandwidth_s + self.queueing_s


@dataclass(frozen=True, kw_only=True)
class Phase(Cost):
    """One reported phase: the communication asked for and what it costs (the traffic table's row)."""

    phase: str
    description: str
    collective: str
    group_size: int
    concurrent_groups: int
    count: int
    bytes_per_rank: float
    overlaps: str = ""  # what the phase may hide behind (decompose.py); "" on the critical path
    # Routed over the installed graph: the busiest physical link and the five busiest.
    max_link_utilization: float | None = None
    hot_links: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(cls, comm: Communication, cost: Cost, **overrides: Any) -> Phase:
        """The phase of `comm` at `cost`; `overrides` add what only routing knows (link figures)."""
        names = ("phase", "description", "collective", "group_size", "count", "bytes_per_rank", "overlaps")
        asked = {k: getattr(comm, k) for k in names} | {"concurrent_groups": comm.concurrency}
        return cls(**{**asked, **{f.name: getattr(cost, f.name) for f in fields(Cost)}, **overrides})

    @property
    def total_seconds(self) -> float | None:
        seconds = self.seconds
        return None if seconds is None else seconds * self.count

    def term(self, name: str) -> float | None:
        """`latency_s`, `bandwidth_s` or `queueing_s` as reported: None for a phase whose time is unknown."""
        return None if self.unknown else getattr(self, name)

    @property
    def dominant(self) -> str:
        if self.unknown:
            return "unknown"
        terms = {"latency": self.latency_s, "bandwidth": self.bandwidth_s, "queueing": self.queueing_s}
        return max(terms, key=lambda k: terms[k])

    @property
    def confidence(self) -> str:
        """The weakest record the phase rests on (`unknown` if none, or if its time is unknown)."""
        if self.unknown:
            return "unknown"
        return confidence.weakest(x.confidence for x in self.lineage)

    def lineage_records(self) -> list[dict[str, str]]:
        """The lineage as plain records in a stable order: the `lineage` column and the JSON output."""
        return [asdict(x) for x in sorted(self.lineage)]


def phases(view: View, w: Workload, cal: Calibration, offset: int = 0) -> tuple[list[Phase], dict[str, RoutedPhase]]:
    """Every phase of `w` with its ranks placed from accelerator `offset` on, and each backend phase's routed flows
    by name (sharing re-costs them beside another job's)."""
    d = decompose(w)
    accelerators = place_ranks(view, d, w, offset)
    out: list[Phase] = []
    routed: dict[str, RoutedPhase] = {}
    for comm in d.communications:
        group = [accelerators[r] for r in comm.group]
        if comm.network == "frontend":
            out.append(Phase.of(comm, frontend(view, comm.phase, comm.bytes_per_rank, group[0])))
            continue
        try:
            shape, real, free = library(view, cal, comm.collective, group, comm.bytes_per_rank, comm.concurrency)
        except UnknownBandwidth as exc:  # the phase keeps its bytes and reports no time; the others are costed
            out.append(Phase.of(comm, _unknown(comm, exc)))
            continue
        r = route(view.wiring, comm, accelerators, real.algorithm, view.endpoint_s, f"workload {w.id}")
        routed[comm.phase] = r
        out.append(_phase(view, comm, shape, real, free, r))
    return out, routed


def _unknown(comm: Communication, exc: UnknownBandwidth) -> Cost:
    """A backend phase on a network whose bandwidth no source states: its bytes, the field to settle, no time."""
    return Cost(
        algorithm="unknown",
        bytes_on_wire_per_rank=comm.bytes_per_rank,
        network=exc.network,
        tier=TIER_NAMES[0] if exc.network == "scale_up" else "scale-out fabric",
        hops=0,
        bottleneck_gbps=None,
        effective_gbps=None,
        latency_s=0.0,
        bandwidth_s=0.0,
        queueing_s=0.0,
        notes=f"seconds unknown: {exc}",
        unknown=f"{comm.phase}: {exc.field} is unknown (no source states it), so the time of this phase is unknown",
    )


def library(
    view: View, cal: Calibration, op: str, group: list[str], size: float, concurrency: int
) -> tuple[Shape, Estimate, Estimate]:
    """The collective on its group as the library runs it (`timed` on the placed shape)."""
    shape = place(view, cal, len(group), accelerators=group, technology=view.scale_up_technology, uneven=True)
    return timed(cal, op, shape, size, concurrency)


def timed(cal: Calibration, op: str, shape: Shape, size: float, concurrency: int) -> tuple[Shape, Estimate, Estimate]:
    """The shape a collective runs on (a lone send without the fabric's oversubscription), the algorithm and
    protocol chosen there (every group crossing the fabric at once), and the same algorithm on the fabric alone."""
    if op == "send" and concurrency <= 1:
        shape = shape.without_oversubscription()
    real = collectives.estimate(cal, op, shape, size)
    free_shape = shape.without_oversubscription()
    free = (
        real if free_shape is shape else collectives.estimate(cal, op, free_shape, size, real.algorithm, real.protocol)
    )
    return shape, real, free


def bytes_by_network(real: Estimate) -> dict[str, float]:
    """Bytes per rank by the network each of the library's legs enters."""
    by_net: dict[str, float] = {}
    for leg in real.stages:
        by_net[leg.network] = by_net.get(leg.network, 0.0) + leg.bytes_per_rank
    return by_net


def unrouted_terms(shape: Shape, real: Estimate, free: Estimate) -> dict[str, Any]:
    """A cost's fields when not routed per link: the library's bytes and times, the oversubscription as queueing."""
    return {
        "bytes_on_wire_per_rank": real.bytes_on_wire_per_rank,
        "latency_s": free.latency_seconds,
        "bandwidth_s": free.bandwidth_seconds,
        "queueing_s": max(0.0, real.seconds - free.seconds),
        "lineage": frozenset(shape.lineage | real.lineage()),
    }


def _label(op: str, shape: Shape, real: Estimate) -> str:
    """The algorithm column (`collectives.shown_algorithm`), its protocol and whether it is pipelined."""
    algorithm = collectives.shown_algorithm(op, real.algorithm)
    pipelined = shape.local > 1 and shape.domains > 1 and op != "send"
    return f"{algorithm} / {real.protocol}" + (" (hierarchical, pipelined)" if pipelined else "")


def _phase(view: View, comm: Communication, shape: Shape, real: Estimate, free: Estimate, r: RoutedPhase) -> Phase:
    """The phase record: the library's times and bytes; the routed flows' network, tier, queueing and links."""
    wiring, load = view.wiring, r.load
    rows = link_rows(wiring, load)
    send = comm.collective == "send"
    # Per sending rank: in a send only one end of each pair injects (the receiver's bytes are the same bytes).
    ranks = max(1, comm.concurrency if send else len(comm.group) * comm.concurrency)
    routed_by_net = {k: v / ranks for k, v in sorted(load.injected.items()) if k != "host"}
    network = "+".join(k for k in ("scale_up", "scale_out") if k in routed_by_net) or "scale_up"
    tier = max((TIER_ORDER.get(row["tier"], 0) for row in rows), default=0)
    notes = [ROUTED_NOTE, *load.notes]
    if send:
        notes.insert(0, LOCAL if network == "scale_up" else ACROSS)
    if load.queueing_s > 0:
        top = max(rows, key=lambda x: x["utilization"])
        notes.append(
            f"queueing: offered load {top['utilization']:.2f}× the capacity of {top['tier']} "
            f"{top['source']} – {top['target']} (fluid share)"
        )
    # The library's own notes; the oversubscription it would share in is the routed queueing's business.
    said = "; ".join([*real.assumptions[1:], *shape.notes, *collnet_note(real, shape)]).split("; ")
    notes += [n for n in said if n and not n.startswith(("queueing:", "every rank crosses"))]
    by_net = bytes_by_network(real)
    moving = free.bandwidth_seconds + load.queueing_s
    slowest = max(real.stages, key=lambda s: s.bandwidth_seconds, default=None)
    if moving > 0:
        effective: float | None = real.bytes_on_wire_per_rank / moving / GBPS_TO_BYTES
    elif slowest and slowest.bandwidth_seconds > 0:
        effective = slowest.bytes_per_rank / slowest.bandwidth_seconds / GBPS_TO_BYTES
    else:
        effective = None
    cost = Cost(
        algorithm=_label(comm.collective, shape, real),
        bytes_on_wire_per_rank=real.bytes_on_wire_per_rank,
        network=network,
        tier=TIER_NAMES[tier],
        hops=round(load.hops),
        bottleneck_gbps=load.bottleneck_gbps,
        effective_gbps=effective,
        latency_s=free.latency_seconds,
        bandwidth_s=free.bandwidth_seconds,
        queueing_s=load.queueing_s,
        lineage=frozenset(Lineage.of_edge(view.reference, d) for d in lineage_links(wiring, load)) | real.lineage(),
        notes="; ".join(notes),
        links=tuple(rows),
        bytes_on_wire_by_network=dict(sorted(by_net.items())) or routed_by_net,
    )
    return Phase.of(
        comm, cost, max_link_utilization=float(np.max(load.utilization, initial=0.0)), hot_links=tuple(hot_links(rows))
    )


def send(view: View, what: str, a: str, b: str, size: float, concurrent: int) -> Cost:
    """A point-to-point message from `a` to `b` while `concurrent` senders do the same, as the library runs it."""
    if view.calibration is None:
        raise UsageError(f"{what}: the view carries no calibration (build it with view_for)")
    shape, real, free = library(view, view.calibration, "send", [a, b], size, concurrent)
    tier = view.tier(a, b)
    return Cost(
        algorithm=_label("send", shape, real),
        network="scale_up" if tier == 0 else "scale_out",
        tier=TIER_NAMES[tier],
        hops=view.path([a], [b]).hops,
        bottleneck_gbps=None,
        effective_gbps=None,
        notes=LOCAL if tier == 0 else ACROSS,
        **unrouted_terms(shape, real, free),
    )


def frontend(view: View, what: str, size: float, acc: str) -> Cost:
    """Client requests in and tokens out over the frontend network (never the backend fabric): a send at the
    frontend NIC's speed and the path's per-hop latency."""
    g = view.g
    cpu = next((n for n, d in g[acc].items() if view.kind[n] == "cpu"), None)
    fnics = [n for n in g[cpu] if view.kind[n] == "nic" and g.nodes[n].get("role") == "frontend"] if cpu else []
    if not fnics:
        raise UsageError(f"{what}: no frontend NIC on the host of {acc}")
    edges = [d for n in fnics for m, d in g[n].items() if d["network"] in ("frontend", "host")]
    nic_speed = g.graph.get("frontend_nic_gbps")
    on_frontend = [d for d in edges if d["network"] == "frontend"]
    # Client → frontend core → access switch → frontend NIC → CPU; a lone reference has only the NIC's host hop.
    hops = 3 if on_frontend else 1
    per_hop = (on_frontend or edges)[0]["latency_ns"] * 1e-9
    lineage = frozenset(Lineage.of_edge(view.reference, d) for d in edges)
    if nic_speed is None:
        # The phase keeps its bytes and route and reports no time; the other phases are still costed.
        why = (
            f"{view.reference}:frontend.nic.speed is unknown (no source states it), so the time on the frontend "
            "network is unknown"
        )
        latency_s, bandwidth_s, notes, unknown = 0.0, 0.0, f"seconds unknown: {why}", f"{what}: {why}"
    else:
        est = collectives.parametric("send", 2, size, nic_speed * GBPS_TO_BYTES, view.endpoint_s + hops * per_hop)
        latency_s, bandwidth_s, unknown = est.latency_seconds, est.bandwidth_seconds, ""
        notes = f"frontend share per accelerator {view.summary['per_accelerator'].get('frontend_gbps')} Gb/s"
    return Cost(
        algorithm="request/response",
        bytes_on_wire_per_rank=size,
        network="frontend",
        tier="frontend network",
        hops=hops,
        bottleneck_gbps=nic_speed,
        effective_gbps=nic_speed,
        latency_s=latency_s,
        bandwidth_s=bandwidth_s,
        queueing_s=0.0,
        lineage=lineage,
        notes=notes,
        unknown=unknown,
    )
