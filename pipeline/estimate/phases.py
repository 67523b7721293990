"""A workload's phases on a topology: decompose (`demand.py`), place every rank, route every flow, cost.

`demand.py` says what each phase asks (names, counts, buffer sizes); `placement.py` lays every rank on an
accelerator and checks every group; `routing.py` turns every group's flows into paths over the installed graph;
`loads.py` shares the links fairly and times each phase from its slowest flow. Client traffic on the frontend
network is costed by `cost.py`. The first-fit check below keeps its messages for TP beyond a domain.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import UsageError
from . import collectives
from .cost import Cost, Phase, cost
from .demand import Communication, Demand, decompose
from .loads import RoutedPhase, along_tree, hot_links, lineage_links, link_rows, workload_phases
from .placement import rank_accelerators
from .view import TIER_NAMES, Lineage, View
from .workloads import Workload

ROUTED_NOTE = (
    "every group of the phase routed at once over the installed links (shortest paths, ECMP split uniformly); "
    "each flow gets its max-min fair share; queueing only where a link's offered load exceeds its capacity"
)
TIER_ORDER = {"spine–core": 3, "leaf–spine": 2, "NIC–leaf": 1}


def phases(view: View, w: Workload, offset: int = 0, routed: list[RoutedPhase] | None = None) -> list[Phase]:
    """Every phase of `w` with its ranks placed from accelerator `offset` on; the wiring is not changed.
    `routed`: `routed_phases(view, w, offset)[1]` when the caller already holds it (sharing needs it too)."""
    demand = decompose(w)
    accelerators = place(view, demand, offset, w)
    if routed is None:
        _, routed = routed_phases(view, w, offset)
    by_name = {r.phase: r for r in routed}
    out = []
    for comm in demand.communications:
        r = by_name.get(comm.phase)
        group = members(comm, accelerators)
        out.append(cost(view, comm, group) if r is None else calibrated(view, comm, group, from_routed(view, comm, r)))
    return out


def calibrated(view: View, comm: Communication, group: list[str], routed: Phase) -> Phase:
    """The routed phase timed the way the collective library runs it: algorithm and protocol chosen for the
    message size, efficiencies and latencies from the calibration, hierarchical stages pipelined
    (`calibrated.py`). Queueing, links and hot links stay those of the routed flows (link contention)."""
    from .calibrated import CALIBRATION_REFERENCE, collective_cost, send_cost

    size = routed.bytes_per_rank  # the routed model's buffer (e.g. MoE gradients without the experts' share)
    if comm.collective == "send":
        c = send_cost(view, comm.phase, group[0], group[1], size, routed.concurrent_groups)
    else:
        c = collective_cost(view, comm.phase, comm.collective, group, size)
    if c is None:
        return routed
    moving = c.bandwidth_s + routed.queueing_s
    # The library's stages say which network carries which of its bytes (a hierarchical all-reduce: the
    # reduce-scatter and all-gather on scale-up, the S/local all-reduce on the NICs); the routed ring's split
    # would not add up to the bytes the library puts on the wire.
    by_net = c.bytes_on_wire_by_network or routed.bytes_on_wire_by_network
    library = [n for n in c.notes.split("; ") if n and not n.startswith(("queueing:", "every rank crosses"))]
    if comm.collective == "send":
        library = library[1:]  # the locality note is already the routed phase's first
    return replace(
        routed,
        algorithm=c.algorithm,
        bytes_on_wire_per_rank=c.bytes_on_wire_per_rank,
        bytes_on_wire_by_network=by_net,
        latency_s=c.latency_s,
        bandwidth_s=c.bandwidth_s,
        effective_gbps=c.bytes_on_wire_per_rank * 8 / moving / 1e9 if moving > 0 else c.effective_gbps,
        lineage=routed.lineage | {x for x in c.lineage if x.reference_id == CALIBRATION_REFERENCE},
        notes="; ".join([routed.notes, *library]) if library else routed.notes,
    )


def routed_phases(view: View, w: Workload, offset: int = 0) -> tuple[Any, list[RoutedPhase]]:
    """The backend phases of `w` with every group placed and routed (the placement and the routed phases); an
    all-reduce the collective library runs as a tree is routed along the tree's edges, not ring neighbours."""
    placement, routed = workload_phases(view.fabric, w, view.endpoint_s, offset)
    return placement, [_as_run(view, r) for r in routed]


