"""The traffic stage: every shipped workload on each of its targets, plus failures and sharing, as tables."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.paths import Layout
from ..errors import FabricrefError, UsageError
from ..estimate import CAVEAT
from ..estimate import step as step_model
from ..estimate.calibration import load_calibration
from ..estimate.traffic import Views, estimate, sharing
from ..estimate.workloads import Workload, find_workload
from . import payload, plots
from .batch import KV_TARGETS
from .parts import (  # noqa: F401  (re-exported: callers know them as stage.*)
    FAILURE_COLUMNS,
    LINK_COLUMNS,
    LINK_KEYS,
    SHARING_COLUMNS,
    TABLES,
    TRAFFIC_COLUMNS,
    WORKLOAD_COLUMNS,
    WORKLOAD_TABLES,
    traffic_dir,
)

if TYPE_CHECKING:
    from .batch import Item


def _number(value: Any) -> float | int | None:
    """A metric as DVC shows it: a finite number (9 significant digits), or None to leave it out."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    value = float(value)
    return float(f"{value:.9g}") if math.isfinite(value) else None


# The metrics DVC shows (`dvc metrics show` prints one row per file, one column per key): one small file per
# workload and target, metrics/<workload>/<target>.json, with short keys that carry their unit (s: seconds, gb:
# 1e9 bytes; util: a fraction of capacity), so the table stays narrow (the memory per rank is a column of
# traffic_workloads; free_gb carries the fit). The full-precision figures and the words are
# columns of traffic_workloads.
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
    """A workload's metrics on one target from its step estimate: numbers only, a figure the model cannot give
    left out (never a word)."""
    raw: dict[str, Any] = {key: st.get(source) for key, source in METRICS.items()}
    raw["free_gb"] = None if raw["free_gb"] is None else raw["free_gb"] / 1e9
    raw["util"] = max_link_utilization  # the busiest link's offered load over its capacity, over the phases
    return {k: v for k, v in ((k, _number(v)) for k, v in sorted(raw.items())) if v is not None}


def metrics_dir(lay: Layout, workload_id: str) -> Path:
    return lay.root / "metrics" / workload_id


def workload_tables(w: Workload, views: Views) -> tuple[dict[str, list[tuple]], dict[str, dict[str, Any]]]:
    """One workload on each of its targets: its rows of WORKLOAD_TABLES, and its metrics (numbers only, keyed by
    target; the words — dominant phase, confidence, caveat — are columns of traffic_workloads)."""
    out: dict[str, list[tuple]] = {name: [] for name in WORKLOAD_TABLES}
    metrics: dict[str, dict[str, Any]] = {}
    for target in w.targets:
        rows, metrics[target] = workload_on(w, target, views)
        for name in WORKLOAD_TABLES:
            out[name] += rows[name]
    return out, metrics


