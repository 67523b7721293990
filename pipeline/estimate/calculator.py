"""A collective on an installed topology: the wiring gives ranks per domain, line rates, link technologies and
path hops; the calibration gives efficiencies and latencies; `algorithms` chooses and costs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import confidence as rule
from ..core.graphs import Topologies, load_topology
from ..core.paths import Layout
from ..errors import UsageError
from .algorithms import Cost, Fabric, Tier, estimate
from .calibration import Calibration, load_calibration
from .view import Lineage, View

if TYPE_CHECKING:
    from ..core.facts import Facts

GBPS_TO_BYTES = 1e9 / 8
# Switches a scale-out path crosses, by tier (same leaf; leaf-spine-leaf; leaf-spine-core-spine-leaf).
SWITCHES_BY_TIER = {1: 1, 2: 3, 3: 5}


@dataclass
class Placed:
    """A group of ranks placed on a topology, and the fabric the collective sees there."""

    fabric: Fabric
    accelerators: list[str]
    technologies: dict[str, str]
    lineage: set[Lineage]  # each topology figure used, with its status and confidence
    notes: list[str]
    collnet_basis: str | None = None  # the cluster's label for its declared InfiniBand SHARP


def collnet_lineage(cost: Cost, placed: Placed, topology_id: str) -> set[Lineage]:
    """The cluster's SHARP declaration, when the chosen algorithm rests on it: published with a source, assumed
    without (so an estimate that uses an assumed SHARP is only as firm as that assumption)."""
    if cost.algorithm != "collnet" or placed.collnet_basis is None:
        return set()
    status = "assumed" if placed.collnet_basis.startswith("assumed") else "published"
    return {Lineage(reference_id=topology_id, field="scale_out.in_network_reduction", status=status, confidence=status)}


def collnet_note(cost: Cost, placed: Placed) -> list[str]:
    if cost.algorithm != "collnet" or placed.collnet_basis is None:
        return []
    return [f"InfiniBand SHARP declared by the cluster ({placed.collnet_basis})"]


def view_for(
    lay: Layout,
    topology_id: str,
    topologies: Topologies | None = None,
    facts: Callable[[str], Facts] | None = None,
) -> View:
    """The installed wiring of a reference or cluster, as the traffic stage sees it: the topology stage's output
    (registry/topology/), read through `topologies` when the caller keeps them open (and the facts through
    `facts`, when it keeps those: pipeline/traffic/stage.py `Views`)."""

    topology = topologies.get(topology_id) if topologies is not None else load_topology(lay, topology_id)
    view = View(topology.graph, topology.endpoint_latency_ns, topology.summary)
    view.calibration = load_calibration(lay.root)
    view.scale_up_technology = _technology(lay, view.reference, facts)
    return view


def _technology(lay: Layout, reference: str, facts: Callable[[str], Facts] | None = None) -> str:
    from ..core.facts import load_facts

    return (facts or (lambda r: load_facts(lay, r)))(reference).text("scale_up.technology")


def place(
    view: View, cal: Calibration, ranks: int, accelerators: list[str] | None = None, technology: str | None = None
) -> Placed:
    """Ranks on the first accelerators in topology order (scale-up domains filled in order), or on the ones given."""
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
    if len(sizes) != 1:
        raise UsageError(
            f"{ranks} ranks fill scale-up domains unevenly ({sorted(len(m) for m in by_domain.values())}); "
            f"use a multiple of the domain size {view.domain_size} or fewer ranks than one domain"
        )
    local, domains = sizes.pop(), len(by_domain)
    lineage: set[Lineage] = set()
    notes: list[str] = []
    techs: dict[str, str] = {}
    up = out = None
    nvls = one_shot = False
    first = accs[0]
    if local > 1:
        path = view.scale_up(first)
        if path.per_rank_gbps is None:
            raise UsageError(
                f"the scale-up bandwidth of {view.reference} is unknown: no source or assumption states it"
            )
        tech = technology if technology is not None else view.g.graph.get("scale_up_technology", "")
        name, lc = cal.link_class("scale_up", tech)
        techs["scale_up"] = f"{tech or 'not stated'} -> {name}"
        # NCCL's NVLink step latency was measured GPU → switch → GPU: only hops beyond those two add.
        per_hop = (path.latency_s - view.endpoint_s) / path.hops if path.hops else 0.0
        up = Tier("scale_up", name, lc, path.per_rank_gbps * GBPS_TO_BYTES, max(0, path.hops - 2) * per_hop)
        lineage |= path.lineage
        switched = view.summary["nodes_by_kind"].get("scale_up_switch", 0) > 0
        peers = {m for m, d in view.g[first].items() if d["network"] == "scale_up" and view.kind[m] == "accelerator"}
        mesh = len(peers) >= len(by_domain[view.domain(first)]) - 1
        nvls = switched and lc.nvls is not None
        one_shot = lc.one_shot and (switched or mesh)
    if domains > 1:
        others = [m[0] for m in by_domain.values()]
        far = max(others[1:], key=lambda b: view.tier(first, b))
        tier = view.tier(first, far)
        path, factor = view.scale_out(first, far, tier)
        if path.per_rank_gbps is None:
            raise UsageError(
                f"the scale-out bandwidth of {view.reference} is unknown: no source or assumption states it"
            )
        proto = view.g.graph.get("scale_out_protocol", "")
        name, lc = cal.link_class("scale_out", proto)
        techs["scale_out"] = f"{proto or 'not stated'} -> {name}"
        edges = [d for nic in view.nics(first) for m, d in view.g[nic].items() if view.kind[m] == "leaf"]
        switch_ns = edges[0]["latency_ns"] if edges else 0
        extra = (SWITCHES_BY_TIER.get(tier, 1) - 1) * switch_ns * 1e-9
        out = Tier("scale_out", name, lc, path.per_rank_gbps * GBPS_TO_BYTES, extra, factor)
        lineage |= path.lineage
        if extra:
            notes.append(
                f"assumed: NCCL's network step latency covers one switch; the {SWITCHES_BY_TIER[tier] - 1} further "
                f"switch(es) of this path add {switch_ns:g} ns each (topology defaults)"
            )
        if factor != 1:
            notes.append(
                f"every rank crosses the oversubscribed tier at once: the fabric share per rank is 1/{factor:g} of "
                "its NIC (fluid share)"
            )
    # CollNet only where the cluster declares SHARP (models/clusters: scale_out.in_network_reduction).
    collnet = view.g.graph.get("scale_out_in_network_reduction") == "sharp"
    basis = view.g.graph.get("scale_out_in_network_reduction_basis") if collnet else None
    fabric = Fabric(ranks, local, domains, up, out, nvls=nvls, collnet=collnet, one_shot=one_shot)
    return Placed(fabric, list(accs), techs, lineage, notes, basis)


def confidence(cost: Cost, placed: Placed, topology_id: str = "") -> str:
    """The weakest of the calibration numbers used and of the topology figures (a derived one as its inputs)."""
    used = [rule.of_status(n.status) for _, n in cost.used]
    lineage = placed.lineage | collnet_lineage(cost, placed, topology_id)
    return rule.weakest([*used, *(x.confidence for x in lineage)])


def topology_estimate(
    lay: Layout, view: View, op: str, ranks: int, size: float, algorithm: str | None = None
) -> dict[str, Any]:
    """One collective on the topology: the chosen algorithm and protocol, time, algbw and busbw, and why."""
    cal = view.calibration or load_calibration(lay.root)
    tech = view.scale_up_technology if view.scale_up_technology is not None else _technology(lay, view.reference)
    placed = place(view, cal, ranks, technology=tech)
    cost = estimate(cal, op, placed.fabric, size, algorithm)
    return result_dict(cost, placed, view)


def result_dict(cost: Cost, placed: Placed, view: View) -> dict[str, Any]:
    d = cost.as_dict()
    f = placed.fabric
    tid = view.g.graph["topology_id"]
    d.update(
        {
            "topology_id": tid,
            "ranks_per_domain": f.local,
            "domains": f.domains,
            "link_classes": placed.technologies,
            "confidence": confidence(cost, placed, tid),
            "topology_lineage": [
                {"reference_id": x.reference_id, "field": x.field, "status": x.status, "confidence": x.confidence}
                for x in sorted(placed.lineage | collnet_lineage(cost, placed, tid))
            ],
            "assumptions": [*d["assumptions"], *placed.notes, *collnet_note(cost, placed)],
        }
    )
    return d


def sweep(
    lay: Layout, view: View, op: str, ranks: int, low: int, high: int, algorithm: str | None = None
) -> list[dict[str, Any]]:
    """One row per power-of-two size from low to high, like `all_reduce_perf -b low -e high -f 2`."""
    if low < 1 or high < low:
        raise UsageError(f"--sweep {low}:{high}: expected 1 <= MIN <= MAX")
    cal = load_calibration(lay.root)
    placed = place(view, cal, ranks, technology=_technology(lay, view.reference))
    rows = []
    size = low
    while size <= high:
        cost = estimate(cal, op, placed.fabric, float(size), algorithm)
        rows.append(
            {
                "bytes": size,
                "seconds": cost.seconds,
                "algbw_gb_per_s": cost.algbw_gb_per_s,
                "busbw_gb_per_s": cost.busbw_gb_per_s,
                "algorithm": cost.algorithm,
                "protocol": cost.protocol,
                "confidence": confidence(cost, placed, view.g.graph["topology_id"]),
            }
        )
        size *= 2
    return rows
