"""The traffic stage: every shipped workload on each of its targets, plus failures and sharing, as tables."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..core import confidence
from ..core.facts import load_facts
from ..core.files import atomic_write_json
from ..core.graphs import Topologies
from ..core.paths import Layout
from ..core.registry import write_table
from . import CAVEAT, ha, loads, plots
from . import step as step_model
from .calculator import view_for
from .cost import Phase
from .phases import phases, routed_phases
from .summaries import revealing, sizing_summary
from .view import View
from .workloads import Workload, find_workload, load_workload, workload_paths

TRAFFIC_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("workload_id", "VARCHAR"),
    ("phase", "VARCHAR"),
    ("description", "VARCHAR"),
    ("collective", "VARCHAR"),
    ("algorithm", "VARCHAR"),
    ("group_size", "INTEGER"),
    ("concurrent_groups", "INTEGER"),
    ("count", "BIGINT"),
    ("bytes_per_rank", "DOUBLE"),
    ("bytes_on_wire_per_rank", "DOUBLE"),
    ("network", "VARCHAR"),
    ("tier", "VARCHAR"),
    ("hops", "INTEGER"),
    ("bottleneck_gbps", "DOUBLE"),
    ("effective_gbps", "DOUBLE"),
    ("latency_s", "DOUBLE"),
    ("bandwidth_s", "DOUBLE"),
    ("queueing_s", "DOUBLE"),
    ("seconds", "DOUBLE"),
    ("total_seconds", "DOUBLE"),
    ("dominant", "VARCHAR"),
    ("confidence", "VARCHAR"),
    # The records a phase rests on, as structured data (never a string to parse back).
    ("lineage", "STRUCT(reference_id VARCHAR, field VARCHAR, status VARCHAR, confidence VARCHAR)[]"),
    ("notes", "VARCHAR"),
]
# One row per physical link and phase (both directions of the link in one row).
LINK_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("workload_id", "VARCHAR"),
    ("phase", "VARCHAR"),
    ("source", "VARCHAR"),
    ("target", "VARCHAR"),
    ("network", "VARCHAR"),
    ("tier", "VARCHAR"),
    ("bytes_forward", "DOUBLE"),
    ("bytes_reverse", "DOUBLE"),
    ("capacity_gbps", "DOUBLE"),
    ("utilization", "DOUBLE"),
    ("flows", "INTEGER"),
]
LINK_KEYS = ("source", "target", "network", "tier", "bytes_forward", "bytes_reverse", "capacity_gbps")
WORKLOAD_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("workload_id", "VARCHAR"),
    ("accelerators", "INTEGER"),
    ("accelerators_per_progress", "INTEGER"),
    ("fits_in_one_domain", "BOOLEAN"),
    ("communication_seconds", "DOUBLE"),
    ("dominant_phase", "VARCHAR"),
    ("confidence", "VARCHAR"),
    ("sizing", "VARCHAR"),
    ("memory_per_rank_bytes", "DOUBLE"),
    ("accelerator_memory_bytes", "DOUBLE"),
    ("fits", "VARCHAR"),
    ("headroom_bytes", "DOUBLE"),
    ("compute_seconds", "DOUBLE"),
    ("exposed_communication_seconds", "DOUBLE"),
    ("exposed_communication_at_least_seconds", "DOUBLE"),
    ("step_seconds", "DOUBLE"),
    ("ttft_seconds", "DOUBLE"),
    ("tpot_seconds", "DOUBLE"),
    ("step_missing", "VARCHAR"),
    ("step_assumptions", "VARCHAR"),
    ("caveat", "VARCHAR"),
]
FAILURE_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("workload_id", "VARCHAR"),
    ("failure", "VARCHAR"),
    ("route_survives", "BOOLEAN"),
    ("bandwidth_before_gbps", "DOUBLE"),
    ("bandwidth_after_gbps", "DOUBLE"),
    ("explanation", "VARCHAR"),
    ("not_established", "VARCHAR"),
]
SHARING_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("workload_id", "VARCHAR"),
    ("other_workload", "VARCHAR"),
    ("phase", "VARCHAR"),
    ("network", "VARCHAR"),
    ("other_utilization", "DOUBLE"),
    ("added_queueing_s", "DOUBLE"),
    ("protected", "BOOLEAN"),
    ("explanation", "VARCHAR"),
]


@dataclass(kw_only=True)
class Result:
    topology_id: str
    workload: Workload
    phases: list[Phase]
    revealing: dict[str, Any]
    sizing: dict[str, Any]
    failures: list[dict[str, Any]]

    @property
    def communication_seconds(self) -> float:
        return sum(p.total_seconds for p in self.phases)

    @property
    def confidence(self) -> str:
        return confidence.weakest(p.confidence for p in self.phases)


def estimate(lay: Layout, topology_id: str, workload: Workload, offset: int = 0, view: View | None = None) -> Result:
    """Choosing a workload lays traffic onto the installed wiring; the wiring itself is not changed."""
    view = view or view_for(lay, topology_id)
    result_phases = phases(view, workload, offset)
    failures: list[dict[str, Any]] = []
    t = workload.training or {}
    if view.summary["nodes_by_kind"].get("leaf") and t.get("dp", 1) > 1:
        accs = view.accelerators[offset : offset + workload.accelerators]
        peers = [accs[t["tp"] * d] for d in range(t["dp"])]
        far = max(peers[1:], key=lambda b: view.tier(peers[0], b), default=None)
        if far is not None:
            failures = ha.scenarios(view, peers[0], far)
    return Result(
        topology_id=topology_id,
        workload=workload,
        phases=result_phases,
        revealing=revealing(view, workload),
        sizing=sizing_summary(workload),
        failures=failures,
    )


def step_estimate(
    lay: Layout, topology_id: str, workload: Workload, mfu: float, view: View | None = None
) -> dict[str, Any]:
    """Memory fit and step time of a workload on a topology, from its phases and the accelerator's fields."""
    view = view or view_for(lay, topology_id)
    r = estimate(lay, topology_id, workload, 0, view)
    acc = step_model.accelerator(load_facts(lay, view.reference))
    return step_model.estimate(workload, r.phases, acc, mfu)


