"""Loads per physical link and phase times from routed flows (a fluid model: no packets, no congestion control).

A phase is stages run one after the other; inside a stage every flow of every group runs at once, each at its
max-min fair share, and the stage lasts as long as its slowest flow. Per directed link: bytes, offered load (each
flow at its demand) and utilisation = offered / capacity. The bandwidth term is the slowest flow's time at its
demand; queueing is the rest, non-zero only where a link's offered load exceeds its capacity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import UsageError
from . import collectives
from .decompose import Communication
from .routing import GBPS_TO_BYTES, Routes, Wiring, tier_name

EPS = 1e-9


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
    """Max-min fair rates by progressive filling: raise every unfrozen flow equally until a link fills, freeze the
    flows crossing it, repeat (fractional incidence, ECMP splits, exactly)."""
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
class PhaseLoad:
    """A phase's (or one of its stages') time terms and what it put on every physical link."""

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
    hops: float = 0.0
    bottleneck_gbps: float | None = None  # the slowest flow's path capacity alone (ECMP splits counted)

    @property
    def seconds(self) -> float:
        return self.latency_s + self.bandwidth_s + self.queueing_s


def cost_stage(wiring: Wiring, stage: Stage, endpoint_s: float, capacity: np.ndarray | None = None) -> PhaseLoad:
    """Route, share fairly, and time one stage. `capacity` overrides link capacities (sharing)."""
    routes = wiring.route(stage.src, stage.dst)
    inc = routes.incidence
    cap = wiring.capacity if capacity is None else capacity
    unknown = wiring.unknown_capacity(inc)
    if unknown:
        raise UsageError(
            f"{stage.what}: the bandwidth of {', '.join(unknown)} is unknown "
            "(no source states it and no assumption is declared)"
        )
    # A flow's demand: its share of its ranks' access links (a rank's flows share its injection and reception),
    # never more than its path's narrowest link. What the fair share over the whole wiring takes beyond is queueing.
    alone = alone_rates(inc, cap)
    demand = np.minimum(max_min(inc, np.where(wiring.access, cap, np.inf)), alone)
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
    return PhaseLoad(
        "",
        latency,
        bandwidth,
        queueing,
        link_bytes,
        util,
        flows,
        slow_links,
        injected(wiring, inc, b),
        routes.notes,
        float(routes.hops.max(initial=0.0)),
        float(alone[slow] / GBPS_TO_BYTES) if b.size and np.isfinite(alone[slow]) else None,
    )


def injected(wiring: Wiring, inc: sp.csr_matrix, b: np.ndarray) -> dict[str, float]:
    """Bytes put on each network where a flow enters it (accelerator → scale-up, accelerator → NIC for host, NIC →
    leaf for scale-out), so NVLink and NIC bytes are never added together."""
    tails, heads = wiring.tail, wiring.head
    net = np.repeat(wiring.network, 2)
    tk, hk = wiring.kind[tails], wiring.kind[heads]
    per_link = inc @ b
    masks = {
        "scale_up": (net == "scale_up") & (tk == "accelerator"),
        "host": (net == "host") & (tk == "accelerator") & (hk == "nic"),
        "scale_out": (net == "scale_out") & (tk == "nic"),
    }
    totals = {name: float(per_link[mask].sum()) for name, mask in masks.items()}
    return {name: total for name, total in totals.items() if total}


def _pair_stage(groups: Sequence[Sequence[str]], per_pair: float, steps: int, what: str) -> Stage:
    """Every ordered pair of distinct members of each group, `per_pair` bytes each, as one stage (source-major)."""
    src = [a for g in groups for a in g for b in g if a != b]
    dst = [b for g in groups for a in g for b in g if a != b]
    return Stage(src, dst, np.full(len(src), per_pair), steps, what)


def _ring_stage(groups: Sequence[Sequence[str]], per_flow: float, steps: int, what: str) -> Stage:
    """Each member of each group to the next one (the last to the first), `per_flow` bytes each, as one stage."""
    src = [a for g in groups if len(g) > 1 for a in g]
    dst = [b for g in groups if len(g) > 1 for b in [*g[1:], g[0]]]
    return Stage(src, dst, np.full(len(src), per_flow), steps, what)


def _by_domain(group: Sequence[str], domain_of: dict[str, str]) -> list[list[str]]:
    """A group's members domain by domain (domains in order of first member)."""
    by: dict[str, list[str]] = {}
    for a in group:
        by.setdefault(domain_of[a], []).append(a)
    return list(by.values())


