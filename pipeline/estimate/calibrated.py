"""Workload phases on the calibrated collective costs: the group placed on the wiring, the algorithm and protocol
chosen per message size, efficiencies and latencies from models/calibration/collectives.yaml.

The seam to `cost.py`: `collective_cost` and `send_cost` return a `Cost`, or None when the view carries no
calibration or the group does not split evenly over domains (the plain alpha-beta cost is used then)."""

from __future__ import annotations

from dataclasses import replace

from ..core.confidence import of_status
from ..errors import UsageError
from .algorithms import Cost as AlgoCost
from .algorithms import Fabric, estimate
from .calculator import GBPS_TO_BYTES, Placed, collnet_lineage, collnet_note, place
from .cost import Cost, _link
from .view import TIER_NAMES, Lineage, View

CALIBRATION_REFERENCE = "calibration"


def _calibration_lineage(c: AlgoCost) -> set[Lineage]:
    return {
        Lineage(reference_id=CALIBRATION_REFERENCE, field=path, status=n.status, confidence=of_status(n.status))
        for path, n in c.used
    }


def _without_oversubscription(f: Fabric) -> Fabric:
    return f if f.out is None or f.out.oversubscription == 1 else replace(f, out=replace(f.out, oversubscription=1.0))


def _cost(view: View, placed: Placed, op: str, size: float, tier: int, hops: int, extra_notes: list[str]) -> Cost:
    cal = view.calibration
    f = placed.fabric
    real = estimate(cal, op, f, size)
    free_fabric = _without_oversubscription(f)
    free = real if free_fabric is f else estimate(cal, op, free_fabric, size, real.algorithm, real.protocol)
    queueing = max(0.0, real.seconds - free.seconds)
    slowest = max(real.stages, key=lambda s: s.bandwidth_seconds, default=None)
    line_gbps = {
        t.network: t.bytes_per_s / GBPS_TO_BYTES for t in (f.up, f.out) if t is not None
    }  # per rank, per direction
    effective = (
        slowest.bytes_per_rank / slowest.bandwidth_seconds / GBPS_TO_BYTES
        if slowest and slowest.bandwidth_seconds > 0
        else None
    )
    network = "scale_up" if f.domains == 1 else ("scale_out" if f.local == 1 else "scale_up+scale_out")
    bottleneck = line_gbps.get(slowest.network) if slowest else None
    # The first assumption ("X / P is what the library runs") is the algorithm column itself.
    notes = [*extra_notes, *real.assumptions[1:], *placed.notes, *collnet_note(real, placed)]
    if queueing > 0:
        notes.append(
            f"queueing: every group of this phase runs at once, so the oversubscribed tier "
            f"({f.out.oversubscription:g}:1 along the path) shares its uplinks (fluid share)"  # type: ignore[union-attr]
        )
    links = tuple(
        _link(f"{s.name} ({s.network}, per rank)", s.bytes_per_rank, line_gbps.get(s.network), s.bandwidth_seconds)
        for s in free.stages
    )
    by_network: dict[str, float] = {}
    for s in real.stages:  # the stages of the algorithm that runs: their bytes add up to the bytes on the wire
        by_network[s.network] = by_network.get(s.network, 0.0) + s.bytes_per_rank
    # A send is not a ring: NCCL runs it on its point-to-point channels (timed with the ring's per-step
    # latency and efficiency of the link class, which the calibration lineage shows).
    algorithm = "point-to-point" if op == "send" else real.algorithm
    return Cost(
        algorithm=f"{algorithm} / {real.protocol}"
        + (" (hierarchical, pipelined)" if f.local > 1 and f.domains > 1 and op != "send" else ""),
        bytes_on_wire_per_rank=real.bytes_on_wire_per_rank,
        network=network,
        tier=TIER_NAMES[tier],
        hops=hops,
        bottleneck_gbps=bottleneck,
        effective_gbps=effective,
        latency_s=free.latency_seconds,
        bandwidth_s=free.bandwidth_seconds,
        queueing_s=queueing,
        lineage=frozenset(
            placed.lineage | _calibration_lineage(real) | collnet_lineage(real, placed, view.g.graph["topology_id"])
        ),
        notes="; ".join(notes),
        links=links,
        bytes_on_wire_by_network=dict(sorted(by_network.items())),
    )


def collective_cost(view: View, what: str, op: str, group: list[str], size: float) -> Cost | None:
    """The calibrated cost of one collective over `group`, or None to fall back to the plain alpha-beta model."""
    if getattr(view, "calibration", None) is None:
        return None
    try:
        placed = place(view, view.calibration, len(group), accelerators=group, technology=view.scale_up_technology)
    except UsageError:
        return None  # an irregular group: the alpha-beta model handles it
    first = group[0]
    tier = max(view.tier(first, b) for b in group)
    if tier == 0:
        hops = view.scale_up(first).hops
    else:
        far = max(group, key=lambda b: view.tier(first, b))
        hops = view.scale_out(first, far, tier)[0].hops
    return _cost(view, placed, op, size, tier, hops, [])


def send_cost(view: View, what: str, a: str, b: str, size: float, concurrent: int) -> Cost | None:
    """A point-to-point message on the calibrated link classes; the fabric share as `cost.send` takes it."""
    if getattr(view, "calibration", None) is None:
        return None
    tier = view.tier(a, b)
    placed = place(view, view.calibration, 2, accelerators=[a, b], technology=view.scale_up_technology)
    if tier != 0 and placed.fabric.out is not None and concurrent <= 1:
        placed.fabric = replace(placed.fabric, out=replace(placed.fabric.out, oversubscription=1.0))
    hops = view.scale_up(a).hops if tier == 0 else view.scale_out(a, b, tier, concurrent=concurrent > 1)[0].hops
    where = (
        "local: both ends in one scale-up domain"
        if tier == 0
        else "crosses the scale-out fabric: the ends sit in different scale-up domains"
    )
    return _cost(view, placed, "send", size, tier, hops, [where])