def sharing(
    lay: Layout, topology_id: str, first: Workload, second: Workload, view: View | None = None
) -> tuple[Result, Result, list[tuple]]:
    """Two workloads side by side (the second placed after the first), routed on the same graph: the queueing
    each adds to the other's phases, on the links both use and nowhere else."""
    view = view or view_for(lay, topology_id)
    a = estimate(lay, topology_id, first, 0, view)
    b = estimate(lay, topology_id, second, first.accelerators, view)
    routed_a = routed_phases(view, first, 0)[1]
    routed_b = routed_phases(view, second, first.accelerators)[1]
    rows = []
    for me, mine, other, theirs in ((a, routed_a, b, routed_b), (b, routed_b, a, routed_a)):
        step = other.communication_seconds or 1.0
        busy = [(r.load, r.count) for r in theirs]
        by_phase = {r.phase: r for r in mine}
        for p in me.phases:
            r = by_phase.get(p.phase)
            if r is None:  # client traffic rides the separate frontend network
                rows.append(
                    (
                        topology_id,
                        me.workload.id,
                        other.workload.id,
                        p.phase,
                        p.network,
                        0.0,
                        0.0,
                        True,
                        "the frontend network is separate from the backend fabric: this phase is protected",
                    )
                )
                continue
            added, share = loads.added_queueing(view.fabric, r.stages, r.load, busy, step)
            protected = share == 0.0
            why = (
                f"no physical link shared with {other.workload.id}: this phase is protected"
                if protected
                else f"shares links with {other.workload.id}, which keeps the busiest shared one busy {share:.0%} "
                "of its step: queueing added on those links only (fluid share)"
            )
            rows.append(
                (
                    topology_id,
                    me.workload.id,
                    other.workload.id,
                    p.phase,
                    p.network,
                    share,
                    added * p.count,
                    protected,
                    why,
                )
            )
    return a, b, rows