def collective_stages(
    op: str, groups: Sequence[Sequence[str]], size: float, domain_of: dict[str, str], what: str
) -> tuple[str, list[Stage]]:
    """The flows of one collective run by every group at once, as stages, and the algorithm assumed: inside one
    domain direct (each member to every other: on a switch the injection of a ring, on a mesh a link per pair); one
    member per domain a ring; equal members in every domain hierarchical (inside, a ring per local index across,
    inside); otherwise one flat ring in rank order. All-to-all is always direct, S/n per pair."""
    groups = [list(g) for g in groups if len(g) > 1]
    if not groups:
        return "nothing to exchange (groups of one)", []
    n = len(groups[0])
    wire = collectives.wire_factor(op, n)
    steps = collectives.ring_steps(op, n)
    shapes = [Counter(domain_of[a] for a in g) for g in groups]
    if op == "all-to-all":
        return "direct all-to-all: every pair, S/n each", [_pair_stage(groups, size / n, steps, what)]
    if all(len(c) == 1 for c in shapes):
        stage = _pair_stage(groups, wire * size / (n - 1), steps, what)
        return "direct inside the scale-up domain (each member to every other)", [stage]
    if all(set(c.values()) == {1} for c in shapes):
        return "ring across domains (one rank per domain)", [_ring_stage(groups, wire * size, steps, what)]
    locals_ = {v for c in shapes for v in c.values()}
    if len(locals_) == 1 and op in ("all-reduce", "reduce-scatter", "all-gather"):
        local = locals_.pop()
        outer = n // local
        inner_groups, outer_groups = [], []
        for g in groups:
            members = _by_domain(g, domain_of)
            inner_groups += members
            outer_groups += [[m[i] for m in members] for i in range(local)]
        inner_wire = collectives.wire_factor("reduce-scatter", local) * size / (local - 1)
        rs = _pair_stage(inner_groups, inner_wire, collectives.ring_steps("reduce-scatter", local), what)
        ag = _pair_stage(inner_groups, inner_wire, collectives.ring_steps("all-gather", local), what)
        across = _ring_stage(
            outer_groups, collectives.wire_factor(op, outer) * size / local, collectives.ring_steps(op, outer), what
        )
        stages = {"all-reduce": [rs, across, ag], "reduce-scatter": [rs, across], "all-gather": [across, ag]}[op]
        return (
            f"hierarchical: inside each {local}-rank domain, a ring of S/{local} across {outer} domains per local "
            "rank (each on its own NIC)",
            stages,
        )
    return "flat ring in rank order (groups span domains unevenly)", [_ring_stage(groups, wire * size, steps, what)]


def btree_parents(n: int) -> np.ndarray:
    """Parent of each rank in NCCL's binary tree over n ranks (root 0, -1 for it): the lowest set bit b of r,
    parent (r xor b) | 2b, or r xor b when that is out of range (NCCL src/graph/trees.cc, ncclGetBtree)."""
    r = np.arange(n, dtype=np.int64)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    up = np.where(up >= n, r ^ bit, up)
    up[0] = -1
    return up


def dtree_parents(n: int) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's double binary tree: the binary tree, and its mirror (n even) or the tree shifted by one (n odd)."""
    first = btree_parents(n)
    r = np.arange(n, dtype=np.int64)
    if n % 2:
        up = first[(r - 1) % n]
        second = np.where(up < 0, -1, (up + 1) % n)
    else:
        up = first[n - 1 - r]
        second = np.where(up < 0, -1, n - 1 - up)
    return first, second


def tree_stages(
    groups: Sequence[Sequence[str]], size: float, domain_of: dict[str, str], what: str
) -> tuple[str, list[Stage]]:
    """The flows of an all-reduce as NCCL's tree, in one stage (pipelined): a chain through each domain (S up to
    reduce, S down to broadcast) and, per local index, a double binary tree over the domains, each carrying half of
    the rank's S/local share both ways on every edge. Groups spread unevenly are taken as one rank per domain."""
    src: list[str] = []
    dst: list[str] = []
    sizes: list[float] = []
    depth = chain = 0
    for g in groups:
        if len(g) < 2:
            continue
        members = _by_domain(g, domain_of)
        if len({len(m) for m in members}) != 1:
            members = [[a] for a in g]
        local, outer = len(members[0]), len(members)
        chain = max(chain, local - 1)
        for m in members:
            for a, b in pairwise(m):
                src += [b, a]  # reduce towards the chain's head, broadcast back
                dst += [a, b]
                sizes += [size, size]
        if outer > 1:
            depth = max(depth, int(np.ceil(np.log2(outer))))
            for parents in dtree_parents(outer):
                child = np.flatnonzero(parents >= 0)
                for i in range(local):
                    nodes = [m[i] for m in members]
                    for c in child:
                        a, b = nodes[c], nodes[parents[c]]
                        src += [a, b]
                        dst += [b, a]
                        sizes += [size / local / 2] * 2
    stage = Stage(src, dst, np.array(sizes, dtype=float), 2 * chain + 2 * depth, what)
    return (
        "NCCL double binary tree: a chain through each domain, two binary trees across domains per local rank "
        "(S/local each, half per tree), pipelined",
        [stage] if src else [],
    )


