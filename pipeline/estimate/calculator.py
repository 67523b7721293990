"""A group of ranks on an installed topology as the collective registry sees it (its `Shape`: ranks per domain,
line rates, link technologies, hops, what routing lets a rank reach), and the calculator's topology mode."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..core import confidence as rule
from ..errors import UsageError
from ..formats.calibration import Calibration
from . import collectives
from .collectives import Estimate, Shape, Tier
from .loads import rank_ceiling
from .routing import GBPS_TO_BYTES
from .view import Lineage, Path, View


class UnknownBandwidth(UsageError):
    """A collective over a network whose bandwidth no source or assumption states: its time cannot be given. A
    workload's phase takes it as an unknown time naming `field` (REFERENCE:FIELD); a calculator refuses."""

    def __init__(self, network: str, view: View, field: str) -> None:
        self.network, self.field = network, f"{view.reference}:{field}"
        super().__init__(
            f"the {network.replace('_', '-')} bandwidth of {view.reference} is unknown: no source or assumption "
            f"states it ({self.field})"
        )


def _reach(view: View, src: list[str], path: Path, line_gbps: float, network: str, notes: list[str]) -> float:
    """Bytes/s per direction a rank moves on one network: its line rate, unless the routed paths to its peers hold
    it to less (a mesh pair has one link of a rank's seven)."""
    line = line_gbps * GBPS_TO_BYTES
    reach = rank_ceiling(view.wiring, src, path.routes)
    if reach < line * (1 - 1e-9):
        notes.append(
            f"routed: a rank reaches its peers on {network} with {reach / GBPS_TO_BYTES:g} Gb/s of its "
            f"{line_gbps:g} Gb/s (the other links lead elsewhere)"
        )
        return reach
    return line


def place(
    view: View,
    cal: Calibration,
    ranks: int,
    accelerators: list[str] | None = None,
    technology: str | None = None,
    uneven: bool = False,
) -> Shape:
    """Ranks on the first accelerators in topology order, or on the ones given. A group spread unevenly over domains
    is refused, unless `uneven`: then it is one flat ring in rank order, every rank its own domain."""
    if ranks < 1:
        raise UsageError(f"--ranks must be at least 1, got {ranks}")
    accs = accelerators if accelerators is not None else view.accelerators[:ranks]
    if len(accs) < ranks:
        raise UsageError(
            f"{ranks} ranks need {ranks} accelerators; topology {view.g.graph['topology_id']} has {len(accs)}"
        )
    by_domain: dict[str, list[str]] = {}
    for a in accs:
        by_domain.setdefault(view.domain(a), []).append(a)
    sizes = {len(m) for m in by_domain.values()}
    notes: list[str] = []
    if len(sizes) != 1:
        spread = sorted(len(m) for m in by_domain.values())
        if not uneven:
            raise UsageError(
                f"{ranks} ranks fill scale-up domains unevenly ({spread}); "
                f"use a multiple of the domain size {view.domain_size} or fewer ranks than one domain"
            )
        notes.append(
            f"the group spans scale-up domains unevenly ({spread}): costed as one flat ring in rank order at the "
            "scale-out rate"
        )
        by_domain = {a: [a] for a in accs}
    local, domains = len(next(iter(by_domain.values()))), len(by_domain)
    lineage: set[Lineage] = set()
    techs: dict[str, str] = {}
    up = out = None
    nvls = one_shot = False
    first = accs[0]
    if local > 1:
        links = [d for d in view.g[first].values() if d["network"] == "scale_up"]
        bws = [d["bandwidth_gbps"] for d in links]
        if not bws or None in bws:
            unknown = next((d["field"] for d in links if d["bandwidth_gbps"] is None and d.get("field")), None)
            raise UnknownBandwidth("scale_up", view, unknown or "scale_up.bandwidth_per_accelerator")
        tech = technology if technology is not None else view.g.graph.get("scale_up_technology", "")
        name, lc = cal.link_class("scale_up", tech)
        techs["scale_up"] = f"{tech or 'not stated'} -> {name}"
        members = by_domain[view.domain(first)]
        pairs = [(a, b) for a in members for b in members if a != b]
        src = [a for a, _ in pairs]
        path = view.path(src, [b for _, b in pairs])
        # NCCL's NVLink step latency was measured GPU → switch → GPU: only hops beyond those two add.
        per_hop = (path.latency_s - view.endpoint_s) / path.hops if path.hops else 0.0
        rate = _reach(view, src, path, sum(bws), "scale-up", notes)
        up = Tier("scale_up", name, lc, rate, max(0, path.hops - 2) * per_hop)
        lineage |= path.lineage
        switched = view.summary["nodes_by_kind"].get("scale_up_switch", 0) > 0
        peers = {m for m, d in view.g[first].items() if d["network"] == "scale_up" and view.kind[m] == "accelerator"}
        mesh = len(peers) >= len(members) - 1
        nvls = switched and lc.nvls is not None
        one_shot = lc.one_shot and (switched or mesh)
    if domains > 1:
        others = [m[0] for m in by_domain.values()]
        far = max(others[1:], key=lambda b: view.tier(first, b))
        tier = view.tier(first, far)
        if tier == 9:
            raise UsageError(
                f"topology {view.g.graph['topology_id']} has no backend fabric between "
                f"{first} and {far}: build a cluster to cross scale-up domains"
            )
        edges = [d for nic in view.nics(first) for m, d in view.g[nic].items() if view.kind[m] == "leaf"]
        if not edges:
            raise UnknownBandwidth("scale_out", view, "scale_out.nic.speed")
        proto = view.g.graph.get("scale_out_protocol", "")
        name, lc = cal.link_class("scale_out", proto)
        techs["scale_out"] = f"{proto or 'not stated'} -> {name}"
        path = view.path([first], [far])
        # Switches beyond the first on the routed path: one per link besides its two host and two NIC-leaf links.
        further = max(0, path.hops - 4)
        switch_ns = edges[0]["latency_ns"]
        extra = further * switch_ns * 1e-9
        rate = _reach(view, [first], path, sum(d["bandwidth_gbps"] for d in edges), "scale-out", notes)
        # The fluid share per rank when every rank crosses the oversubscribed tiers of this path at once.
        over = view.summary["oversubscription"]
        factor = (over.get("leaf", 1.0) if tier >= 2 else 1.0) * (over.get("spine", 1.0) if tier >= 3 else 1.0)
        out = Tier("scale_out", name, lc, rate, extra, factor)
        lineage |= path.lineage
        if extra:
            notes.append(
                f"assumed: NCCL's network step latency covers one switch; the {further} further "
                f"switch(es) of this path add {switch_ns:g} ns each (topology defaults)"
            )
        if factor != 1:
            notes.append(
                f"every rank crosses the oversubscribed tier at once: the fabric share per rank is 1/{factor:g} of "
                "its NIC (fluid share)"
            )
    # CollNet only where the cluster declares SHARP (models/clusters: scale_out.in_network_reduction).
    collnet = view.g.graph.get("scale_out_in_network_reduction") == "sharp"
    return Shape(
        len(accs),
        local,
        domains,
        up,
        out,
        nvls=nvls,
        collnet=collnet,
        one_shot=one_shot,
        lineage=frozenset(lineage),
        notes=tuple(notes),
        technologies=tuple(techs.items()),
        collnet_basis=view.g.graph.get("scale_out_in_network_reduction_basis") if collnet else None,
        topology_id=view.g.graph["topology_id"],
    )


