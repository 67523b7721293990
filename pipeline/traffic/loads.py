"""Loads per physical link and phase times from routed flows.

A phase is one or more stages run one after the other (hierarchical collectives); inside a stage every flow of
every group runs at once. Per directed link: bytes, offered load (each flow at the rate it would get alone,
i.e. its path bottleneck) and utilisation = offered / capacity. Each flow's rate is its max-min fair share
(progressive filling over the incidence matrix); a stage lasts as long as its slowest flow. The bandwidth
term is that flow's time alone; queueing is the rest, and it is non-zero only where some link's offered load
exceeds its capacity. A fluid model: no packet-level effects, no congestion-control dynamics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..core.errors import UsageError
from . import collectives
from .routing import Fabric, Routes, tier_name

EPS = 1e-9


class UnknownCapacity(UsageError):
    """A flow crosses a link whose bandwidth no source or assumption states."""


def alone_rates(inc: sp.csr_matrix, capacity: np.ndarray) -> np.ndarray:
    """Each flow's rate with the network to itself: min over its links of capacity / fraction carried."""
    csc = inc.tocsc()
    ratio = capacity[csc.indices] / csc.data
    out = np.full(csc.shape[1], np.inf)
    nz = np.flatnonzero(np.diff(csc.indptr))
    if nz.size:
        out[nz] = np.minimum.reduceat(ratio, csc.indptr[nz])
    return out


