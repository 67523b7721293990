"""The traffic stages: a workload on its targets, a sharing pair, the KV-transfer curve, and `run_all` (all of them,
then the combined tables) for `fabricref traffic`."""

from __future__ import annotations

import json
import math
from contextlib import AbstractContextManager, closing, nullcontext
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_bytes
from ..core.paths import Layout, workload_paths
from ..errors import FabricrefError
from ..estimate import CAVEAT
from ..estimate.traffic import Views, estimate, sharing
from ..estimate.workloads import Workload, find_workload
from . import plots, tables
from .tables import LINK_KEYS, WORKLOAD_TABLES, run_combine, traffic_dir, workload_dir, write_sharing, write_workload

KV_TARGETS = ("nvidia-gb200-nvl72", "illustrative-h100-4096")  # the two topologies the KV curve compares


def _number(value: Any) -> float | int | None:
    """A metric as DVC shows it: a finite number (9 significant digits), or None to leave it out."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    value = float(value)
    return float(f"{value:.9g}") if math.isfinite(value) else None


# What `dvc metrics show` prints, one file per workload and target (metrics/<workload>/<target>.json): short keys
# carrying their unit (s: seconds, gb: 1e9 bytes; util: a fraction of capacity) keep its table narrow; the full
# figures and the words are columns of traffic_workloads.
METRICS = {
    "step_s": "step_seconds",  # a training step; for inference, one request (TTFT + output × TPOT)
    "ttft_s": "ttft_seconds",
    "tpot_s": "tpot_seconds",
    "compute_s": "compute_seconds",
    "comm_s": "communication_seconds",
    "exposed_s": "exposed_communication_seconds",
    "free_gb": "headroom_bytes",  # accelerator memory left per rank (the fit headroom); negative: does not fit
}


def metric_numbers(st: dict[str, Any], max_link_utilization: float | None) -> dict[str, float | int]:
    """A workload's metrics on one target: numbers only, a figure the model cannot give left out."""
    raw: dict[str, Any] = {key: st.get(source) for key, source in METRICS.items()}
    raw["free_gb"] = None if raw["free_gb"] is None else raw["free_gb"] / 1e9
    raw["util"] = max_link_utilization  # the busiest link's offered load over its capacity, over the phases
    return {k: v for k, v in ((k, _number(v)) for k, v in sorted(raw.items())) if v is not None}


def workload_tables(w: Workload, views: Views) -> tuple[dict[str, list[tuple]], dict[str, dict[str, Any]]]:
    """One workload on each of its targets: its rows of WORKLOAD_TABLES, and its metrics by target."""
    out: dict[str, list[tuple]] = {name: [] for name in WORKLOAD_TABLES}
    metrics: dict[str, dict[str, Any]] = {}
    for target in w.targets:
        rows, metrics[target] = workload_on(w, target, views)
        for name in WORKLOAD_TABLES:
            out[name] += rows[name]
    return out, metrics


def workload_on(w: Workload, target: str, views: Views) -> tuple[dict[str, list[tuple]], dict[str, Any]]:
    """One workload on one target: its rows of WORKLOAD_TABLES and its metrics there."""
    out: dict[str, list[tuple]] = {name: [] for name in WORKLOAD_TABLES}
    view = views(target)
    r = estimate(views.lay, target, w, 0, view)
    for p in r.phases:
        # In tables.TRAFFIC_COLUMNS' order: the phase's attribute of each column's name, but for these.
        own = {"topology_id": target, "workload_id": w.id, "lineage": p.lineage_records()}
        own |= {term: p.term(term) for term in ("latency_s", "bandwidth_s", "queueing_s")}
        out["traffic"].append(tuple(own[c] if c in own else getattr(p, c) for c, _ in tables.TRAFFIC_COLUMNS))
        for link in p.links:
            out["traffic_links"].append(
                (target, w.id, p.phase, *(link[k] for k in LINK_KEYS), link["utilization"], link["flows"])
            )
    st = views.step(view, w, r)
    # In tables.WORKLOAD_COLUMNS' order: the step estimate's figure of each column's name, but for these.
    own = {
        "topology_id": target,
        "workload_id": w.id,
        "accelerators": w.accelerators,
        "accelerators_per_progress": r.revealing["accelerators_per_progress"],
        "fits_in_one_domain": r.revealing["fits_in_one_domain"],
        "communication_seconds": r.communication_seconds,
        "dominant_phase": max(r.phases, key=lambda p: -1.0 if p.total_seconds is None else p.total_seconds).phase,
        "confidence": r.confidence,
        "sizing": json.dumps(r.sizing, sort_keys=True),
        "accelerator_memory_bytes": st["memory"]["accelerator_memory_bytes"],
        "fits": st["fits"] if st["fits"] == "unknown" else str(st["fits"]).lower(),
        "exposed_communication_at_least_seconds": st.get(
            "exposed_communication_at_least_seconds", st["exposed_communication_seconds"]
        ),
        "ttft_seconds": st.get("ttft_seconds"),  # inference only
        "tpot_seconds": st.get("tpot_seconds"),
        "step_missing": json.dumps(st["missing"]),
        "step_assumptions": json.dumps([*st["assumptions"], *(f"calibration: {c}" for c in st["calibration"])]),
        "caveat": CAVEAT,
        "teaching": w.teaching,
    }
    out["traffic_workloads"].append(tuple(own[c] if c in own else st[c] for c, _ in tables.WORKLOAD_COLUMNS))
    for f in r.failures:
        out["traffic_failures"].append((target, w.id, *(f[c] for c, _ in tables.FAILURE_COLUMNS[2:])))
    utilizations = [p.max_link_utilization for p in r.phases if p.max_link_utilization is not None]
    return out, metric_numbers(st, max(utilizations) if utilizations else None)


