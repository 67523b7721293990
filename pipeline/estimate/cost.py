"""How one communication is costed on an installed topology: route, bottleneck bandwidth, and
time = fixed path overhead + bytes ÷ effective bandwidth + queueing (alpha-beta, `collectives.py`).

A group inside one scale-up domain rides the scale-up links of each rank; a group with one rank per domain
crosses the scale-out fabric (queueing where an oversubscribed tier is shared by every group of the phase);
a group with several ranks in each of several domains is costed hierarchically. Client traffic takes the
frontend network. The seam is `cost(view, communication, members) -> Phase`: decomposition (`demand.py`)
says what is asked, placement says where the ranks sit, this module says what it costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..core import confidence
from ..errors import UsageError
from . import collectives
from .demand import Communication
from .view import TIER_NAMES, Lineage, Route, View

GBPS_TO_BYTES = 1e9 / 8


class CannotEstimate(UsageError):
    """A phase rests on a bandwidth no source or assumption states."""


# The frontend NIC speed is the topology's `frontend_nic_gbps`, read from this field of the reference.
FRONTEND_SPEED_UNKNOWN = (
    "{reference}:frontend.nic.speed is unknown (no source states it), so the time on the frontend network is unknown"
)


@dataclass(frozen=True, kw_only=True)
class Cost:
    """What a communication costs on its route; summed term by term when a collective runs in stages."""

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
    # Bytes per rank by the network they enter (never NVLink and NIC bytes added together); they add up to
    # `bytes_on_wire_per_rank`.
    bytes_on_wire_by_network: dict[str, float] = field(default_factory=dict)
    # Why the time is unknown (a bandwidth no source states), naming the field; "" when costed. An unknown cost
    # keeps its route and bytes, and reports no seconds: never a number made up for the missing bandwidth.
    unknown: str = ""

    @property
    def seconds(self) -> float | None:
        if self.unknown:
            return None
        return self.latency_s + self.bandwidth_s + self.queueing_s


@dataclass(frozen=True, kw_only=True)
class Phase(Cost):
    """One reported phase: the communication asked for and what it costs (the traffic table's row). The cost
    terms are `Cost`'s, declared once there."""

    phase: str
    description: str
    collective: str
    group_size: int
    concurrent_groups: int
    count: int
    bytes_per_rank: float
    # Routed over the installed graph (placement.py, routing.py, loads.py): the busiest physical link and the
    # five busiest.
    max_link_utilization: float | None = None
    hot_links: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(cls, comm: Communication, cost: Cost, **overrides: Any) -> Phase:
        """The phase of `comm` at `cost`; `overrides` replace what the communication or the cost says (a routed
        phase knows its real group count and buffer, and its link figures)."""
        asked = {
            "phase": comm.phase,
            "description": comm.description,
            "collective": comm.collective,
            "group_size": comm.group_size,
            "concurrent_groups": comm.concurrent_groups,
            "count": comm.count,
            "bytes_per_rank": comm.bytes_per_rank,
        }
        return cls(**{**asked, **{f.name: getattr(cost, f.name) for f in fields(Cost)}, **overrides})

    @property
    def total_seconds(self) -> float | None:
        seconds = self.seconds
        return None if seconds is None else seconds * self.count

    def term(self, name: str) -> float | None:
        """`latency_s`, `bandwidth_s` or `queueing_s` as reported: None for a phase whose time is unknown (its
        bandwidth term cannot be computed, so no term is presented as if the others were the whole time)."""
        return None if self.unknown else getattr(self, name)

    @property
    def dominant(self) -> str:
        if self.unknown:
            return "unknown"
        terms = {"latency": self.latency_s, "bandwidth": self.bandwidth_s, "queueing": self.queueing_s}
        return max(terms, key=lambda k: terms[k])

    @property
    def confidence(self) -> str:
        """As strong as the weakest record the phase rests on (`unknown` if it rests on none, or if its time is
        unknown)."""
        if self.unknown:
            return "unknown"
        return confidence.weakest(x.confidence for x in self.lineage)

    def lineage_records(self) -> list[dict[str, str]]:
        """The lineage as plain records in a stable order: the `lineage` column and the JSON output."""
        return [
            {"reference_id": x.reference_id, "field": x.field, "status": x.status, "confidence": x.confidence}
            for x in sorted(self.lineage)
        ]


def _bytes(gbps: float | None, what: str) -> float:
    if gbps is None:
        raise CannotEstimate(f"{what}: the bandwidth is unknown (no source states it and no assumption is declared)")
    return gbps * GBPS_TO_BYTES


def _link(name: str, bytes_: float, gbps: float | None, seconds: float) -> dict[str, Any]:
    util = None if not gbps or seconds <= 0 else bytes_ / (gbps * GBPS_TO_BYTES * seconds)
    return {"link_class": name, "bytes": bytes_, "capacity_gbps": gbps, "busy_seconds": seconds, "utilization": util}


def cost(view: View, comm: Communication, members: list[str]) -> Phase:
    """The phase record of `comm` with its representative group placed on the accelerators `members`."""
    if comm.network == "frontend":
        return Phase.of(comm, frontend(view, comm.phase, comm.bytes_per_rank, members[0]))
    if comm.collective == "send":
        a, b = members
        return Phase.of(comm, send(view, comm.phase, a, b, comm.bytes_per_rank, comm.concurrent_groups))
    return Phase.of(comm, collective(view, comm.phase, comm.collective, members, comm.bytes_per_rank))


def collective(view: View, what: str, op: str, group: list[str], size: float) -> Cost:
    """One collective over `group`: on the calibrated algorithms and protocols when the view carries the
    calibration (`calibrated.py`); otherwise flat inside one domain, flat across domains, or hierarchical."""
    from .calibrated import collective_cost

    calibrated = collective_cost(view, what, op, group, size)
    if calibrated is not None:
        return calibrated
    n = len(group)
    by_domain: dict[str, list[str]] = {}
    for acc in group:
        by_domain.setdefault(view.domain(acc), []).append(acc)
    if len(by_domain) == 1:
        route = view.scale_up(group[0])
        bw = _bytes(route.per_rank_gbps, f"{what} over the scale-up domain")
        est = collectives.estimate(op, n, size, bw, route.latency_s)
        return Cost(
            algorithm="ring over all scale-up links of each rank",
            bytes_on_wire_per_rank=est.bytes_on_wire_per_rank,
            network="scale_up",
            tier=TIER_NAMES[0],
            hops=route.hops,
            bottleneck_gbps=route.per_rank_gbps,
            effective_gbps=route.per_rank_gbps,
            latency_s=est.latency_seconds,
            bandwidth_s=est.bandwidth_seconds,
            queueing_s=0.0,
            lineage=frozenset(route.lineage),
            links=(_link("scale_up injection per rank", est.bytes_on_wire_per_rank, route.per_rank_gbps, est.seconds),),
        )
    if {len(m) for m in by_domain.values()} != {1}:
        return _hierarchical(view, what, op, by_domain, size)
    tier = max(view.tier(a, b) for a, b in zip(group, group[1:] + group[:1], strict=True))
    far = max(group[1:], key=lambda b: view.tier(group[0], b))
    route, factor = view.scale_out(group[0], far, tier)
    bw = _bytes(route.per_rank_gbps, f"{what} over the scale-out fabric")
    est = collectives.estimate(op, n, size, bw, route.latency_s)
    queue = est.bytes_on_wire_per_rank / (bw / factor) - est.bandwidth_seconds
    eff = route.per_rank_gbps / factor  # type: ignore[operator]
    links = [_link("NIC link per rank", est.bytes_on_wire_per_rank, route.per_rank_gbps, est.seconds + queue)]
    if tier >= 2:
        links.append(_link("leaf uplinks (per NIC share)", est.bytes_on_wire_per_rank, eff, est.seconds + queue))
    return Cost(
        algorithm="ring across domains (one rank per domain)",
        bytes_on_wire_per_rank=est.bytes_on_wire_per_rank,
        network="scale_out",
        tier=TIER_NAMES[tier],
        hops=route.hops,
        bottleneck_gbps=route.per_rank_gbps,
        effective_gbps=eff,
        latency_s=est.latency_seconds,
        bandwidth_s=est.bandwidth_seconds,
        queueing_s=queue,
        lineage=frozenset(route.lineage),
        notes=_queueing_note(factor),
        links=tuple(links),
    )


def _queueing_note(factor: float) -> str:
    if factor == 1:
        return ""
    return (
        f"queueing: every group of this phase runs at once, so the oversubscribed tier "
        f"({factor:g}:1 along the path) shares its uplinks (fluid share)"
    )


def _hierarchical(view: View, what: str, op: str, by_domain: dict[str, list[str]], size: float) -> Cost:
    """Inside each domain first, then across domains with every local rank driving its own NIC in parallel."""
    members = list(by_domain.values())
    local, outer = len(members[0]), len(members)
    across_group = [m[0] for m in members]
    if op == "all-to-all":
        # Each rank sends S/n to every rank: (local-1)/n·S stays in the domain, (n-local)/n·S crosses the fabric.
        parts = [
            collective(view, what, "all-to-all", members[0], size / outer),
            collective(view, what, "all-to-all", across_group, size),
        ]
        algorithm = "hierarchical all-to-all: the in-domain share over scale-up, the rest over scale-out"
    elif op == "all-reduce":
        parts = [
            collective(view, what, "reduce-scatter", members[0], size),
            collective(view, what, "all-reduce", across_group, size / local),
            collective(view, what, "all-gather", members[0], size),
        ]
        algorithm = (
            f"hierarchical: reduce-scatter inside each {local}-rank domain, all-reduce of S/{local} across "
            f"{outer} domains (every local rank on its own NIC), all-gather inside"
        )
    else:
        inner = collective(view, what, op, members[0], size)
        across = collective(view, what, op, across_group, size / local)
        parts = [inner, across] if op == "reduce-scatter" else [across, inner]
        algorithm = f"hierarchical {op}: inside each {local}-rank domain and across {outer} domains"
    across = parts[1] if op != "all-gather" else parts[0]
    return Cost(
        algorithm=algorithm,
        bytes_on_wire_per_rank=sum(p.bytes_on_wire_per_rank for p in parts),
        network="scale_up+scale_out",
        tier=across.tier,
        hops=max(p.hops for p in parts),
        bottleneck_gbps=across.bottleneck_gbps,
        effective_gbps=across.effective_gbps,
        latency_s=sum(p.latency_s for p in parts),
        bandwidth_s=sum(p.bandwidth_s for p in parts),
        queueing_s=sum(p.queueing_s for p in parts),
        lineage=frozenset().union(*(p.lineage for p in parts)),
        notes=across.notes,
        links=tuple(x for p in parts for x in p.links),
    )


def send(view: View, what: str, a: str, b: str, size: float, concurrent: int) -> Cost:
    """A point-to-point message from `a` to `b` while `concurrent` senders of the phase do the same."""
    from .calibrated import send_cost

    calibrated = send_cost(view, what, a, b, size, concurrent)
    if calibrated is not None:
        return calibrated
    tier = view.tier(a, b)
    route: Route
    if tier == 0:
        route, factor = view.scale_up(a), 1.0
    else:
        route, factor = view.scale_out(a, b, tier, concurrent=concurrent > 1)
    bw = _bytes(route.per_rank_gbps, f"{what} from {a} to {b}")
    est = collectives.estimate("send", 2, size, bw, route.latency_s)
    queue = size / (bw / factor) - est.bandwidth_seconds
    where = (
        "local: both ends in one scale-up domain"
        if tier == 0
        else "crosses the scale-out fabric: the ends sit in different scale-up domains"
    )
    return Cost(
        algorithm="point-to-point",
        bytes_on_wire_per_rank=size,
        network=route.network,
        tier=TIER_NAMES[tier],
        hops=route.hops,
        bottleneck_gbps=route.per_rank_gbps,
        effective_gbps=route.per_rank_gbps / factor,  # type: ignore[operator]
        latency_s=est.latency_seconds,
        bandwidth_s=est.bandwidth_seconds,
        queueing_s=queue,
        lineage=frozenset(route.lineage),
        notes=where,
        links=(_link(f"{route.network} path per sender", size, route.per_rank_gbps, est.seconds),),
    )


def frontend(view: View, what: str, size: float, acc: str) -> Cost:
    """Client requests in and tokens out over the frontend/service network, never the backend fabric."""
    g = view.g
    cpu = next((n for n, d in g[acc].items() if view.kind[n] == "cpu"), None)
    fnics = [n for n in g[cpu] if view.kind[n] == "nic" and g.nodes[n].get("role") == "frontend"] if cpu else []
    if not fnics:
        raise CannotEstimate(f"{what}: no frontend NIC on the host of {acc}")
    edges = [d for n in fnics for m, d in g[n].items() if d["network"] in ("frontend", "host")]
    nic_speed = g.graph.get("frontend_nic_gbps")
    on_frontend = [d for d in edges if d["network"] == "frontend"]
    # Client → frontend core → access switch → frontend NIC → CPU; a lone reference has only the NIC's host hop.
    hops = 3 if on_frontend else 1
    per_hop = (on_frontend or edges)[0]["latency_ns"] * 1e-9
    lineage = frozenset(Lineage.of_edge(view.reference, d) for d in edges)
    if nic_speed is None:
        # The phase is reported with its bytes and route and no time; the other phases are still costed.
        why = FRONTEND_SPEED_UNKNOWN.format(reference=view.reference)
        latency_s, bandwidth_s, notes, unknown = 0.0, 0.0, f"seconds unknown: {why}", f"{what}: {why}"
    else:
        est = collectives.estimate("send", 2, size, _bytes(nic_speed, what), view.endpoint_s + hops * per_hop)
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