def collnet_lineage(est: Estimate, shape: Shape) -> set[Lineage]:
    """The cluster's SHARP declaration when the chosen algorithm rests on it: published with a source, else assumed."""
    if est.algorithm != "collnet" or shape.collnet_basis is None:
        return set()
    status = "assumed" if shape.collnet_basis.startswith("assumed") else "published"
    return {
        Lineage(
            reference_id=shape.topology_id, field="scale_out.in_network_reduction", status=status, confidence=status
        )
    }


def collnet_note(est: Estimate, shape: Shape) -> list[str]:
    if est.algorithm != "collnet" or shape.collnet_basis is None:
        return []
    return [f"InfiniBand SHARP declared by the cluster ({shape.collnet_basis})"]


def confidence(est: Estimate, shape: Shape) -> str:
    """The weakest of the calibration numbers used and of the topology figures."""
    used = [rule.of_status(n.status) for _, n in est.used]
    return rule.weakest([*used, *(x.confidence for x in shape.lineage | collnet_lineage(est, shape))])


def on_topology(view: View, op: str, ranks: int, size: float, algorithm: str | None = None) -> tuple[Estimate, Shape]:
    """One collective on the topology's first `ranks` accelerators: the chosen algorithm and protocol."""
    cal, shape = first_ranks(view, ranks)
    return collectives.estimate(cal, op, shape, size, algorithm), shape


def first_ranks(view: View, ranks: int) -> tuple[Calibration, Shape]:
    """The view's calibration and `ranks` placed on its first accelerators (a view from `view_for`, which holds
    both the calibration and the scale-up technology the calibration is matched on)."""
    if view.calibration is None:
        raise UsageError("the view carries no calibration (build it with view_for)")
    return view.calibration, place(view, view.calibration, ranks, technology=view.scale_up_technology)


def result_dict(est: Estimate, shape: Shape) -> dict[str, Any]:
    d = est.as_dict()
    return {
        **d,
        "topology_id": shape.topology_id,
        "ranks_per_domain": shape.local,
        "domains": shape.domains,
        "link_classes": dict(shape.technologies),
        "confidence": confidence(est, shape),
        "topology_lineage": [asdict(x) for x in sorted(shape.lineage | collnet_lineage(est, shape))],
        "assumptions": [*d["assumptions"], *shape.notes, *collnet_note(est, shape)],
    }


def sweep(view: View, op: str, ranks: int, low: int, high: int, algorithm: str | None = None) -> list[dict[str, Any]]:
    """One row per power-of-two size from low to high, like `all_reduce_perf -b low -e high -f 2`."""
    if low < 1 or high < low:
        raise UsageError(f"--sweep {low}:{high}: expected 1 <= MIN <= MAX")
    cal, shape = first_ranks(view, ranks)
    keys = ("seconds", "algbw_gb_per_s", "busbw_gb_per_s", "algorithm", "protocol")
    rows = []
    size = low
    while size <= high:
        est = collectives.estimate(cal, op, shape, float(size), algorithm)
        rows.append({"bytes": size, **{k: getattr(est, k) for k in keys}, "confidence": confidence(est, shape)})
        size *= 2
    return rows