def _as_run(view: View, r: RoutedPhase) -> RoutedPhase:
    """The routed phase with the flows of the algorithm the calibrated library model chooses for it (the same
    choice `calibrated` reports: the representative group, the phase's buffer)."""
    if r.collective != "all-reduce" or not r.parts:
        return r
    from .calibrated import collective_cost

    c = collective_cost(view, r.phase, "all-reduce", r.parts[0][1][0], r.bytes_per_rank)
    if c is None or not c.algorithm.startswith("tree"):
        return r
    return along_tree(view.fabric, r, view.endpoint_s)


def from_routed(view: View, comm: Communication, r: RoutedPhase) -> Phase:
    """A phase record (today's keys) from a routed phase: times, bottleneck, tier, lineage of the slowest path."""
    fabric, load = view.fabric, r.load
    rows = link_rows(fabric, load)
    # Per sending rank: in a send only one end of each pair injects (the receiver's bytes are the same bytes).
    ranks = max(1, r.groups if comm.collective == "send" else r.group_size * r.groups)
    by_net = {k: v / ranks for k, v in sorted(load.injected.items()) if k != "host"}
    network = "+".join(k for k in ("scale_up", "scale_out") if k in by_net) or "scale_up"
    tiers = {row["tier"] for row in rows}
    tier = max((TIER_ORDER.get(t, 0) for t in tiers), default=0)
    slow = lineage_links(fabric, load)
    notes = [ROUTED_NOTE, *load.notes]
    if comm.collective == "send":
        notes.insert(
            0,
            "local: both ends in one scale-up domain"
            if network == "scale_up"
            else "crosses the scale-out fabric: the ends sit in different scale-up domains",
        )
    if load.queueing_s > 0:
        top = max(rows, key=lambda x: x["utilization"])
        notes.append(
            f"queueing: offered load {top['utilization']:.2f}× the capacity of {top['tier']} "
            f"{top['source']} – {top['target']} (fluid share)"
        )
    size = r.bytes_per_rank
    n = comm.group_size if comm.collective != "send" else 2
    wire = collectives.wire_factor(comm.collective, n) * size
    moving = load.bandwidth_s + load.queueing_s
    cost = Cost(
        algorithm=load.algorithm,
        bytes_on_wire_per_rank=wire,
        network=network,
        tier=TIER_NAMES[tier],
        hops=round(load.hops),
        bottleneck_gbps=load.bottleneck_gbps,
        effective_gbps=wire * 8 / moving / 1e9 if moving > 0 else load.bottleneck_gbps,
        latency_s=load.latency_s,
        bandwidth_s=load.bandwidth_s,
        queueing_s=load.queueing_s,
        lineage=frozenset(Lineage.of_edge(view.reference, d) for d in slow),
        notes="; ".join(notes),
        links=tuple(rows),
    )
    return Phase.of(
        comm,
        cost,
        concurrent_groups=r.groups,
        bytes_per_rank=size,
        max_link_utilization=float(np.max(load.utilization, initial=0.0)),
        hot_links=tuple(hot_links(fabric, load, rows=rows)),
        bytes_on_wire_by_network=by_net,
    )


def place(view: View, demand: Demand, offset: int = 0, w: Workload | None = None) -> dict[int, str]:
    """The accelerator of each rank the workload uses (its declared placement, or the cluster's default); a
    workload larger than what is left of the topology, or a tensor-parallel group beyond or across scale-up
    domains, is refused with what to change."""
    view.check_size(offset + demand.ranks, f"workload {demand.workload_id}")
    if w is None:
        accelerators = dict(enumerate(view.accelerators[offset : offset + demand.ranks]))
    else:
        accelerators = rank_accelerators(view.g, w, offset)
    for comm in demand.communications:
        if comm.one_domain is not None:
            check_one_domain(view, comm, members(comm, accelerators))
    return accelerators


def members(comm: Communication, accelerators: dict[int, str]) -> list[str]:
    """The accelerators of a communication's representative group."""
    return [accelerators[r] for r in comm.group]


def check_one_domain(view: View, comm: Communication, group: list[str]) -> None:
    """Tensor parallelism must stay inside one scale-up domain."""
    tp, what, reference = len(group), comm.one_domain, view.reference
    if tp > view.domain_size:
        raise UsageError(
            f"{what}: tensor parallel degree {tp} exceeds the scale-up domain of {reference} "
            f"({view.domain_size} accelerators); tensor parallelism must stay inside one scale-up domain"
        )
    if len({view.domain(a) for a in group}) > 1:
        raise UsageError(
            f"{what}: the tensor-parallel group would straddle two scale-up domains of {reference}; "
            f"choose a degree that divides the domain size {view.domain_size}"
        )