def send_stage(pairs: Sequence[tuple[str, str]], size: float, what: str) -> Stage:
    return Stage([a for a, _ in pairs], [b for _, b in pairs], np.full(len(pairs), float(size)), 1, what)


def _fit(a: np.ndarray, n: int) -> np.ndarray:
    return a if a.size >= n else np.concatenate([a, np.zeros(n - a.size, dtype=a.dtype)])


def cost_phase(
    wiring: Wiring, algorithm: str, stages: Sequence[Stage], endpoint_s: float, capacity: np.ndarray | None = None
) -> PhaseLoad:
    costs = [cost_stage(wiring, s, endpoint_s, capacity=capacity) for s in stages]
    nl = wiring.n_links
    if not costs:
        z = np.zeros(nl)
        return PhaseLoad(algorithm, 0.0, 0.0, 0.0, z, z, z.astype(np.int64), np.zeros(0, np.int64), {})
    for c in costs:  # links registered by a later stage extend the arrays of earlier ones
        c.link_bytes, c.utilization = _fit(c.link_bytes, nl), _fit(c.utilization, nl)
        c.flows_per_link = _fit(c.flows_per_link, nl).astype(np.int64)
    longest = max(costs, key=lambda c: c.bandwidth_s + c.queueing_s)
    return PhaseLoad(
        algorithm,
        sum(c.latency_s for c in costs),
        sum(c.bandwidth_s for c in costs),
        sum(c.queueing_s for c in costs),
        np.sum([c.link_bytes for c in costs], axis=0),
        np.max([c.utilization for c in costs], axis=0),
        np.sum([c.flows_per_link for c in costs], axis=0),
        longest.slowest_links,
        sum((Counter(c.injected) for c in costs), Counter()),
        sorted({n for c in costs for n in c.notes}),
        max(c.hops for c in costs),
        longest.bottleneck_gbps,
    )


def link_rows(wiring: Wiring, load: PhaseLoad) -> list[dict[str, Any]]:
    """One row per physical link the phase uses: both endpoints, network, tier, bytes each way, utilisation.
    An edge is stored (u, v) with u <= v by name, its arc 2e running u → v: `bytes_forward` is that arc's."""
    nl = wiring.n_links
    lb, lu, lf = (_fit(a, nl)[:nl].reshape(-1, 2) for a in (load.link_bytes, load.utilization, load.flows_per_link))
    on = lb > 0  # an arc carrying no bytes adds nothing to its link's row
    used = np.flatnonzero(on.any(axis=1))
    on = on[used]
    forward, reverse = np.where(on, lb[used], 0.0).T.tolist()
    util = np.where(on, lu[used], 0.0).max(axis=1).tolist()
    flows = np.where(on, lf[used], 0).astype(np.int64).sum(axis=1).tolist()
    gbps = (wiring.capacity[np.where(on[:, 0], 2 * used, 2 * used + 1)] / GBPS_TO_BYTES).tolist()
    edges, network, eu, ev, kind = wiring.edges, wiring.network, wiring.eu, wiring.ev, wiring.kind
    ids = used.tolist()
    return [
        {
            "source": edges[e][0],
            "target": edges[e][1],
            "network": network[e],
            "tier": tier_name(kind[eu[e]], kind[ev[e]]),
            "bytes_forward": forward[k],
            "bytes_reverse": reverse[k],
            "capacity_gbps": gbps[k],
            "utilization": util[k],
            "flows": flows[k],
        }
        for k, e in sorted(enumerate(ids), key=lambda ke: edges[ke[1]])
    ]


def hot_links(rows: list[dict[str, Any]], top: int = 5) -> list[dict[str, Any]]:
    """The most utilised of a phase's `link_rows` (ties broken by name, so the list is deterministic)."""
    rows = sorted(rows, key=lambda r: (-r["utilization"], r["source"], r["target"]))
    return [
        {k: r[k] for k in ("source", "target", "network", "tier", "utilization", "bytes_forward", "bytes_reverse")}
        for r in rows[:top]
    ]