def workload_on(w: Workload, target: str, views: Views) -> tuple[dict[str, list[tuple]], dict[str, Any]]:
    """One workload on one of its targets (the stage's item): its rows of WORKLOAD_TABLES and its metrics there.
    Nothing in it reads another target."""
    out: dict[str, list[tuple]] = {name: [] for name in WORKLOAD_TABLES}
    view = views(target)
    r = estimate(views.lay, target, w, 0, view)
    for p in r.phases:
        out["traffic"].append(
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
                p.term("latency_s"),
                p.term("bandwidth_s"),
                p.term("queueing_s"),
                p.seconds,
                p.total_seconds,
                p.dominant,
                p.confidence,
                p.lineage_records(),
                p.notes,
            )
        )
        for link in p.links:
            out["traffic_links"].append(
                (target, w.id, p.phase, *(link[k] for k in LINK_KEYS), link["utilization"], link["flows"])
            )
    top = max(r.phases, key=lambda p: -1.0 if p.total_seconds is None else p.total_seconds)
    choices = views.choices
    acc = views.accelerator(view.reference)
    rates = step_model.rates_for(acc, w.model.dtype, views.lay.root)
    st = step_model.estimate(w, r.phases, acc, rates, choices.memory_headroom)
    fits = st["fits"] if st["fits"] == "unknown" else str(st["fits"]).lower()
    exposed_at_least = st.get("exposed_communication_at_least_seconds", st["exposed_communication_seconds"])
    out["traffic_workloads"].append(
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
            exposed_at_least,
            st["step_seconds"],
            st.get("ttft_seconds"),
            st.get("tpot_seconds"),
            json.dumps(st["missing"]),
            json.dumps([*st["assumptions"], *(f"calibration: {c}" for c in st["calibration"])]),
            CAVEAT,
        )
    )
    for f in r.failures:
        out["traffic_failures"].append(
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
    utilizations = [p.max_link_utilization for p in r.phases if p.max_link_utilization is not None]
    return out, metric_numbers(st, max(utilizations) if utilizations else None)


def workload_result(
    lay: Layout, workload_id: str, views: Views | None = None
) -> tuple[dict[str, list[tuple]], dict[str, dict[str, Any]]]:
    """One workload on its targets, computed afresh and written nowhere: its rows of WORKLOAD_TABLES and its
    metrics per target (what the stage stores for it)."""
    own = views or Views(lay)
    try:
        return workload_tables(find_workload(lay, workload_id), own)
    finally:
        if views is None:
            own.close()


def sharing_rows(
    lay: Layout, w: Workload, other: Workload, views: Views | None = None, targets: tuple[str, ...] | None = None
) -> list[tuple]:
    """Workload `w` and `other` (its `shares_with`) side by side on every target both name (or on `targets`
    only): rows of traffic_sharing."""
    own = views or Views(lay)
    rows: list[tuple] = []
    try:
        for target in w.targets:
            if target in other.targets and (targets is None or target in targets):
                rows += sharing(lay, target, w, other, own(target))[2]
    finally:
        if views is None:
            own.close()
    return rows


# -- computing the traffic stage's items (pipeline/traffic/batch.py decides which, and writes the outputs) --


def compute(item: Item, lay: Layout, workloads: dict[str, Workload], views: Views) -> bytes:
    """An item's result as stored: its tables column by column and its metrics (pipeline/traffic/payload.py:
    every value exactly as computed), or the KV curve's CSV bytes."""
    if item.kind == "workload":
        (target,) = item.targets
        tables, metrics = workload_on(workloads[item.id], target, views)
        return payload.encode({n: (TABLES[n][0], tables[n]) for n in WORKLOAD_TABLES}, {"metrics": {target: metrics}})
    if item.kind == "sharing":
        w = workloads[item.id]
        rows = sharing_rows(lay, w, workloads[str(w.shares_with)], views, item.targets)
        return payload.encode({"traffic_sharing": (SHARING_COLUMNS, rows)}, {})
    return plots.kv_csv({t: views(t) for t in KV_TARGETS})


# What a topology's view and an item on it cost, roughly, in CPU seconds (measured on the shipped clusters: the
# 24,576-GPU cluster's view ~0.65 s, an 8-GPU server's ~0.04 s; an item ~0.05-0.4 s). Only the order in which the
# workers take the groups depends on it, never a result.
VIEW_SECONDS = (0.04, 7e-6)  # a constant, and per node
ITEM_SECONDS = 0.1


def groups(lay: Layout, todo: list[Item]) -> list[list[int]]:
    """The items of `todo` (indices) grouped by the topology whose view they need most (the largest they read),
    the costliest group first: each group is computed by one worker, which builds that view once (a view is
    built only in a worker that needs it, never in the parent), and the workers take the next group as they
    finish (largest first: they finish close together)."""
    nodes = _node_counts(lay, sorted({t for item in todo for t in item.targets}))
    by_home: dict[str, list[int]] = {}
    for i, item in enumerate(todo):
        home = max(item.targets, key=lambda t: (nodes.get(t, 0), t), default="")
        by_home.setdefault(home, []).append(i)

    def seconds(home: str) -> float:
        view = VIEW_SECONDS[0] + VIEW_SECONDS[1] * nodes.get(home, 0) if home else 0.0
        return view + ITEM_SECONDS * len(by_home[home])

    return [by_home[home] for home in sorted(by_home, key=lambda h: (-seconds(h), h))]


def _node_counts(lay: Layout, topology_ids: list[str]) -> dict[str, int]:
    """Nodes per topology, from the topology stage's summaries (a topology not there counts 0: the worker that
    builds its view says what is wrong)."""
    from ..core.registry import Tables

    path = lay.registry_dir / "topology" / "topology_summaries.parquet"
    if not topology_ids or not path.is_file():
        return {}
    with Tables({"topology_summaries": path}) as tables:
        rows = tables.rows(
            "SELECT topology_id, summary FROM topology_summaries WHERE list_contains(?, topology_id)", topology_ids
        )
    return {r["topology_id"]: sum(json.loads(r["summary"]).get("nodes_by_kind", {}).values()) for r in rows}


# Set in the parent before the worker processes fork: they inherit it instead of pickling it. Each worker builds
# the views of the groups it takes, once, in its own copy of the `Views` (which holds no view and no connection
# when it forks).
_SHARED: tuple[Layout, dict[str, Workload], list[Item], list[list[int]], Views] | None = None


def _compute_group(index: int) -> list[tuple[bool, Any]]:
    """In a worker: per item of the group, (True, the result) or (False, (message, exit code)) of a failure the
    user can act on, passed back as plain data (an error class with its own constructor arguments may not
    survive pickling)."""
    assert _SHARED is not None
    lay, workloads, todo, grouped, views = _SHARED
    out: list[tuple[bool, Any]] = []
    for i in grouped[index]:
        try:
            out.append((True, compute(todo[i], lay, workloads, views)))
        except FabricrefError as exc:
            out.append((False, (str(exc), exc.exit_code)))
    return out


def compute_all(lay: Layout, workloads: dict[str, Workload], todo: list[Item], jobs: int) -> list[bytes]:
    """The results of `todo`, in its order. With more than one job, the items are grouped by topology (`groups`)
    and worker processes forked from this one take the groups: no import repeated, each view built once, by the
    worker that needs it. A worker that dies (killed, out of memory) fails the run (BrokenProcessPool), it does
    not hang it."""
    global _SHARED
    grouped = groups(lay, todo) if jobs > 1 else []  # opens and closes its DuckDB connection: none may cross the fork
    if len(grouped) <= 1:  # one job, or one group: in this process (a worker would only add its fork)
        views = Views(lay)
        try:
            return [compute(item, lay, workloads, views) for item in todo]
        finally:
            views.close()
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # What every worker reads the same, read once here (each worker would parse it on its own critical path): the
    # calibration (cached by file and mtime in this process, inherited by the fork) and params.yaml's `step`.
    views = Views(lay)
    load_calibration(lay.root)
    if any(item.kind == "workload" for item in todo):
        views.choices  # noqa: B018
    _SHARED = (lay, workloads, todo, grouped, views)
    try:
        with ProcessPoolExecutor(min(jobs, len(grouped)), mp_context=multiprocessing.get_context("fork")) as pool:
            done: dict[int, tuple[bool, Any]] = {}
            for group, results in zip(grouped, pool.map(_compute_group, range(len(grouped))), strict=True):
                done.update(zip(group, results, strict=True))
    finally:
        _SHARED = None
    for ok, value in (done[i] for i in range(len(todo))):  # the first failure in item order
        if not ok:
            message, code = value
            raise (UsageError if code == UsageError.exit_code else FabricrefError)(message)
    return [done[i][1] for i in range(len(todo))]
