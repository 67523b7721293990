"""The training search: enumerate, bound, prune, evaluate, rank; the Pareto front; the top K routed per link.

Order of work, and why:

1. `space.training_layouts`: every legal layout (and why named values are not legal).
2. A bound for every layout (memory and fit exactly, and the step time with no communication). Layouts that do not
   fit are done: their row says what they need and what the accelerator has.
3. The fitting layouts, best lower bound first, are evaluated in waves of `WAVE` layouts. Before a wave, a layout
   is pruned when it can neither reach the top K (K evaluated layouts already beat its lower bound) nor the Pareto
   front of step time vs memory headroom (an evaluated layout is faster than its lower bound with at least as much
   headroom): the top K and the front are those of the search without pruning. The decision uses only what
   earlier waves found, and waves have a fixed size whatever the engine, so in-process and Ray searches prune the
   same layouts and return the same table.
4. Rank by the objective; mark the Pareto front; route the top K over the installed wiring (`route.py`).
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UsageError
from . import space
from .evaluate import (
    Bound,
    Columns,
    Evaluation,
    TrainEvaluator,
    columns,
    gpu_hours_per_million_tokens,
    objective_value,
    phase_key,
    records,
    values,
)
from .layout import ROW_COLUMNS
from .space import Layout

WAVE = 4096
# Layouts per engine task: at most BATCH (~0.1-1 s of work), and no fewer than MIN_BATCH when a wave is split
# over the workers (a bound or an evaluation takes 0.1-1 ms), so a Ray task's few milliseconds of scheduling
# stay under 10 %. A wave is split in up to SPLIT batches per worker, so the last batch to finish leaves the
# other workers idle for a fraction of their share.
BATCH = 1024
MIN_BATCH = 128
SPLIT = 4
GB = 1e9

# (what is being done: "bounding" or "evaluating", layouts done, layouts in all, the best so far)
Progress = Callable[[str, int, int, str], None]


@dataclass
class PlanResult:
    """A finished search: one row per legal layout, the ranked top, the Pareto front, and why nothing else."""

    kind: str
    plan_id: str
    request: dict[str, Any]
    rows: list[dict[str, Any]]
    top: list[dict[str, Any]]
    pareto: list[dict[str, Any]]
    rejections: list[str]
    counts: dict[str, int]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)  # setup, search, route (seconds)
    spec: Any = None  # the space.ModelSpec searched (for --save), not part of the table


def plan_id(kind: str, request: dict[str, Any]) -> str:
    """The same request gets the same id (its rows replace the earlier ones under plans/)."""
    text = repr(sorted((k, repr(v)) for k, v in request.items()))
    return f"{kind}-{request.get('model')}-{request.get('cluster')}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


@dataclass(frozen=True, eq=False)
class Job:
    """What the tasks of one search read: the evaluator and the layouts, which a task names by index. (The Ray
    engine sends the evaluator once, and each batch's layouts with the batch.)"""

    ev: TrainEvaluator
    layouts: list[Layout]


def batches(indices: Any, workers: int = 1) -> list[np.ndarray]:
    """`indices` (of `Job.layouts`) in equal batches of at most BATCH; SPLIT per worker when each still gets
    MIN_BATCH, and one per worker at least (a late wave's few hundred layouts would otherwise keep one busy)."""
    todo = np.asarray(indices, dtype=np.int64)
    n = len(todo)
    if not n:
        return []
    count = max(-(-n // BATCH), min(SPLIT * workers, max(n // MIN_BATCH, workers), n))
    return np.array_split(todo, count)


class _Front:
    """Evaluated layouts: the K best objective values and the Pareto front of (step ↓, headroom ↑)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.best: list[float] = []  # max-heap (negated) of the K smallest objective values
        self.steps: list[float] = []  # the front, by step ascending; headroom increases along it
        self.heads: list[float] = []
        self.ids: list[str] = []

    def kth(self) -> float | None:
        return -self.best[0] if len(self.best) >= self.k else None

    def add(self, points: list[tuple[float, float, float, str]]) -> None:
        for obj, _, _, _ in points:
            if len(self.best) < self.k:
                heapq.heappush(self.best, -obj)
            elif obj < -self.best[0]:
                heapq.heapreplace(self.best, -obj)
        merged = sorted(
            [(s, -h, i) for s, h, i in zip(self.steps, self.heads, self.ids, strict=True)]
            + [(s, -h, i) for _, s, h, i in points]
        )
        self.steps, self.heads, self.ids = [], [], []
        top = -float("inf")
        for s, neg_h, i in merged:
            if -neg_h > top:
                self.steps.append(s)
                self.heads.append(-neg_h)
                self.ids.append(i)
                top = -neg_h

    def dominator(self, lower_bound: float, headroom: float) -> str | None:
        """An evaluated layout faster than `lower_bound` with at least `headroom`, if any (strictly better in
        step time: a layout it dominates can never be on the front, even on a tie)."""
        at = bisect.bisect_left(self.steps, lower_bound) - 1
        if at >= 0 and self.heads[at] >= headroom:
            return self.ids[at]
        return None


def _bound_task(job: Job, batch: np.ndarray) -> Columns:
    ev, layouts = job.ev, job.layouts
    return columns([ev.bound(layouts[i]) for i in batch.tolist()], Bound)


def _evaluate_task(job: Job, batch: np.ndarray) -> Columns:
    ev, layouts = job.ev, job.layouts
    return columns([ev.evaluate(layouts[i]) for i in batch.tolist()], Evaluation)


TASKS: dict[str, Callable[[Job, np.ndarray], Columns]] = {
    "bound": _bound_task,
    "evaluate": _evaluate_task,
}


def search_training(
    req: space.TrainRequest,
    ev: TrainEvaluator,
    layouts: list[Layout],
    rejected: space.Rejections,
    engine: Any,
    *,
    prune: bool = True,
    progress: Progress | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Rows for every layout (bound, then evaluated or pruned), in the order of `layouts`; and the counts.

    An engine starts a map's batches when it is called and yields their results in order, so the driver's own work
    (the next wave's pruning) runs while the workers evaluate; what is pruned depends on the waves' results alone,
    never on when they arrive. The results stay columns (one list per field) until the rows are made, once."""
    n = len(layouts)
    if not n:
        raise NoLegalLayout(req, rejected, [])
    job = Job(ev, layouts)
    objective, tokens = req.objective, ev.tokens
    parts: list[Columns] = []
    running = engine.map("bound", job, batches(range(n), engine.workers))
    ids = [x.id for x in layouts]  # while the workers bound: what the table takes from the layouts alone
    table = _layout_columns(req, layouts, ids)
    for part in running:
        parts.append(part)
        if progress:
            progress("bounding", sum(len(p["fits"]) for p in parts), n, "")
    bound = values(parts, Bound)
    lower_bound, heads, fits = bound["step_lower_bound_seconds"], bound["headroom_bytes"], bound["fits"]
    fitting = [i for i in range(n) if fits[i] is not False and lower_bound[i] is not None]
    if not fitting:
        raise NoLegalLayout(req, rejected, list(zip(layouts, records(parts, Bound), strict=True)))
    lb_objective = [float("inf")] * n
    for i in fitting:
        value = objective_value(objective, lower_bound[i], layouts[i].gpus, tokens)
        lb_objective[i] = value if value is not None else float("inf")

    # Each row's id is the ties' last key in every order below.
    fitting.sort(key=lambda i: (lb_objective[i], -(heads[i] or 0.0), ids[i]))
    front = _Front(req.top)
    pruned_by: dict[int, str] = {}

    def submit(wave: list[int]) -> tuple[list[int], Iterator[Columns]]:
        """The wave's layouts not pruned by the front so far, and their evaluations (started)."""
        todo = []
        kth = front.kth()
        for i in wave:
            if prune and kth is not None and kth < lb_objective[i]:
                by = front.dominator(lower_bound[i], heads[i] or 0.0)  # type: ignore[arg-type]
                if by is not None:
                    pruned_by[i] = by
                    continue
            todo.append(i)
        # Layouts sharing their communication go in one batch: a worker costs their phases once (each worker
        # process keeps its own cache). The order of a wave's evaluations changes nothing in the results.
        todo.sort(key=lambda i: (phase_key(layouts[i]), i))
        return todo, engine.map("evaluate", job, batches(todo, engine.workers))

    counts = {"legal": n, "not_fitting": n - len(fitting), "pruned": 0, "evaluated": 0}
    done = counts["not_fitting"]
    best = ""
    if progress:
        progress("evaluating", done, n, best)
    best_point: tuple[float, float, float, str] | None = None
    waves = [fitting[start : start + WAVE] for start in range(0, len(fitting), WAVE)]
    evaluated: list[int] = []
    evaluations: list[Columns] = []
    todo, running = submit(waves[0])
    for w, wave in enumerate(waves):
        results = list(running)
        e = values(results, Evaluation)
        points = []
        for k, i in enumerate(todo):
            obj = objective_value(objective, e["step_seconds"][k], layouts[i].gpus, tokens)
            if obj is not None and e["fits"][k] is not False:
                points.append((obj, e["step_seconds"][k], e["headroom_bytes"][k] or 0.0, ids[i]))
        front.add(points)
        evaluated += todo
        evaluations += results
        counts["evaluated"] += len(todo)
        counts["pruned"] += len(wave) - len(todo)
        if w + 1 < len(waves):
            todo, running = submit(waves[w + 1])
        done += len(wave)
        # The best so far as the ranking orders ties (more headroom, then the id).
        wave_best = min(points, key=_order) if points else None
        if wave_best and (best_point is None or _order(wave_best) < _order(best_point)):
            best_point = wave_best
            best = f"{best_point[3]} ({best_point[1]:.3f} s)"
        if progress:
            progress("evaluating", done, n, best)
    _complete(table, req, layouts, ids, bound, evaluated, values(evaluations, Evaluation), pruned_by, tokens)
    return [dict(zip(table, row, strict=True)) for row in zip(*table.values(), strict=True)], counts


def _order(point: tuple[float, float, float, str]) -> tuple[float, float, str]:
    objective, _, headroom, layout_id = point
    return objective, -headroom, layout_id


# An evaluation's fields that are also a row's columns.
_EVALUATED = (
    "memory_per_rank_bytes",
    "headroom_bytes",
    "fits",
    "step_seconds",
    "compute_seconds",
    "bubble_seconds",
    "exposed_communication_seconds",
    "communication_seconds",
    "dominant",
    "largest_group",
    "largest_group_phase",
    "largest_group_domains",
    "confidence",
    "costing",
)

# A row's columns after its bound's, in order: null until the layout is evaluated (the accelerators that must talk
# are its GPUs from the start).
_UNBOUND = (
    "step_seconds",
    "compute_seconds",
    "bubble_seconds",
    "exposed_communication_seconds",
    "communication_seconds",
    "tokens_per_second",
    "gpu_hours_per_step",
    "gpu_hours_per_million_tokens",
    "objective_value",
    "dominant",
    "must_talk",
    "largest_group",
    "largest_group_phase",
    "largest_group_domains",
    "confidence",
    "costing",
    "rank",
)


def _layout_columns(req: space.TrainRequest, layouts: list[Layout], ids: list[str]) -> dict[str, list[Any]]:
    """The table's first columns, one list each: what a row takes from its layout and the request."""
    n = len(layouts)
    t: dict[str, list[Any]] = {"layout_id": ids}
    t |= {name: list(column) for name, column in zip(ROW_COLUMNS, zip(*layouts, strict=True), strict=True)}
    return t | {"seq_len": [req.seq] * n, "global_batch": [req.global_batch] * n}


def _complete(
    t: dict[str, list[Any]],
    req: space.TrainRequest,
    layouts: list[Layout],
    ids: list[str],
    bound: dict[str, list[Any]],
    evaluated: list[int],
    e: dict[str, list[Any]],
    pruned_by: dict[int, str],
    tokens: float,
) -> None:
    """The search's table `t` (`_layout_columns`) completed: each layout's bound, then its evaluation or why it
    was pruned; the evaluated, fitting layouts ranked by the objective (ties: more headroom, then the id) and the
    Pareto front of step time vs memory headroom among them marked."""
    n = len(layouts)
    fits = bound["fits"]
    t |= {name: list(bound[name]) for name in ("memory_per_rank_bytes", "usable_memory_bytes", "headroom_bytes")}
    t |= {"fits": list(fits), "step_lower_bound_seconds": bound["step_lower_bound_seconds"]}
    t["status"] = ["does-not-fit" if f is False else "evaluated" for f in fits]
    t["reason"] = [
        f"needs {m / GB:.1f} GB per rank, has {u / GB:.1f}" if f is False and m is not None and u is not None else None
        for f, m, u in zip(fits, bound["memory_per_rank_bytes"], bound["usable_memory_bytes"], strict=True)
    ]
    for name in _UNBOUND:
        t[name] = t["gpus"] if name == "must_talk" else [None] * n
    t["pareto"] = [False] * n
    for i, by in pruned_by.items():
        t["status"][i] = "pruned"
        t["reason"][i] = (
            f"pruned: its step is at least {t['step_lower_bound_seconds'][i]:.4g} s (no communication), while {by} "
            "is as fast with as much memory headroom, and the top K are faster"
        )
    for name in _EVALUATED:
        column = t[name]
        for i, value in zip(evaluated, e[name], strict=True):
            column[i] = value
    gpus, step, obj = t["gpus"], t["step_seconds"], t["objective_value"]
    for i in evaluated:
        if step[i]:
            t["tokens_per_second"][i] = tokens / step[i]
            t["gpu_hours_per_step"][i] = gpus[i] * step[i] / 3600.0
            t["gpu_hours_per_million_tokens"][i] = gpu_hours_per_million_tokens(step[i], gpus[i], tokens)
            obj[i] = objective_value(req.objective, step[i], gpus[i], tokens)
    heads = t["headroom_bytes"]
    ok = [i for i in evaluated if t["fits"][i] is not False and obj[i] is not None]
    ok.sort(key=lambda i: (obj[i], -(heads[i] or 0.0), ids[i]))
    for k, i in enumerate(ok, 1):
        t["rank"][i] = k
    top = -float("inf")
    for i in sorted(ok, key=lambda i: (step[i], -(heads[i] or 0.0), ids[i])):
        if (heads[i] or 0.0) > top:
            t["pareto"][i] = True
            top = heads[i] or 0.0


class NoLegalLayout(UsageError):
    """Nothing to rank: every candidate broke a rule or did not fit. The message says why for the closest."""

    def __init__(self, req: Any, rejected: space.Rejections, tried: list[tuple[Layout, Bound]]) -> None:
        lines = [f"no legal layout of {req.model.id} on {req.cluster} at {', '.join(map(str, req.gpus))} GPUs:"]
        close = sorted(
            (x for x in tried if x[1].memory_per_rank_bytes is not None and x[1].usable_memory_bytes),
            key=lambda x: (x[1].memory_per_rank_bytes / x[1].usable_memory_bytes, x[0].id),  # type: ignore[operator]
        )
        for x, b in close[:3]:
            lines.append(
                f"  {x.describe()}: needs {b.memory_per_rank_bytes / GB:.1f} GB per rank, has "  # type: ignore[operator]
                f"{b.usable_memory_bytes / GB:.1f}"  # type: ignore[operator]
            )
        lines += [f"  {line}" for line in rejected.lines()]
        if len(lines) == 1:
            lines.append("  the request leaves no candidate (check --gpus, --global-batch and the filters)")
        super().__init__("\n".join(lines))


def as_dict(result: PlanResult) -> dict[str, Any]:
    """The result as JSON-ready data (the CLI's --json, the explorer): the top K and the front with their hot links
    as lists; every row is in the Parquet file, not here."""
    import json

    def shown(r: dict[str, Any]) -> dict[str, Any]:
        links = r.get("hot_links")
        return {**r, "hot_links": json.loads(links) if isinstance(links, str) else links}

    return {
        "plan_id": result.plan_id,
        "kind": result.kind,
        "request": result.request,
        "counts": result.counts,
        "seconds": result.seconds,
        "timings": result.timings,
        "top": [shown(r) for r in result.top],
        "pareto": [shown(r) for r in result.pareto],
        "rejections": result.rejections,
        "notes": result.notes,
    }
