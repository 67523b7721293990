"""`plan train`: a training job's layouts searched on one cluster, from ids and knobs to a finished `PlanResult`.

The one entry for the CLI, the API (the explorer) and the benchmarks; it writes nothing (`store.py` does, when
asked)."""

from __future__ import annotations

import json
import time
from typing import Any

from ..core.paths import Layout as Checkout
from ..errors import UsageError
from ..estimate.traffic import Views
from . import cluster as cluster_mod
from . import space
from .engines import LocalEngine
from .evaluate import ROUTED, TrainEvaluator
from .route import hot_links, route
from .search import PlanResult, Progress, plan_id, search_training


def prepare(
    views: Views, cluster_id: str, dtype: str, memory_headroom: float | None = None
) -> cluster_mod.ClusterSummary:
    """The cluster summary of `cluster_id`: its accelerator's calibrated rates for `dtype` and params.yaml's
    `step.memory_headroom` (replaced by `memory_headroom` when given)."""
    from ..core.paths import check_slug
    from ..errors import ValidationError
    from ..estimate.step import missing_inputs, rates_for

    try:
        check_slug(cluster_id, "cluster id")
    except ValidationError as exc:
        raise UsageError(f"--cluster: {exc}") from None
    view = views(cluster_id)
    choices = views.choices
    headroom = choices.memory_headroom if memory_headroom is None else memory_headroom
    if not 0 <= headroom < 1:
        raise UsageError(f"--memory-headroom {headroom}: expected a fraction of accelerator memory in [0, 1)")
    acc = views.accelerator(view.reference)
    rates = rates_for(acc, dtype, views.lay.root)
    lacking = missing_inputs(acc, rates)
    if lacking:
        what = f"{acc.model} ({view.reference})" if acc.model else view.reference
        raise UsageError(
            f"{cluster_id}: the step model cannot time a {dtype} model on its accelerator, {what}; it lacks:\n"
            + "\n".join(f"  {line}" for line in lacking)
        )
    return cluster_mod.summary(view, acc, rates, headroom)


def plan_training(
    lay: Checkout,
    model: str,
    cluster: str,
    *,
    engine: Any = None,
    progress: Progress | None = None,
    memory_headroom: float | None = None,
    prune: bool = True,
    route_top: int | None = None,
    views: Views | None = None,
    **options: Any,
) -> PlanResult:
    """Search every legal layout of `model` (a workload id or a model definition file) on `cluster`; `options`
    are `space.train_request`'s (gpus, global_batch, seq, objective, top, max_layouts, tp, pp, cp, ep, zero,
    recompute, schedule, micro_batch). The top K (`route_top`, default the `top` option) are routed per link."""
    t0 = time.perf_counter()
    own = views is None
    views = views or Views(lay)
    try:
        spec = space.load_model_spec(lay, model)
        summary = prepare(views, cluster, spec.shape.dtype, memory_headroom)
        req = space.train_request(spec, summary.id, summary.accelerators, **options)
        shape = space.Cluster(summary.id, summary.reference, summary.accelerators, summary.domain_size)
        layouts, rejected = space.training_layouts(req, shape)
        ev = TrainEvaluator(spec, req.seq, req.global_batch, summary)
        layouts = place(views(cluster), ev, layouts, rejected)
        t1 = time.perf_counter()
        rows, counts = search_training(
            req, ev, layouts, rejected, engine or LocalEngine(), prune=prune, progress=progress
        )
        t2 = time.perf_counter()
        by_id = {x.id: x for x in layouts}
        ranked = sorted((r for r in rows if r["rank"] is not None), key=lambda r: r["rank"])
        k = req.top if route_top is None else route_top
        notes: dict[str, list[str]] = {}
        for r in ranked[:k]:
            e, note = route(views(cluster), ev, by_id[r["layout_id"]])
            if e.costing == ROUTED:
                r["costing"] = ROUTED
                r["routed_step_seconds"] = e.step_seconds
                r["routed_exposed_communication_seconds"] = e.exposed_communication_seconds
                r["hot_links"] = json.dumps(hot_links(e), sort_keys=True)
            if note:
                notes.setdefault(note, []).append(r["layout_id"])
        t3 = time.perf_counter()
        for r in rows:
            r.setdefault("routed_step_seconds", None)
            r.setdefault("routed_exposed_communication_seconds", None)
            r.setdefault("hot_links", None)
        request = {
            "model": spec.id,
            "model_source": spec.source,
            "cluster": summary.id,
            "gpus": list(req.gpus),
            "global_batch": req.global_batch,
            "seq": req.seq,
            "objective": req.objective,
            "top": req.top,
            "memory_headroom": summary.memory_headroom,
            **{
                name: list(getattr(req, name)) if getattr(req, name) is not None else None
                for name in ("tp", "pp", "cp", "ep", "zero", "recompute", "schedule", "micro_batch")
            },
        }
        pid = plan_id("train", request)
        for r in rows:
            r["plan_id"] = pid
        return PlanResult(
            kind="train",
            plan_id=pid,
            request=request,
            rows=rows,
            top=ranked[: req.top],
            pareto=sorted((r for r in rows if r["pareto"]), key=lambda r: r["step_seconds"]),
            rejections=rejected.lines(),
            counts=counts,
            notes=[f"{note} ({', '.join(ids)})" for note, ids in notes.items()] + _labels(summary),
            seconds=time.perf_counter() - t0,
            timings={"setup": t1 - t0, "search": t2 - t1, "route": t3 - t2},
            spec=spec,
        )
    finally:
        if own:
            views.close()