def run(lay: Layout) -> dict[str, Any]:
    out = lay.registry_dir / "traffic"
    out.mkdir(parents=True, exist_ok=True)
    workloads = [load_workload(p) for p in workload_paths(lay)]
    traffic, links, summary, failures, shared = [], [], [], [], []
    metrics: dict[str, Any] = {"caveat": CAVEAT}
    views: dict[str, View] = {}
    accelerators: dict[str, step_model.Accelerator] = {}
    topologies = Topologies(lay)
    for w in workloads:
        for target in w.targets:
            if target not in views:
                views[target] = view_for(lay, target, topologies)
            view = views[target]
            r = estimate(lay, target, w, 0, view)
            for p in r.phases:
                traffic.append(
                    (
                        target,
                        w.id,
                        p.phase,
                        p.description,
                        p.collective,
                        p.algorithm,
                        p.group_size,
                        p.concurrent_groups,
                        p.count,
                        p.bytes_per_rank,
                        p.bytes_on_wire_per_rank,
                        p.network,
                        p.tier,
                        p.hops,
                        p.bottleneck_gbps,
                        p.effective_gbps,
                        p.latency_s,
                        p.bandwidth_s,
                        p.queueing_s,
                        p.seconds,
                        p.total_seconds,
                        p.dominant,
                        p.confidence,
                        p.lineage_records(),
                        p.notes,
                    )
                )
                for link in p.links:
                    links.append(
                        (target, w.id, p.phase, *(link[k] for k in LINK_KEYS), link["utilization"], link["flows"])
                    )
            top = max(r.phases, key=lambda p: p.total_seconds)
            if view.reference not in accelerators:
                accelerators[view.reference] = step_model.accelerator(load_facts(lay, view.reference))
            st = step_model.estimate(w, r.phases, accelerators[view.reference])
            fits = st["fits"] if st["fits"] == "unknown" else str(st["fits"]).lower()
            summary.append(
                (
                    target,
                    w.id,
                    w.accelerators,
                    r.revealing["accelerators_per_progress"],
                    r.revealing["fits_in_one_domain"],
                    r.communication_seconds,
                    top.phase,
                    r.confidence,
                    json.dumps(r.sizing, sort_keys=True),
                    st["memory_per_rank_bytes"],
                    st["memory"]["accelerator_memory_bytes"],
                    fits,
                    st["headroom_bytes"],
                    st["compute_seconds"],
                    st["exposed_communication_seconds"],
                    st.get("exposed_communication_at_least_seconds", st["exposed_communication_seconds"]),
                    st["step_seconds"],
                    st.get("ttft_seconds"),
                    st.get("tpot_seconds"),
                    json.dumps(st["missing"]),
                    json.dumps([*st["assumptions"], f"mfu {st['mfu']:g}: {st['mfu_source']}"]),
                    CAVEAT,
                )
            )
            for f in r.failures:
                failures.append(
                    (
                        target,
                        w.id,
                        f["failure"],
                        f["route_survives"],
                        f["bandwidth_before_gbps"],
                        f["bandwidth_after_gbps"],
                        f["explanation"],
                        f["not_established"],
                    )
                )
            metrics[f"{w.id}@{target}"] = {
                "communication_seconds": round(r.communication_seconds, 9),
                "dominant_phase": top.phase,
                "confidence": r.confidence,
                "fits_in_one_domain": r.revealing["fits_in_one_domain"],
                "fits_in_memory": fits,
            }
            if w.shares_with:
                other = find_workload(lay, w.shares_with)
                if target in other.targets:
                    shared += sharing(lay, target, w, other, view)[2]
    write_table(out, "traffic", TRAFFIC_COLUMNS, ["topology_id", "workload_id", "phase"], traffic)
    write_table(out, "traffic_links", LINK_COLUMNS, ["topology_id", "workload_id", "phase", "source", "target"], links)
    write_table(out, "traffic_workloads", WORKLOAD_COLUMNS, ["topology_id", "workload_id"], summary)
    write_table(out, "traffic_failures", FAILURE_COLUMNS, ["topology_id", "workload_id", "failure"], failures)
    write_table(
        out, "traffic_sharing", SHARING_COLUMNS, ["topology_id", "workload_id", "other_workload", "phase"], shared
    )
    atomic_write_json(out / "metrics.json", metrics)
    for target in ("nvidia-gb200-nvl72", "illustrative-h100-4096"):
        if target not in views:
            views[target] = view_for(lay, target, topologies)
    topologies.close()
    plots.write(out / "plots", traffic, links, views)
    return metrics