def max_min(inc: sp.csr_matrix, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates by progressive filling: raise every unfrozen flow equally until a link fills, freeze
    the flows crossing it, repeat. Fractional incidence (ECMP splits) is honoured exactly."""
    nf = inc.shape[1]
    rate = np.zeros(nf)
    active = np.ones(nf, dtype=bool)
    at = inc.T.tocsr()
    used = np.asarray(inc.sum(axis=1)).ravel() > 0
    cap = np.where(used, capacity, np.inf)
    while active.any():
        weight = inc @ active.astype(float)
        residual = cap - inc @ rate
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(weight > EPS, residual / weight, np.inf)
        delta = room.min()
        if not np.isfinite(delta):  # no finite link left on these flows' paths
            rate[active] = np.inf
            break
        rate[active] += max(delta, 0.0)
        full = room <= delta * (1 + 1e-9) + 1e-12
        frozen = (at @ full.astype(float)) > 0
        if not (frozen & active).any():  # numerical safety: always make progress
            break
        active &= ~frozen
    return rate


@dataclass
class Stage:
    """Flows that run at once: src[i] → dst[i] carrying bytes[i]; `steps` latency-bearing steps."""

    src: list[str]
    dst: list[str]
    bytes: np.ndarray
    steps: int
    what: str


@dataclass
class StageCost:
    latency_s: float
    bandwidth_s: float
    queueing_s: float
    link_bytes: np.ndarray
    utilization: np.ndarray
    flows_per_link: np.ndarray
    slowest_links: np.ndarray
    injected: dict[str, float]
    notes: list[str]

    @property
    def seconds(self) -> float:
        return self.latency_s + self.bandwidth_s + self.queueing_s


def cost_stage(
    fabric: Fabric,
    stage: Stage,
    endpoint_s: float,
    routes: Routes | None = None,
    capacity: np.ndarray | None = None,
) -> StageCost:
    """Route (unless given), share fairly, and time one stage. `capacity` overrides link capacities (sharing)."""
    routes = routes or fabric.route(stage.src, stage.dst)
    inc = routes.incidence
    cap = fabric.capacity if capacity is None else capacity
    unknown = fabric.unknown_capacity(inc)
    if unknown:
        raise UnknownCapacity(
            f"{stage.what}: the bandwidth of {', '.join(unknown)} is unknown "
            "(no source states it and no assumption is declared)"
        )
    # A flow's demand: its share of its own ranks' access links (every flow of a rank shares that rank's
    # injection and reception) and never more than its path's narrowest link. That is the bandwidth term;
    # whatever the fair share over the whole fabric takes away beyond it is queueing, and it appears only
    # where the offered load (demands on a link) exceeds the link's capacity.
    demand = np.minimum(max_min(inc, np.where(fabric.access, cap, np.inf)), alone_rates(inc, cap))
    fair = max_min(inc, cap)
    b = stage.bytes
    t_alone = np.divide(b, demand, out=np.zeros_like(b), where=demand > 0)
    t_fair = np.divide(b, fair, out=np.full_like(b, np.inf), where=fair > 0)
    slow = int(np.argmax(t_fair)) if b.size else 0
    bandwidth = float(t_alone.max()) if b.size else 0.0
    queueing = max(0.0, float(t_fair.max()) - bandwidth) if b.size else 0.0
    offered = inc @ np.where(np.isfinite(demand), demand, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(cap > 0, offered / cap, 0.0)
    link_bytes = inc @ b
    flows = np.diff((inc > 0).astype(np.int8).tocsr().indptr)
    latency = stage.steps * (endpoint_s + float(routes.latency_ns.max(initial=0.0)) * 1e-9)
    slow_links = inc[:, slow].nonzero()[0] if b.size else np.zeros(0, np.int64)
    return StageCost(
        latency, bandwidth, queueing, link_bytes, util, flows, slow_links, injected(fabric, inc, b), routes.notes
    )


def injected(fabric: Fabric, inc: sp.csr_matrix, b: np.ndarray) -> dict[str, float]:
    """Bytes put on each network: a flow counts on a network where it enters it (accelerator → scale-up,
    accelerator → NIC for host, NIC → leaf for scale-out), so NVLink and NIC bytes are never added together."""
    tails, heads = fabric.tail, fabric.head
    net = np.repeat(fabric.network, 2)
    tk, hk = fabric.kind[tails], fabric.kind[heads]
    per_link = inc @ b
    out = {}
    masks = {
        "scale_up": (net == "scale_up") & (tk == "accelerator"),
        "host": (net == "host") & (tk == "accelerator") & (hk == "nic"),
        "scale_out": (net == "scale_out") & (tk == "nic"),
    }
    for name, mask in masks.items():
        total = float(per_link[mask].sum())
        if total:
            out[name] = total
    return out


# ---- collective patterns ----------------------------------------------------------------------------


def _pairs(groups: Sequence[Sequence[str]], per_pair: float) -> tuple[list[str], list[str], np.ndarray]:
    src, dst = [], []
    for g in groups:
        for a in g:
            for b in g:
                if a != b:
                    src.append(a)
                    dst.append(b)
    return src, dst, np.full(len(src), per_pair)


def _ring(groups: Sequence[Sequence[str]], per_flow: float) -> tuple[list[str], list[str], np.ndarray]:
    src, dst = [], []
    for g in groups:
        if len(g) > 1:
            src += list(g)
            dst += [*g[1:], g[0]]
    return src, dst, np.full(len(src), per_flow)


def collective_stages(
    op: str, groups: Sequence[Sequence[str]], size: float, domain_of: dict[str, str], what: str
) -> tuple[str, list[Stage]]:
    """The flows of one collective run by every group at once, as stages, and the algorithm assumed.

    Inside one domain: direct (every member sends its share to every other member: on a switch the same
    injection as a ring, on a mesh each pair on its own link). One member per domain: ring over the fabric.
    Equal members in every domain: hierarchical (inside, then one ring per local index across domains, then
    inside). Otherwise: one flat ring in rank order. All-to-all is always direct: every pair, S/n each."""
    groups = [list(g) for g in groups if len(g) > 1]
    if not groups:
        return "nothing to exchange (groups of one)", []
    n = len(groups[0])
    wire = collectives.wire_factor(op, n)
    steps = collectives.steps(op, n)
    shapes = []
    for g in groups:
        counts: dict[str, int] = {}
        for a in g:
            counts[domain_of[a]] = counts.get(domain_of[a], 0) + 1
        shapes.append(counts)
    if op == "all-to-all":
        s, d, b = _pairs(groups, size / n)
        return "direct all-to-all: every pair, S/n each", [Stage(s, d, b, steps, what)]
    if all(len(c) == 1 for c in shapes):
        s, d, b = _pairs(groups, wire * size / (n - 1))
        return "direct inside the scale-up domain (each member to every other)", [Stage(s, d, b, steps, what)]
    if all(set(c.values()) == {1} for c in shapes):
        s, d, b = _ring(groups, wire * size)
        return "ring across domains (one rank per domain)", [Stage(s, d, b, steps, what)]
    locals_ = {v for c in shapes for v in c.values()}
    if len(locals_) == 1 and op in ("all-reduce", "reduce-scatter", "all-gather"):
        local = locals_.pop()
        outer = n // local
        inner_groups, outer_groups = [], []
        for g in groups:
            by: dict[str, list[str]] = {}
            for a in g:
                by.setdefault(domain_of[a], []).append(a)
            members = list(by.values())
            inner_groups += members
            outer_groups += [[m[i] for m in members] for i in range(local)]
        inner_wire = collectives.wire_factor("reduce-scatter", local) * size / (local - 1)
        rs = Stage(*_pairs(inner_groups, inner_wire), collectives.steps("reduce-scatter", local), what)
        ag = Stage(*_pairs(inner_groups, inner_wire), collectives.steps("all-gather", local), what)
        across = Stage(
            *_ring(outer_groups, collectives.wire_factor(op, outer) * size / local),
            collectives.steps(op, outer),
            what,
        )
        stages = {"all-reduce": [rs, across, ag], "reduce-scatter": [rs, across], "all-gather": [across, ag]}[op]
        return (
            f"hierarchical: inside each {local}-rank domain, a ring of S/{local} across {outer} domains per local "
            "rank (each on its own NIC)",
            stages,
        )
    s, d, b = _ring(groups, wire * size)
    return "flat ring in rank order (groups span domains unevenly)", [Stage(s, d, b, steps, what)]


def send_stage(pairs: Sequence[tuple[str, str]], size: float, what: str) -> Stage:
    return Stage([a for a, _ in pairs], [b for _, b in pairs], np.full(len(pairs), float(size)), 1, what)


@dataclass
class PhaseLoad:
    """A phase's time terms and what it put on every physical link."""

    algorithm: str
    latency_s: float
    bandwidth_s: float
    queueing_s: float
    link_bytes: np.ndarray  # per directed link, summed over stages
    utilization: np.ndarray  # per directed link, max over stages
    flows_per_link: np.ndarray
    slowest_links: np.ndarray  # directed links on the slowest flow's path (of the longest stage)
    injected: dict[str, float]
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.latency_s + self.bandwidth_s + self.queueing_s


def cost_phase(
    fabric: Fabric,
    algorithm: str,
    stages: Sequence[Stage],
    endpoint_s: float,
    capacity: np.ndarray | None = None,
) -> PhaseLoad:
    nl = fabric.n_links
    costs = [cost_stage(fabric, s, endpoint_s, capacity=capacity) for s in stages]
    if not costs:
        z = np.zeros(nl)
        return PhaseLoad(algorithm, 0.0, 0.0, 0.0, z, z, z.astype(np.int64), np.zeros(0, np.int64), {})
    longest = max(costs, key=lambda c: c.bandwidth_s + c.queueing_s)
    inj: dict[str, float] = {}
    for c in costs:
        for k, v in c.injected.items():
            inj[k] = inj.get(k, 0.0) + v
    return PhaseLoad(
        algorithm,
        sum(c.latency_s for c in costs),
        sum(c.bandwidth_s for c in costs),
        sum(c.queueing_s for c in costs),
        np.sum([c.link_bytes for c in costs], axis=0),
        np.max([c.utilization for c in costs], axis=0),
        np.sum([c.flows_per_link for c in costs], axis=0),
        longest.slowest_links,
        inj,
        sorted({n for c in costs for n in c.notes}),
    )


def link_rows(fabric: Fabric, load: PhaseLoad) -> list[dict[str, Any]]:
    """One row per physical link the phase uses: both endpoints, network, tier, bytes each way, utilisation."""
    fwd, rev = load.link_bytes[0::2], load.link_bytes[1::2]
    used = np.flatnonzero((fwd > 0) | (rev > 0))
    util = np.maximum(load.utilization[0::2], load.utilization[1::2])
    flows = load.flows_per_link[0::2] + load.flows_per_link[1::2]
    rows = []
    for e in used:
        a, b = fabric.edges[e]
        rows.append(
            {
                "source": a,
                "target": b,
                "network": fabric.network[e],
                "tier": tier_name(fabric.kind[fabric.eu[e]], fabric.kind[fabric.ev[e]]),
                "bytes_forward": float(fwd[e]),
                "bytes_reverse": float(rev[e]),
                "capacity_gbps": float(fabric.capacity[2 * e] / 1e9 * 8),
                "utilization": float(util[e]),
                "flows": int(flows[e]),
            }
        )
    return rows


def hot_links(fabric: Fabric, load: PhaseLoad, top: int = 5) -> list[dict[str, Any]]:
    """The most utilised links (ties broken by name, so the list is deterministic)."""
    rows = link_rows(fabric, load)
    rows.sort(key=lambda r: (-r["utilization"], r["source"], r["target"]))
    return [
        {k: r[k] for k in ("source", "target", "network", "tier", "utilization", "bytes_forward", "bytes_reverse")}
        for r in rows[:top]
    ]


def lineage_links(fabric: Fabric, load: PhaseLoad) -> list[dict[str, Any]]:
    """Edge attributes (field, status) of every link on the slowest path: the phase's lineage."""
    edges = sorted({int(link) // 2 for link in load.slowest_links})
    return [fabric.edge_data[e] for e in edges]


def busy_fraction(load: PhaseLoad, capacity: np.ndarray, count: int, step_s: float) -> np.ndarray:
    """Per directed link: the share of a step this phase keeps it busy (bytes × count ÷ capacity ÷ step)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        busy = np.where(capacity > 0, load.link_bytes * count / capacity, 0.0)
    return busy / step_s if step_s > 0 else busy * 0
