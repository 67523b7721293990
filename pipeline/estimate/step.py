"""Does a workload fit, and how long is a step or a token: memory per rank against the registry's accelerator
memory; compute as the layer's kernels (`flops.py`) at calibrated rates (`throughput.py`); the pipeline bubble
(`schedule.py`); and the part of each routed communication phase the overlap model cannot hide behind compute.
A figure needing a registry field no source states is `unknown`, naming the field: never a made-up number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import confidence as rule
from ..core.format import format_count, format_quantity
from ..core.units import convert
from . import compute, decompose, flops, memory, schedule, sizing, throughput

if TYPE_CHECKING:
    from ..core.facts import Facts

# Registry fields the estimate reads, and the unit it wants each in.
ACCELERATOR_FIELDS = {
    "accelerator.memory": "B",
    "accelerator.memory_bandwidth": "B/s",
    "accelerator.peak_dense_bf16": "FLOP/s",
    "accelerator.peak_dense_fp8": "FLOP/s",
}
PEAK_FIELD = {"bf16": "accelerator.peak_dense_bf16", "fp8": "accelerator.peak_dense_fp8"}


@dataclass(frozen=True)
class AccField:
    key: str
    value: float | None  # in the unit of ACCELERATOR_FIELDS[key]
    status: str
    reason: str = ""
    confidence: str = ""  # of the registry field; by the one rule from the status when not given
    evidence_needed: str = ""  # of an unknown field: what the registry says would settle it

    def __post_init__(self) -> None:
        if not self.confidence:
            object.__setattr__(self, "confidence", rule.of_status(self.status))


@dataclass
class Accelerator:
    reference_id: str
    fields: dict[str, AccField]
    model: str = ""  # the registry's accelerator.model (e.g. "Instinct MI455X"), when stated

    def value(self, key: str, missing: list[str]) -> float | None:
        f = self.fields.get(key)
        if f is None or f.value is None:
            reason = f" ({f.reason})" if f is not None and f.reason else ""
            missing.append(f"{self.reference_id}:{key} is unknown{reason}")
            return None
        return f.value

    def lineage(self) -> list[dict[str, str]]:
        """The fields the estimate read, as structured records (the same shape as a traffic phase's lineage)."""
        return [
            {"reference_id": self.reference_id, "field": f.key, "status": f.status, "confidence": f.confidence}
            for f in sorted(self.fields.values(), key=lambda f: f.key)
        ]


def accelerator(facts: Facts) -> Accelerator:
    """The accelerator fields of a reference, converted to base units; unknown ones kept with their reason."""
    out = {}
    for key, unit in ACCELERATOR_FIELDS.items():
        f = facts.get(key, required=False)
        value = None if f.value is None else convert(f.value, f.unit or unit, unit)
        reason, evidence = ("", "") if f.value is not None else (f.note, f.evidence_needed)
        out[key] = AccField(key, value, f.status, reason, f.confidence, evidence)
    return Accelerator(facts.reference_id, out, facts.text("accelerator.model"))


def missing_inputs(acc: Accelerator, rates: throughput.Rates) -> list[str]:
    """Every input a step estimate on `acc` at `rates` needs and lacks, one line each: the registry field, why the
    registry leaves it unknown, what needs it, and the document the registry says would settle it; or the
    throughput calibration's missing entry. Empty when the step model has all it needs."""
    needs = {"accelerator.memory": "the memory fit needs it", **rates.unknown_fields}
    lines = []
    for key, need in needs.items():
        f = acc.fields.get(key)
        if f is not None and f.value is not None:
            continue
        why = f" ({f.reason.rstrip('.')})" if f is not None and f.reason else ""
        settle = f". What would settle it: {f.evidence_needed}" if f is not None and f.evidence_needed else ""
        lines.append(f"{acc.reference_id}: {key} is unknown{why}; {need}{settle}")
    return lines + rates.unknown_calibration


def _usable(capacity: float | None, memory_headroom: float, assumptions: list[str]) -> float | None:
    """The accelerator memory the workload may use: all of it less the fraction the fit keeps free."""
    if capacity is None or not memory_headroom:
        return capacity
    usable = capacity * (1.0 - memory_headroom)
    assumptions.append(
        f"the fit keeps {memory_headroom * 100:g} % of accelerator memory free (params.yaml step.memory_headroom): "
        f"{usable / 1e9:.1f} GB of {capacity / 1e9:.1f} GB usable"
    )
    return usable


def _fits(per_rank: float | None, usable: float | None) -> tuple[bool | str, float | None]:
    if per_rank is None or usable is None:
        return "unknown", None
    return per_rank <= usable, usable - per_rank


def rates_for(acc: Accelerator, dtype: str, root: Path, mfu: float | None = None) -> throughput.Rates:
    """The accelerator's achieved rates for `dtype` from the checkout's throughput calibration and the registry's
    peaks and HBM bandwidth; `mfu` (a user's what-if, never a default) replaces the calibrated GEMM rates."""
    cal = throughput.load_throughput(root)
    peaks = {d: (acc.fields[k].value if k in acc.fields else None) for d, k in PEAK_FIELD.items()}
    hbm = acc.fields.get("accelerator.memory_bandwidth")
    r = throughput.rates(cal, acc.reference_id, dtype, peaks, hbm.value if hbm else None)
    if mfu is not None:
        compute.check_mfu(mfu)
        r = throughput.what_if(r, mfu, peaks.get(throughput.PEAK_DTYPE.get(dtype, dtype)))
    return r


def _phase_seconds(phases: list[Any], prefix: str) -> float:
    """The summed time of the phases whose name starts with `prefix` (all their occurrences)."""
    return sum(p.total_seconds for p in phases if p.phase.startswith(prefix) and p.total_seconds is not None)


def _stage_params(shape: flops.Shape, layers: int, moe_share: float, first: bool, last: bool) -> tuple[float, float]:
    """(dense, expert) weights of one pipeline rank before any split by TP or EP: its layers, the embedding on the
    first rank and the output projection on the last (untied)."""
    h = shape.hidden
    attn = flops.attention_weights(h, shape.heads, shape.kv_heads, shape.head_dim)
    mats = 3 if shape.gated else 2
    moe_layers = layers * moe_share
    dense = layers * attn + (layers - moe_layers) * mats * h * shape.ffn_hidden + moe_layers * h * shape.experts
    expert = moe_layers * shape.experts * mats * h * shape.expert_ffn_hidden
    if shape.vocab:
        dense += shape.vocab * h * (int(first) + int(last))
    return dense, expert


def training(
    w: Any, phases: list[Any], acc: Accelerator, rates: throughput.Rates, memory_headroom: float = 0.0
) -> dict[str, Any]:
    m, t = w.model, w.training
    shape = flops.from_workload(m)
    missing, assumptions = list(rates.missing), list(shape.assumptions)
    tp, pp, dp, ep, cp = t.tp, t.pp, t.dp, t.ep, t.cp
    b, mbs, seq, v = t.micro_batch, t.microbatches, t.seq_len, t.virtual_stages
    sub = seq // cp  # each rank's tokens of a sequence (context parallel splits it)
    replicas = dp * cp  # ranks holding the same weights: gradients reduce, and ZeRO shards, over DP × CP
    zero = t.zero if t.zero is not None else (3 if t.sharded else 0)
    sp, recompute = t.sequence_parallel, t.recompute
    if sp is None:
        sp = tp > 1
        if tp > 1:
            assumptions.append("sequence parallelism with TP (not declared by the workload)")
    if recompute is None:
        recompute = "selective"
        assumptions.append(
            "selective activation recompute (not declared by the workload; Korthikanti et al.'s recommended setting)"
        )
    layers = schedule.stage_layers(shape.layers, pp, t.stage_layers)
    moe_share = (shape.moe_layers / shape.layers) if shape.experts else 0.0

    # --- memory, rank by rank: the fullest one decides the fit
    dense_act = memory.layer_activation_bytes(shape, b, sub, tp=tp, sequence_parallel=sp, recompute=recompute, cp=cp)
    moe_act = memory.layer_activation_bytes(
        shape, b, sub, tp=tp, sequence_parallel=sp, recompute=recompute, moe=True, cp=cp
    )
    per_layer = (1 - moe_share) * dense_act["bytes_per_layer"] + moe_share * moe_act["bytes_per_layer"]
    ranks = []
    for r, n in enumerate(layers):
        first, last = r == 0, r == pp - 1
        dense, expert = _stage_params(shape, n, moe_share, first, last)
        state = memory.training_state(
            (dense + expert) or 1.0, t.optimizer_layout, dp=replicas, zero=zero, tp=tp, pp=1, expert_params=expert,
            ep=ep,
        )  # fmt: skip
        flight = schedule.in_flight(pp, mbs, v, r)
        act = per_layer * n * flight
        if last and shape.vocab:
            act += 4.0 * b * sub * shape.vocab / tp  # fp32 logits kept for the loss's backward
        ranks.append({"rank": r, "layers": n, "state": state, "activations": act, "in_flight": flight,
                      "per_layer": dense_act, "bytes": state["bytes"] + act})  # fmt: skip
    fullest = max(ranks, key=lambda x: x["bytes"])
    per_rank = fullest["bytes"]
    capacity = acc.value("accelerator.memory", missing)
    usable = _usable(capacity, memory_headroom, assumptions)
    fits, headroom = _fits(per_rank, usable)

    # --- compute per layer and micro-batch on one rank
    dense_work = flops.layer(shape, b, sub, tp=tp, sp=sp, recompute=recompute, cp=cp)
    moe_work = flops.layer(shape, b, sub, tp=tp, sp=sp, recompute=recompute, moe=True, cp=cp) if shape.experts else None

    def pass_times(work: flops.LayerWork) -> tuple[float, float, float, float, float]:
        fwd, bwd, rec = (rates.seconds(x) for x in (work.forward, work.backward, work.recompute))
        gemm = rates.seconds([o for o in work.forward if o.kind == "gemm"])
        attention = rates.seconds([o for o in work.forward if o.kind == "attention"])
        return fwd, bwd, rec, gemm, attention

    dense_t = pass_times(dense_work)
    moe_t = pass_times(moe_work) if moe_work else dense_t
    layer_fwd, layer_bwd, layer_rec, layer_gemm_fwd, layer_attention_fwd = (
        (1 - moe_share) * d + moe_share * e for d, e in zip(dense_t, moe_t, strict=True)
    )
    emb = rates.seconds(flops.embedding_forward(shape, b, sub, tp)) * 3
    head = rates.seconds(flops.head_forward(shape, b, sub, tp)) * 3  # forward and backward (twice the work)

    # --- communication per phase, from the routed phases: exposed vs hidden by the overlap model
    unknown = _unknown_phases(phases, missing)
    mean_layers = shape.layers / pp
    tp_total = _phase_seconds(phases, "tp-")
    ep_total = _phase_seconds(phases, "ep-")
    pp_phase = next((p for p in phases if p.phase.startswith("pp-") and p.total_seconds is not None), None)
    cp_total = _phase_seconds(phases, "cp-")
    # Data-parallel traffic is what decompose marks as hiding behind the step's compute (its `overlaps`).
    dp_phases = [p for p in phases if p.overlaps == decompose.BACKWARD and p.total_seconds is not None]
    dp_total = sum(p.total_seconds for p in dp_phases)
    # One pass (forward or backward) of one layer for one micro-batch: the demand counts both passes.
    tp_pass = tp_total / (2 * mean_layers * mbs) if tp_total else 0.0
    moe_layers_stage = shape.moe_layers / pp if shape.experts else 0.0
    ep_pass = ep_total / (2 * moe_layers_stage * mbs) if ep_total and moe_layers_stage else 0.0
    passes = 3 if recompute == "full" else 2  # a full recompute repeats the forward's TP collectives
    # The CP ring runs once per forward and twice per backward (decompose counts 3 per layer and micro-batch); a
    # full recompute runs the forward's again. Overlapped, a pass hides behind that pass's attention kernel.
    cp_passes = 4 if recompute == "full" else 3
    cp_pass = cp_total / (3 * mean_layers * mbs) if cp_total else 0.0
    cp_exposed_pass = max(0.0, cp_pass - layer_attention_fwd) if t.cp_overlap else cp_pass
    tp_exposed_pass = max(0.0, tp_pass - layer_gemm_fwd) if t.tp_overlap else tp_pass
    moe_gemm = moe_t[3] if moe_work else 0.0
    ep_exposed_pass = max(0.0, ep_pass - moe_gemm) if t.ep_overlap else ep_pass
    send = pp_phase.seconds if pp_phase is not None else 0.0
    pp_overlap = t.pp_overlap
    # A fully sharded run gathers, frees and reduce-scatters every layer's parameters each micro-batch; the
    # framework's own time for that (beyond the kernels and the transfers) sits on the critical path.
    sharded_layer = rates.sharded_layer_overhead_s if zero == 3 and replicas > 1 else 0.0
    sends = 0.0 if pp == 1 or pp_overlap else 2 * v * send
    stage_times, compute_by_stage = [], []
    for r, n in enumerate(layers):
        c = n * (layer_fwd + layer_bwd + layer_rec) + (emb if r == 0 else 0.0) + (head if r == pp - 1 else 0.0)
        comm = n * passes * tp_exposed_pass + n * moe_share * 2 * ep_exposed_pass + n * cp_passes * cp_exposed_pass
        compute_by_stage.append(c)
        stage_times.append(c + comm + sends + n * sharded_layer)
    pipe = schedule.step_time(stage_times, mbs, v)
    slow = pipe.slowest_stage
    compute_s = compute_by_stage[slow] * mbs
    pp_fill = 2 * (pp - 1) * send if pp > 1 and pp_overlap else 0.0

    # Data parallel: buckets reduce while the last micro-batch's backward runs (the window); ZeRO-3 also gathers
    # parameters ahead of each layer, so its traffic can hide behind the whole compute.
    n_slow = layers[slow]
    window = compute_s if zero == 3 else n_slow * (layer_bwd + layer_rec)
    last_bucket = 0.0
    for p in dp_phases:
        if p.bytes_per_rank:
            share = min(1.0, compute.DP_BUCKET_BYTES / p.bytes_per_rank)
            last_bucket = max(last_bucket, p.latency_s + (p.bandwidth_s + p.queueing_s) * share)
    if not t.dp_overlap:
        dp_exposed = dp_total
    else:
        dp_exposed = 0.0 if not dp_total else max(min(last_bucket, dp_total), dp_total - window)

    # Optimizer step: each rank updates its shard (ZeRO ≥ 1) or every parameter it holds.
    state = fullest["state"]
    held = (state["weights_bytes"] / sizing.TRAINING_LAYOUTS[state["layout"]][0]) * (replicas if zero >= 3 else 1)
    shard = held / (replicas if zero >= 1 else 1)
    hbm = rates.hbm_bytes_per_s
    optimizer_s = shard * rates.optimizer_bytes_per_param / hbm if hbm else float("nan")

    tp_exposed = mbs * n_slow * passes * tp_exposed_pass
    ep_exposed = mbs * n_slow * moe_share * 2 * ep_exposed_pass
    cp_exposed = mbs * n_slow * cp_passes * cp_exposed_pass
    pp_exposed = (mbs * 2 * v * send if pp > 1 and not pp_overlap else 0.0) + pp_fill
    by_phase = {}
    for p in phases:
        total = p.total_seconds
        if total is None:
            continue
        if p.phase.startswith("tp-"):
            run, exposed = total * passes / 2, tp_exposed * (total / tp_total) if tp_total else 0.0
        elif p.phase.startswith("ep-"):
            run, exposed = total, ep_exposed * (total / ep_total) if ep_total else 0.0
        elif p.phase.startswith("pp-"):
            run, exposed = (mbs * 2 * v * send + (pp_fill if pp_overlap else 0.0)) if pp > 1 else total, pp_exposed
            run = max(run, exposed)
        elif p.phase.startswith("cp-"):
            run, exposed = total * cp_passes / 3, cp_exposed * (total / cp_total) if cp_total else 0.0
        elif p.overlaps == decompose.BACKWARD:
            run, exposed = total, dp_exposed * (total / dp_total) if dp_total else 0.0
        else:
            run, exposed = total, total
        by_phase[p.phase] = {"seconds": run, "exposed_seconds": exposed, "hidden_seconds": max(0.0, run - exposed)}

    tokens = b * mbs * seq * dp
    model_flops = flops.model_flops_per_token(shape, seq) * tokens
    exposed_total = tp_exposed + ep_exposed + pp_exposed + cp_exposed + dp_exposed
    out: dict[str, Any] = {
        "kind": "training",
        "memory_per_rank_bytes": per_rank,
        "memory": {
            "state": fullest["state"],
            "activations": {
                **fullest["per_layer"],
                "bytes": fullest["activations"],
                "layers_on_rank": fullest["layers"],
                "microbatches_in_flight": fullest["in_flight"],
                "fullest_rank": fullest["rank"],
                "schedule": t.schedule,
                "virtual_stages": v,
            },
            "accelerator_memory_bytes": capacity,
            "usable_memory_bytes": usable,
            "zero": zero,
        },
        "fits": fits,
        "headroom_bytes": headroom,
        "tokens_per_step": tokens,
        "flops_per_step": model_flops,
        "stage_layers": layers,
        "recompute": recompute,
        "sequence_parallel": sp,
        "context_parallel": cp,
        "communication_seconds": None if unknown else sum(p.total_seconds for p in phases),
        "exposed_communication_at_least_seconds": None
        if unknown
        else tp_exposed + ep_exposed + pp_exposed + cp_exposed,
        "compute_seconds": None,
        "bubble_seconds": None,
        "exposed_communication_seconds": None,
        "step_seconds": None,
        "communication_by_phase": by_phase,
        "calibration": rates.label(
            ("kernels.decode_step_overhead_us",) + (() if sharded_layer else ("kernels.sharded_layer_overhead_us",))
        ),
    }
    if rates.what_if:
        out["what_if"] = rates.what_if
    if not unknown and not rates.missing and all(map(math.isfinite, (compute_s, optimizer_s))):
        step_s = pipe.seconds + dp_exposed + optimizer_s + pp_fill
        out.update(
            {
                "compute_seconds": compute_s,
                "bubble_seconds": pipe.bubble_seconds,
                "bubble_fraction": pipe.bubble_fraction,
                "pipeline": pipe.formula,
                "optimizer_seconds": optimizer_s,
                "sharded_overhead_seconds": mbs * layers[slow] * sharded_layer,
                "dp_seconds": dp_total,
                "dp_exposed_seconds": dp_exposed,
                "dp_hidden_seconds": dp_total - dp_exposed,
                "exposed_communication_seconds": exposed_total,
                "step_seconds": step_s,
                "tflops_per_accelerator": model_flops / (tp * pp * replicas) / step_s / 1e12,
            }
        )
        peak = acc.fields.get(PEAK_FIELD.get(throughput.PEAK_DTYPE.get(m.dtype, m.dtype), ""))
        if peak is not None and peak.value:
            out["mfu"] = model_flops / (tp * pp * replicas * peak.value * step_s)
            out["mfu_note"] = (
                "model FLOPs utilisation, an output: 6 × weights + 12·L·H·Q·T per token (the PaLM / Llama 3 count) "
                "over the registry's peak; not an input"
            )
        assumptions.append(compute.DP_BUCKET_SOURCE)
    out.update(_common(acc, missing, assumptions))
    return out


def inference(
    w: Any, phases: list[Any], acc: Accelerator, rates: throughput.Rates, memory_headroom: float = 0.0
) -> dict[str, Any]:
    m, i = w.model, w.inference
    shape = flops.from_workload(m)
    missing, assumptions = list(rates.missing), list(shape.assumptions)
    dtype = sizing.dtype_bytes(m.dtype)
    weights = m.params * dtype
    batch, prompt, output = i.batch, i.prompt_tokens, i.output_tokens
    ptp, dtp = (i.tp, i.tp) if i.mode == "aggregated" else (i.prefill_tp, i.decode_tp)
    capacity = acc.value("accelerator.memory", missing)
    usable = _usable(capacity, memory_headroom, assumptions)
    kv_decode = memory.kv_bytes_per_token_per_rank(m.layers, m.kv_heads, m.head_dim, dtype, dtp)
    kv_prefill = memory.kv_bytes_per_token_per_rank(m.layers, m.kv_heads, m.head_dim, dtype, ptp)
    decode_fit = memory.inference_fit(weights, kv_decode, prompt + output, dtp, usable, batch)
    prefill_fit = memory.inference_fit(weights, kv_prefill, prompt, ptp, usable, batch)
    per_rank = max(decode_fit["bytes"], prefill_fit["bytes"])
    fits, headroom = _fits(per_rank, usable)

    unknown = _unknown_phases(phases, missing)
    by_phase = {p.phase: p.total_seconds for p in phases}
    prefill_ar, kv, decode_ar = (
        by_phase.get(k, 0.0) for k in ("prefill-tp-all-reduce", "kv-transfer", "decode-tp-all-reduce")
    )
    if None in (prefill_ar, kv, decode_ar):
        prefill_comm = decode_comm = None
    else:
        prefill_comm, decode_comm = prefill_ar + kv, decode_ar / output
    total_comm = None if unknown else sum(t for t in by_phase.values() if t is not None)
    if unknown and prefill_comm is not None:
        assumptions.append(
            f"TTFT, TPOT and the request time (step_seconds) do not include {', '.join(unknown)}: they are costed "
            "without it; communication_seconds, which adds every phase, is unknown"
        )
    moe = bool(shape.experts)
    moe_share = shape.moe_layers / shape.layers if moe else 0.0

    def forward(tokens: int, tp: int, context: int | None = None) -> float:
        """One forward pass of `tokens` per sequence through every layer, and the logits of its last token. An MoE
        layer reads every expert's weights once a batch routes to them (all, for any realistic batch)."""
        layer = rates.seconds(flops.layer_forward(shape, batch, tokens, tp=tp, context=context))
        if moe:
            layer = (1 - moe_share) * layer + moe_share * rates.seconds(
                flops.layer_forward(shape, batch, tokens, tp=tp, moe=True, context=context)
            )
        return shape.layers * layer + rates.seconds(flops.head_forward(shape, batch, 1, tp))

    # Prefill: the whole prompt through every layer once (compute-bound at the achieved GEMM rate).
    prefill_compute = forward(prompt, ptp)
    # Decode attends, on average over the generation, to the prompt and half the output.
    context = prompt + output // 2
    assumptions.append(f"decode reads the KV cache of prompt + output/2 = {context} tokens per sequence (average)")
    decode_compute = forward(1, dtp, context)
    hbm = acc.value("accelerator.memory_bandwidth", missing)
    out: dict[str, Any] = {
        "kind": "inference",
        "memory_per_rank_bytes": per_rank,
        "memory": {
            "weights_bytes": weights,
            "decode_pool": decode_fit,
            "prefill_pool": prefill_fit,
            "accelerator_memory_bytes": capacity,
            "usable_memory_bytes": usable,
        },
        "fits": fits,
        "headroom_bytes": headroom,
        "max_concurrent_sequences": decode_fit["max_concurrent_sequences"],
        "communication_seconds": total_comm,
        "exposed_communication_seconds": total_comm,
        "compute_seconds": None,
        "ttft_seconds": None,
        "tpot_memory_floor_seconds": None,
        "tpot_seconds": None,
        "step_seconds": None,
        "calibration": rates.label(("kernels.optimizer_bytes_per_param", "kernels.sharded_layer_overhead_us")),
    }
    if rates.what_if:
        out["what_if"] = rates.what_if
    ok = not rates.missing and math.isfinite(prefill_compute) and math.isfinite(decode_compute)
    if ok:
        out["prefill_compute_seconds"] = prefill_compute
        out["compute_seconds"] = prefill_compute + decode_compute * output
        if prefill_comm is not None:
            out["ttft_seconds"] = prefill_compute + prefill_comm
    # The floor reads the weights and the KV cache once per token at the memory's rate: no compute rate needed.
    floor = None if hbm is None else (weights / dtp + batch * kv_decode * context) / hbm
    if floor is not None and decode_comm is not None:
        out["tpot_memory_floor_seconds"] = floor + decode_comm
    if floor is not None and decode_comm is not None and ok:
        out["tpot_seconds"] = decode_compute + decode_comm + rates.decode_step_overhead_s
        out["tpot_bound"] = "memory" if floor * 1.0 >= 0.5 * decode_compute else "compute"
        out["tokens_per_second_per_group"] = batch / out["tpot_seconds"]
    if out["ttft_seconds"] is not None and out["tpot_seconds"] is not None:
        out["step_seconds"] = out["ttft_seconds"] + output * out["tpot_seconds"]
    out.update(_common(acc, missing, assumptions))
    return out


def _unknown_phases(phases: list[Any], missing: list[str]) -> list[str]:
    """The phases whose time is unknown, each named in `missing` with its reason; a total that would add them is
    reported as unknown (None), never as the sum of the others."""
    out = [p for p in phases if p.total_seconds is None]
    missing += [
        f"{p.unknown}; every total that adds phase {p.phase} is unknown (null), never the sum of the other phases"
        for p in out
    ]
    return [p.phase for p in out]


def _common(acc: Accelerator, missing: list[str], assumptions: list[str]) -> dict[str, Any]:
    return {
        "accelerator_reference": acc.reference_id,
        "accelerator_fields": acc.lineage(),
        "missing": sorted(set(missing)),
        "assumptions": assumptions,
    }


def fit_verdict(st: dict[str, Any]) -> str:
    """One sentence beside a workload's times: does the layout fit, by how much, and if not, that the times are
    for a layout that cannot run as declared (a workload that does not fit is never costed silently)."""
    per_rank, capacity = st.get("memory_per_rank_bytes"), st.get("memory", {}).get("accelerator_memory_bytes")
    ref = st.get("accelerator_reference", "?")
    need = "unknown" if per_rank is None else format_quantity(per_rank, "B")
    have = "an unknown amount" if capacity is None else format_quantity(capacity, "B")
    usable = st.get("memory", {}).get("usable_memory_bytes")
    if usable is not None and capacity is not None and usable < capacity:
        kept = format_count(100 * (1 - usable / capacity))
        have = f"{format_quantity(usable, 'B')} usable ({kept} % of {format_quantity(capacity, 'B')} kept free)"
    head = f"Memory per rank {need} against {have} of accelerator memory ({ref} accelerator.memory): "
    if st.get("fits") is True:
        return head + f"fits, {format_quantity(st['headroom_bytes'], 'B')} of headroom."
    if st.get("fits") is False:
        return head + (
            f"DOES NOT FIT ({format_quantity(-st['headroom_bytes'], 'B')} short); the times are for a layout that "
            "cannot run as declared."
        )
    missing = "; ".join(m for m in st.get("missing", []) if "memory" in m) or "an input is unknown"
    return head + f"fit unknown ({missing})."


def estimate(
    w: Any, phases: list[Any], acc: Accelerator, rates: throughput.Rates, memory_headroom: float = 0.0
) -> dict[str, Any]:
    """Memory fit and step time (TTFT / TPOT for a service) from the accelerator's calibrated rates (`rates_for`),
    the fit keeping `memory_headroom` of the accelerator memory free (params.yaml `step.memory_headroom`, checked
    where it is read: choices.py)."""
    kind = training if w.kind == "training" else inference
    out = kind(w, phases, acc, rates, memory_headroom)
    if w.teaching:
        out["teaching"] = w.teaching
    return out