def _views(lay: Layout, views: Views | None) -> AbstractContextManager[Views]:
    """The caller's views, or views of this call's own, closed when it ends."""
    return closing(Views(lay)) if views is None else nullcontext(views)


def workload_result(
    lay: Layout, workload_id: str, views: Views | None = None
) -> tuple[dict[str, list[tuple]], dict[str, dict[str, Any]]]:
    """`workload_tables` for a workload id, computed afresh and written nowhere."""
    with _views(lay, views) as own:
        return workload_tables(find_workload(lay, workload_id), own)


def run_workload(lay: Layout, workload_id: str, views: Views | None = None) -> str:
    """`python -m fabricref.traffic workload ID` (the DVC stage `traffic-workload@ID`): the workload's part."""
    rows, metrics = workload_result(lay, workload_id, views)
    write_workload(lay, workload_id, rows, metrics)
    return f"estimated {workload_id} on {len(metrics)} target(s) into {lay.relative(workload_dir(lay, workload_id))}/"


def run_sharing(lay: Layout, workload_id: str, views: Views | None = None) -> str:
    """`python -m fabricref.traffic sharing ID` (the DVC stage `traffic-sharing@ID`): the workload beside its
    `shares_with` on every target both name."""
    w = find_workload(lay, workload_id)
    if not w.shares_with:
        raise FabricrefError(f"{workload_id} shares its cluster with no workload (its file names no shares_with)")
    other = find_workload(lay, w.shares_with)
    with _views(lay, views) as own:
        rows = [row for t in w.targets if t in other.targets for row in sharing(lay, t, w, other, own(t))[2]]
    path = write_sharing(lay, workload_id, rows)
    return f"{workload_id} beside {w.shares_with}: {len(rows)} phase row(s) into {lay.relative(path)}"


def kv_path(lay: Layout) -> Path:
    return traffic_dir(lay) / "plots" / "kv_transfer.csv"


def run_kv(lay: Layout, views: Views | None = None) -> str:
    """The KV-transfer curve (part of `python -m fabricref.traffic curves`, the DVC stage `traffic-curves`)."""
    with _views(lay, views) as own:
        atomic_write_bytes(kv_path(lay), plots.kv_csv({t: own(t) for t in KV_TARGETS}))
    return f"KV-transfer curve into {lay.relative(kv_path(lay))}"


def run_all(lay: Layout) -> list[str]:
    """Every traffic stage in one process, in `dvc repro`'s order (`fabricref traffic`), each view built once."""
    from . import comparison  # the measured logs' part: not loaded by the per-workload stages

    workloads = [find_workload(lay, path.stem) for path in workload_paths(lay)]
    with closing(Views(lay)) as views:
        said = [run_workload(lay, w.id, views) for w in workloads]
        said += [run_sharing(lay, w.id, views) for w in workloads if w.shares_with]
        said.append(run_kv(lay, views))
    return [*said, comparison.run_stage(lay), run_combine(lay)]
