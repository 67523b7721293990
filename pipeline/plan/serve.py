"""`plan serve`: the serving layouts of a model for a demand and latency targets.

A serving layout is aggregated (prefill and decode on one TP group) or disaggregated (a prefill pool of TP_p groups,
a decode pool of TP_d groups, the KV cache sent between them), with a batch of concurrent sequences per group. The
step model (`estimate/step.inference`) gives TTFT and TPOT on the analytical per-tier costs of its TP all-reduces
and KV transfer; the demand then says how many groups it needs:

* aggregated: a group finishes `batch` requests every TTFT + output × TPOT, so groups = ⌈R ÷ (batch ÷ that)⌉;
* disaggregated: a prefill group takes `batch` prompts per TTFT, a decode group `batch` sequences per output × TPOT;
  each pool gets what the demand needs, so the prefill : decode ratio follows from the layout.

TTFT here is the unloaded time to first token (no queueing model); the targets compare against it. Ranked by
accelerators (fewest first), then request latency; the Pareto front is accelerators vs request latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..core import confidence as rule
from ..errors import UsageError
from ..estimate import step as step_model
from ..estimate.cost import Phase
from ..estimate.decompose import decompose
from ..estimate.workloads import Workload
from ..formats.workload import Inference
from .cluster import ClusterSummary, GroupKey, group_key
from .evaluate import ANALYTICAL, candidate_workload
from .space import ModelSpec, Rejections, _tp_ok, divisors

MODES = ("aggregated", "disaggregated")
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServeLayout(NamedTuple):
    mode: str
    prefill_tp: int
    decode_tp: int
    batch: int

    @property
    def id(self) -> str:
        if self.mode == "aggregated":
            return f"aggregated-tp{self.prefill_tp}-batch{self.batch}"
        return f"disaggregated-p{self.prefill_tp}-d{self.decode_tp}-batch{self.batch}"

    @property
    def group_gpus(self) -> int:
        return self.prefill_tp if self.mode == "aggregated" else self.prefill_tp + self.decode_tp


def decode_start(x: ServeLayout, domain: int) -> int:
    """Where the decode pool starts: right after the prefill pool, or at the next scale-up domain when the decode
    group would straddle two (tensor parallelism stays inside one domain)."""
    start = x.prefill_tp
    if start % domain + x.decode_tp > domain:
        start = -(-start // domain) * domain
    return start


def span(x: ServeLayout, domain: int) -> int:
    """The ranks a layout occupies in placement order (the gap before a domain-aligned decode pool included)."""
    return x.prefill_tp if x.mode == "aggregated" else decode_start(x, domain) + x.decode_tp


@dataclass(frozen=True)
class ServeRequest:
    model: ModelSpec
    cluster: str
    requests_per_second: float
    prompt: int
    output: int
    ttft_p50: float | None = None
    tpot: float | None = None
    top: int = 10
    modes: tuple[str, ...] = MODES
    tp: tuple[int, ...] | None = None
    max_batch: int = BATCHES[-1]


def serve_request(
    model: ModelSpec,
    cluster: str,
    *,
    requests_per_second: float | None,
    prompt: int | None,
    output: int | None,
    ttft_p50: float | None = None,
    tpot: float | None = None,
    top: int = 10,
    modes: tuple[str, ...] | None = None,
    tp: tuple[int, ...] | None = None,
    max_batch: int = BATCHES[-1],
) -> ServeRequest:
    """Validated; the workload's prompt, output and request rate where an option is not given."""
    defaults = model.serving
    rps = requests_per_second if requests_per_second is not None else defaults.get("requests_per_second")
    prompt = prompt if prompt is not None else defaults.get("prompt_tokens")
    output = output if output is not None else defaults.get("output_tokens")
    for value, option in ((rps, "--requests-per-second"), (prompt, "--prompt"), (output, "--output")):
        if value is None:
            raise UsageError(f"{option}: required for {model.id} ({model.source} does not state it)")
    if isinstance(rps, bool) or not isinstance(rps, int | float) or not math.isfinite(rps) or rps <= 0:
        raise UsageError(f"--requests-per-second {rps!r}: expected a positive number")
    for value, option in ((prompt, "--prompt"), (output, "--output"), (top, "--top"), (max_batch, "--max-batch")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{option} {value!r}: expected a whole number ≥ 1")
    for value, option in ((ttft_p50, "--ttft-p50"), (tpot, "--tpot")):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UsageError(f"{option} {value!r}: expected a positive time")
    modes = tuple(dict.fromkeys(modes or MODES))
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise UsageError(f"--mode {bad[0]!r}: expected one of {', '.join(MODES)}")
    return ServeRequest(model, cluster, float(rps), prompt, output, ttft_p50, tpot, top, modes, tp, max_batch)  # type: ignore[arg-type]


def serving_layouts(
    req: ServeRequest, domain_size: int, reference: str, accelerators: int | None = None
) -> tuple[list[ServeLayout], Rejections]:
    """Every serving layout of the request; a group larger than the cluster (`accelerators`) is refused."""
    from .space import Cluster

    rejected = Rejections()
    shape = Cluster(req.cluster, reference, 0, domain_size)
    tps = []
    for tp in req.tp or tuple(divisors(domain_size)):
        why = _tp_ok(tp, req.model, shape)
        if why:
            rejected.add(why)
        else:
            tps.append(tp)
    batches = [b for b in BATCHES if b <= req.max_batch]
    out = []
    if "aggregated" in req.modes:
        out += [ServeLayout("aggregated", tp, tp, b) for tp in tps for b in batches]
    if "disaggregated" in req.modes:
        out += [ServeLayout("disaggregated", p, d, b) for p in tps for d in tps for b in batches]
    if accelerators is not None:
        big = [x for x in out if span(x, domain_size) > accelerators]
        for x in big:
            rejected.add(
                f"a {x.mode} group of {x.group_gpus} GPUs (prefill TP {x.prefill_tp}, decode TP {x.decode_tp}) "
                f"needs {span(x, domain_size)} accelerators in placement order; {req.cluster} has {accelerators}"
            )
        out = [x for x in out if span(x, domain_size) <= accelerators]
    return out, rejected


class ServeEvaluator:
    """One serving layout → TTFT, TPOT, memory, fit and the groups the demand needs (picklable, like
    `TrainEvaluator`)."""

    def __init__(self, req: ServeRequest, cluster: ClusterSummary) -> None:
        self.req = req
        self.cluster = cluster
        self._costs: dict[tuple[str, GroupKey, float, bool], Any] = {}

    def workload(self, x: ServeLayout) -> Workload:
        r = self.req
        if x.mode == "aggregated":
            inference = Inference.model_construct(
                mode="aggregated", tp=x.prefill_tp, batch=x.batch, prompt_tokens=r.prompt, output_tokens=r.output
            )
        else:
            inference = Inference.model_construct(
                mode="disaggregated",
                prefill_tp=x.prefill_tp,
                decode_tp=x.decode_tp,
                decode_pool_start=decode_start(x, self.cluster.domain_size),
                batch=x.batch,
                prompt_tokens=r.prompt,
                output_tokens=r.output,
            )
        return candidate_workload(r.model, x.id, self.cluster.id, inference=inference)

    def backend(self, w: Workload) -> list[Any]:
        """The backend communications (the client's frontend traffic is neither TTFT's nor TPOT's)."""
        return [c for c in decompose(w).communications if c.network == "backend"]

    def group_keys(self, x: ServeLayout) -> tuple[set[GroupKey], set[GroupKey]]:
        groups: set[GroupKey] = set()
        sends: set[GroupKey] = set()
        for c in self.backend(self.workload(x)):
            (sends if c.collective == "send" else groups).add(group_key(c.group, span(x, self.cluster.domain_size)))
        return groups, sends

    def phases(self, x: ServeLayout, w: Workload) -> list[Phase]:
        out = []
        for c in self.backend(w):
            key = group_key(c.group, span(x, self.cluster.domain_size))
            ck = (c.collective, key, c.bytes_per_rank, c.concurrency > 1)
            cost = self._costs.get(ck)
            if cost is None:
                cost = self._costs[ck] = self.cluster.cost(c.collective, key, c.bytes_per_rank, c.concurrency)
            out.append(Phase.of(c, cost))
        return out

    def evaluate(self, x: ServeLayout, phases: list[Any] | None = None, costing: str = ANALYTICAL) -> dict[str, Any]:
        r, c = self.req, self.cluster
        w = self.workload(x)
        phases = self.phases(x, w) if phases is None else phases
        st = step_model.inference(w, phases, c.accelerator, c.rates, c.memory_headroom)
        ttft, tpot = st["ttft_seconds"], st["tpot_seconds"]
        row: dict[str, Any] = {
            "layout_id": x.id,
            "mode": x.mode,
            "tp": x.prefill_tp if x.mode == "aggregated" else None,
            "prefill_tp": x.prefill_tp,
            "decode_tp": x.decode_tp,
            "batch": x.batch,
            "prompt_tokens": r.prompt,
            "output_tokens": r.output,
            "requests_per_second": r.requests_per_second,
            "memory_per_rank_bytes": st["memory_per_rank_bytes"],
            "usable_memory_bytes": st["memory"]["usable_memory_bytes"],
            "headroom_bytes": st["headroom_bytes"],
            "fits": st["fits"] if isinstance(st["fits"], bool) else None,
            "ttft_seconds": ttft,
            "tpot_seconds": tpot,
            "request_seconds": st["step_seconds"],
            "dominant": f"decode {st.get('tpot_bound', 'unknown')}-bound",
            "must_talk": x.group_gpus,
            "largest_group": max(x.prefill_tp, x.decode_tp),
            "largest_group_phase": "prefill-tp-all-reduce" if x.prefill_tp >= x.decode_tp else "decode-tp-all-reduce",
            "largest_group_domains": 1,
            "confidence": rule.weakest([c.compute_confidence, *(p.confidence for p in phases)]),
            "costing": costing,
            "status": "evaluated",
            "reason": None,
            "groups": None,
            "prefill_groups": None,
            "decode_groups": None,
            "gpus": None,
            "meets_targets": None,
            "tokens_per_second": None,
            "gpu_hours_per_million_tokens": None,
            "objective_value": None,
            "rank": None,
            "pareto": False,
        }
        if row["fits"] is False:
            row["status"] = "does-not-fit"
            row["reason"] = (
                f"needs {st['memory_per_rank_bytes'] / 1e9:.1f} GB per rank, has "
                f"{st['memory']['usable_memory_bytes'] / 1e9:.1f}"
            )
            return row
        if ttft is None or tpot is None or ttft <= 0 or tpot <= 0:
            row["status"] = "unknown"
            row["reason"] = "; ".join(st["missing"]) or "TTFT or TPOT unknown"
            return row
        if x.mode == "aggregated":
            groups = math.ceil(r.requests_per_second * st["step_seconds"] / x.batch - 1e-9)
            row["groups"] = groups
            gpus = groups * x.prefill_tp
        else:
            prefill = ttft - _kv_seconds(phases)
            pg = math.ceil(r.requests_per_second * prefill / x.batch - 1e-9)
            dg = math.ceil(r.requests_per_second * r.output * tpot / x.batch - 1e-9)
            row["prefill_groups"], row["decode_groups"], row["groups"] = pg, dg, pg + dg
            gpus = pg * x.prefill_tp + dg * x.decode_tp
        row["gpus"] = gpus
        tokens = r.requests_per_second * r.output
        row["tokens_per_second"] = tokens
        row["gpu_hours_per_million_tokens"] = gpus / 3600.0 / (tokens / 1e6)
        meets = (r.ttft_p50 is None or ttft <= r.ttft_p50) and (r.tpot is None or tpot <= r.tpot)
        row["meets_targets"] = meets
        if gpus > c.accelerators:
            row["status"] = "too-big"
            row["reason"] = f"the demand needs {gpus:,} accelerators; {c.id} has {c.accelerators:,}"
        elif not meets:
            row["status"] = "misses-targets"
            row["reason"] = _missed(r, ttft, tpot)
        row["objective_value"] = float(gpus)
        return row


def _kv_seconds(phases: list[Any]) -> float:
    return sum(p.total_seconds or 0.0 for p in phases if p.phase == "kv-transfer")


def _missed(r: ServeRequest, ttft: float, tpot: float) -> str:
    out = []
    if r.ttft_p50 is not None and ttft > r.ttft_p50:
        out.append(f"TTFT {ttft * 1e3:.1f} ms > --ttft-p50 {r.ttft_p50 * 1e3:g} ms")
    if r.tpot is not None and tpot > r.tpot:
        out.append(f"TPOT {tpot * 1e3:.2f} ms > --tpot {r.tpot * 1e3:g} ms")
    return "; ".join(out)


def rank(rows: list[dict[str, Any]]) -> None:
    """Fewest accelerators first, then request latency; Pareto front of accelerators vs request latency."""
    ok = [r for r in rows if r["status"] == "evaluated"]
    ok.sort(key=lambda r: (r["gpus"], r["request_seconds"], r["layout_id"]))
    for k, r in enumerate(ok, 1):
        r["rank"] = k
    best = float("inf")
    for r in ok:  # by GPUs ascending: on the front when faster than every cheaper one
        if r["request_seconds"] < best:
            r["pareto"] = True
            best = r["request_seconds"]


def plan_serving(
    lay: Any,
    model: str,
    cluster: str,
    *,
    memory_headroom: float | None = None,
    route_top: int | None = None,
    views: Any = None,
    **options: Any,
) -> Any:
    """Search every serving layout of `model` on `cluster` for the demand and targets in `options`
    (`serve_request`'s); the top K are routed per link (as `estimate workload` routes a service)."""
    import time

    from ..estimate.traffic import Views
    from . import cluster as cluster_mod
    from .evaluate import ROUTED
    from .route import hot_links_of
    from .search import PlanResult, plan_id
    from .space import load_model_spec
    from .train import prepare

    t0 = time.perf_counter()
    own = views is None
    views = views or Views(lay)
    try:
        spec = load_model_spec(lay, model)
        summary = prepare(views, cluster, spec.shape.dtype, memory_headroom)
        req = serve_request(spec, summary.id, **options)
        layouts, rejected = serving_layouts(req, summary.domain_size, summary.reference, summary.accelerators)
        ev = ServeEvaluator(req, summary)
        view = views(cluster)
        groups: set[GroupKey] = set()
        sends: set[GroupKey] = set()
        for x in layouts:
            g, s = ev.group_keys(x)
            groups |= g
            sends |= s
        refused = cluster_mod.place_shapes(view, summary, groups, sends)
        if refused:
            raise UsageError(f"internal: a serving group cannot be placed on {cluster}: {next(iter(refused.values()))}")
        rows = [ev.evaluate(x) for x in layouts]
        rank(rows)
        if not any(r["rank"] for r in rows):
            raise NoServingLayout(req, rejected, rows)
        ranked = sorted((r for r in rows if r["rank"] is not None), key=lambda r: r["rank"])
        by_id = {x.id: x for x in layouts}
        notes: list[str] = []
        for r in ranked[: req.top if route_top is None else route_top]:
            x = by_id[r["layout_id"]]
            try:
                routed = _routed(view, ev.workload(x))
            except UsageError as exc:
                notes.append(f"{x.id}: not routed: {exc}")
                continue
            e = ev.evaluate(x, routed, ROUTED)
            r["costing"] = ROUTED
            r["routed_step_seconds"] = e["request_seconds"]
            r["hot_links"] = hot_links_of(routed)
        request = {
            "model": spec.id,
            "model_source": spec.source,
            "cluster": summary.id,
            "objective": "gpus",
            "requests_per_second": req.requests_per_second,
            "prompt": req.prompt,
            "output": req.output,
            "ttft_p50": req.ttft_p50,
            "tpot": req.tpot,
            "top": req.top,
            "modes": list(req.modes),
            "tp": list(req.tp) if req.tp else None,
            "memory_headroom": summary.memory_headroom,
            "domain_size": summary.domain_size,
        }
        pid = plan_id("serve", request)
        for r in rows:
            r["plan_id"] = pid
            r.setdefault("routed_step_seconds", None)
            r.setdefault("hot_links", None)
        counts = {
            "legal": len(rows),
            "not_fitting": sum(r["status"] == "does-not-fit" for r in rows),
            "missing_targets": sum(r["status"] == "misses-targets" for r in rows),
            "evaluated": len(rows),
        }
        from .train import _labels

        return PlanResult(
            kind="serve",
            plan_id=pid,
            request=request,
            rows=rows,
            top=ranked[: req.top],
            pareto=[r for r in ranked if r["pareto"]],
            rejections=rejected.lines(),
            counts=counts,
            notes=[
                *notes,
                "TTFT is the unloaded time to first token (no queueing model); --ttft-p50 is compared with it",
                *_labels(summary),
            ],
            seconds=time.perf_counter() - t0,
            spec=spec,
        )
    finally:
        if own:
            views.close()


def _routed(view: Any, w: Workload) -> list[Any]:
    """The backend phases of `w` routed per link (the frontend phase is neither TTFT's nor TPOT's)."""
    from ..estimate.cost import phases

    return [p for p in phases(view, w, view.calibration)[0] if p.network != "frontend"]


class NoServingLayout(UsageError):
    def __init__(self, req: ServeRequest, rejected: Rejections, rows: list[dict[str, Any]]) -> None:
        lines = [
            f"no serving layout of {req.model.id} on {req.cluster} meets {req.requests_per_second:g} requests/s "
            f"({req.prompt} in, {req.output} out):"
        ]
        order = {"misses-targets": 0, "too-big": 1, "does-not-fit": 2, "unknown": 3}
        close = sorted(
            (r for r in rows if r["status"] in order),
            key=lambda r: (order[r["status"]], r["gpus"] or 0, r["memory_per_rank_bytes"] or 0, r["layout_id"]),
        )
        lines += [f"  {r['layout_id']}: {r['reason']}" for r in close[:3]]
        lines += [f"  {line}" for line in rejected.lines()]
        super().__init__("\n".join(lines))


def save_serving(lay: Any, result: Any, workload_id: str) -> tuple[dict[str, Any], list[Any]]:
    """Save the best-ranked serving layout as workload `workload_id` (knobs in params.yaml, the mode and pool start
    in the file); returns its row and the files written."""
    from .store import save_workload

    spec: ModelSpec = result.spec
    ranked = sorted((r for r in result.rows if r["rank"] is not None), key=lambda r: r["rank"])
    r = ranked[0]
    if r["mode"] == "aggregated":
        knobs: dict[str, Any] = {"tp": r["prefill_tp"]}
    else:
        knobs = {"prefill_tp": r["prefill_tp"], "decode_tp": r["decode_tp"]}
    knobs |= {
        "batch": r["batch"],
        "prompt_tokens": r["prompt_tokens"],
        "output_tokens": r["output_tokens"],
        "requests_per_second": r["requests_per_second"],
    }
    inference: dict[str, Any] = {"mode": r["mode"]}
    x = ServeLayout(r["mode"], r["prefill_tp"], r["decode_tp"], r["batch"])
    domain = _domain(result)
    if r["mode"] == "disaggregated" and decode_start(x, domain) != x.prefill_tp:
        inference["decode_pool_start"] = decode_start(x, domain)
    # What one group sustains, for the capacity summary: its batch of sequences, one token each per TPOT.
    inference["group_tokens_per_second"] = round(r["batch"] / r["tpot_seconds"], 3)
    data = {
        "id": workload_id,
        "title": f"{spec.id} served as planned on {result.request['cluster']}: {x.id}",
        "kind": "inference",
        "summary": f"Saved by `fabricref plan serve` (plan {result.plan_id}, rank 1 by accelerators): "
        f"{r['gpus']:,} GPUs for {r['requests_per_second']:g} requests/s; group_tokens_per_second is the planner's "
        "batch ÷ TPOT (an estimate, not a measurement).",
        "model": spec.shape.model_dump(exclude_none=True),
        "inference": inference,
        "targets": [result.request["cluster"]],
    }
    return r, save_workload(lay, workload_id, "inference", data, knobs)


def _domain(result: Any) -> int:
    return int(result.request.get("domain_size") or 8)