def lineage_links(wiring: Wiring, load: PhaseLoad) -> list[dict[str, Any]]:
    """Edge attributes (field, status) of every link on the slowest path: the phase's lineage."""
    edges = sorted({int(link) // 2 for link in load.slowest_links})
    return [wiring.edge_data[e] for e in edges]


def added_queueing(
    wiring: Wiring,
    stages: Sequence[Stage],
    mine: PhaseLoad,
    others: Sequence[tuple[PhaseLoad, int]],
    other_step_s: float,
) -> tuple[float, float]:
    """Queueing a co-running job adds to one of my phases, and the largest share of its step it keeps a shared link
    busy (bytes × count ÷ capacity ÷ step, at most 0.95): my phase re-costed with the shared links' capacities
    reduced by that share."""
    nl = wiring.n_links
    cap = wiring.capacity
    busy = np.zeros(nl)
    for load, count in others:
        with np.errstate(divide="ignore", invalid="ignore"):
            busy += np.where(cap > 0, _fit(load.link_bytes, nl) * count / cap, 0.0)
    busy = np.minimum(0.95, busy / other_step_s) if other_step_s > 0 else busy * 0
    shared = (_fit(mine.link_bytes, nl) > 0) & (busy > 0)
    if not shared.any():
        return 0.0, 0.0
    reduced = cap.copy()
    reduced[shared] *= 1 - busy[shared]
    again = cost_phase(wiring, mine.algorithm, stages, 0.0, capacity=reduced)
    before = mine.bandwidth_s + mine.queueing_s
    return max(0.0, again.bandwidth_s + again.queueing_s - before), float(busy[shared].max())


@dataclass
class RoutedPhase:
    """A communication's flows over the wiring (all its groups at once) and what they put on every link."""

    phase: str
    collective: str
    count: int
    bytes_per_rank: float
    load: PhaseLoad
    stages: list[Stage] = field(default_factory=list)


def _merge(parts: Sequence[Sequence[Stage]]) -> list[Stage]:
    """Communications that run at the same time: stage i of each joins one stage (flows concatenated)."""
    out = []
    for i in range(max((len(p) for p in parts), default=0)):
        here = [p[i] for p in parts if i < len(p)]
        out.append(
            Stage(
                [a for s in here for a in s.src],
                [b for s in here for b in s.dst],
                np.concatenate([s.bytes for s in here]),
                max(s.steps for s in here),
                here[0].what,
            )
        )
    return out


def route(
    wiring: Wiring,
    comm: Communication,
    accelerators: Mapping[int, str],
    algorithm: str,
    endpoint_s: float,
    what: str,
    capacity: np.ndarray | None = None,
) -> RoutedPhase:
    """Every group of `comm` placed (rank → accelerator) and routed at once with the flows of the algorithm the
    registry chose (a tree along its edges, others as ring neighbours or direct pairs), shared fairly and timed."""
    where = f"{what} {comm.phase}"
    if comm.collective == "send":
        pairs = [(accelerators[a], accelerators[b], part.bytes_per_rank) for part in comm.parts for a, b in part.groups]
        stage = Stage([a for a, _, _ in pairs], [b for _, b, _ in pairs], np.array([x for *_, x in pairs]), 1, where)
        name, stages = "point-to-point", [stage]
    else:
        domain_of = wiring.domain_of
        built = []
        for part in comm.parts:
            groups = [[accelerators[r] for r in g] for g in part.groups]
            if algorithm == "tree":
                built.append(tree_stages(groups, part.bytes_per_rank, domain_of, where))
            else:
                built.append(collective_stages(comm.collective, groups, part.bytes_per_rank, domain_of, where))
        name = "; ".join(n for n, _ in built)
        stages = built[0][1] if len(built) == 1 and algorithm != "tree" else _merge([s for _, s in built if s])
    load = cost_phase(wiring, name, stages, endpoint_s, capacity)
    return RoutedPhase(comm.phase, comm.collective, comm.count, comm.bytes_per_rank, load, stages)


def rank_ceiling(wiring: Wiring, src: Sequence[str], routes: Routes) -> float:
    """Bytes/s the slowest sending rank of flows from `src` puts on the wire with the network to itself: over each
    link leaving the rank, the lesser of its capacity and what its flows could put there (path bottleneck × share),
    summed."""
    s = wiring.positions(src)
    inc = routes.incidence
    cap = wiring.capacity
    alone = alone_rates(inc, cap)
    coo = inc.tocoo()
    leaving = wiring.tail[coo.row] == wiring.acc_node[s][coo.col]
    link, flow = coo.row[leaving], coo.col[leaving]
    key = s[flow] * wiring.n_links + link
    keys, inverse = np.unique(key, return_inverse=True)
    offered = np.bincount(inverse.ravel(), weights=alone[flow] * coo.data[leaving])
    usable = np.minimum(offered, cap[keys % wiring.n_links])
    ranks, at = np.unique(keys // wiring.n_links, return_inverse=True)
    return float(np.bincount(at.ravel(), weights=usable).min()) if ranks.size else 0.0