def place(view: Any, ev: TrainEvaluator, layouts: list[space.Layout], rejected: space.Rejections) -> list[space.Layout]:
    """Place every distinct group the layouts use, once (one per degree combination, whatever the batch,
    recompute or schedule); the layouts with a group the collective model cannot cost are rejected with why."""
    needs: dict[tuple[int, ...], set[cluster_mod.GroupKey]] = {}
    groups: set[cluster_mod.GroupKey] = set()
    sends: set[cluster_mod.GroupKey] = set()
    for x in layouts:
        key = (x.gpus, x.tp, x.pp, x.dp, x.cp, x.ep)
        if key in needs:
            continue
        g, s = ev.group_keys(x)
        needs[key] = g | s
        groups |= g
        sends |= s
    refused = cluster_mod.place_shapes(view, ev.cluster, groups, sends)
    if not refused:
        return layouts
    bad = {key: next(refused[k] for k in sorted(ks) if k in refused) for key, ks in needs.items() if ks & set(refused)}
    kept = []
    for x in layouts:
        why = bad.get((x.gpus, x.tp, x.pp, x.dp, x.cp, x.ep))
        if why is None:
            kept.append(x)
        else:
            rejected.add(f"TP {x.tp} × PP {x.pp} × DP {x.dp} × CP {x.cp}: {why}")
    return kept


def _labels(summary: cluster_mod.ClusterSummary) -> list[str]:
    """The notes every plan carries: the calibration numbers compute rests on, the memory headroom, the costing."""
    return [
        "compute at the calibrated throughput (models/calibration/throughput.yaml): "
        + "; ".join(summary.rates.label()),
        f"memory: the fit keeps {summary.memory_headroom * 100:g} % of accelerator memory free (params.yaml "
        "step.memory_headroom, or --memory-headroom)",
        "costing: every row on the analytical per-tier collective costs (calibrated algorithms on each group's "
        "placed shape); the top K also routed per physical link over the installed wiring",
    ]


def save_training(lay: Checkout, result: PlanResult, workload_id: str) -> tuple[dict[str, Any], list[Any]]:
    """Save the best-ranked layout the workload format and the traffic stage accept (today: CP 1) as workload
    `workload_id`; returns its row and the files written."""
    from ..estimate.decompose import check_degrees
    from ..formats.workload import Training
    from .store import save_workload

    spec: space.ModelSpec = result.spec
    skipped: list[str] = []
    for r in sorted((r for r in result.rows if r["rank"] is not None), key=lambda r: r["rank"]):
        knobs = {"tp": r["tp"], "pp": r["pp"], "dp": r["dp"]}
        if r["ep"] > 1:
            knobs["ep"] = r["ep"]
        knobs |= {"micro_batch": r["micro_batch"], "microbatches": r["microbatches"], "seq_len": r["seq_len"]}
        why = ""
        if r["cp"] > 1:
            why = "context parallelism is not in the workload format"
        else:
            try:
                check_degrees(spec.shape, Training.model_construct(**knobs), f"layout {r['layout_id']}")
            except UsageError as exc:
                why = f"the traffic stage refuses it ({exc})"
        if why:
            skipped.append(f"rank {r['rank']} ({r['layout_id']}): {why}")
            continue
        training: dict[str, Any] = {"grad_dtype": spec.grad_dtype, "optimizer_layout": spec.optimizer_layout}
        if r["zero"] == 3:
            training["sharded"] = True
        training |= {"zero": r["zero"], "sequence_parallel": r["tp"] > 1, "recompute": r["recompute"]}
        if r["schedule"] != "1f1b":
            training |= {"schedule": r["schedule"], "virtual_stages": r["virtual_stages"]}
        data = {
            "id": workload_id,
            "title": f"{spec.id} as planned on {result.request['cluster']}: rank {r['rank']} by "
            f"{result.request['objective']} ({r['gpus']:,} GPUs)",
            "kind": "training",
            "summary": f"Saved by `fabricref plan train` (plan {result.plan_id}): {space.Layout.of_row(r).describe()}. "
            + (f"Higher-ranked layouts not saved: {'; '.join(skipped)}." if skipped else ""),
            "model": spec.shape.model_dump(exclude_none=True),
            "training": training,
            "targets": [result.request["cluster"]],
        }
        return r, save_workload(lay, workload_id, "training", data, knobs)
    raise UsageError(f"--save {workload_id}: no ranked layout can be saved as a workload: " + "; ".join(skipped[:5]))
