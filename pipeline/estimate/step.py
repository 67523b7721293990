"""Does a workload fit, and how long is a step or a token: memory per rank against the registry's accelerator
memory, compute at the registry's peak × a labelled MFU, and the communication phases that stay exposed.

A figure that needs a registry field no source states is `unknown`, and the output names the field it lacked:
never a made-up number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core import confidence as rule
from ..core.units import convert
from ..errors import UsageError
from . import compute, memory, sizing

# Registry fields the estimate reads, and the unit it wants each in.
ACCELERATOR_FIELDS = {
    "accelerator.memory": "B",
    "accelerator.memory_bandwidth": "B/s",
    "accelerator.peak_dense_bf16": "FLOP/s",
    "accelerator.peak_dense_fp8": "FLOP/s",
}
PEAK_FIELD = {"bf16": "accelerator.peak_dense_bf16", "fp8": "accelerator.peak_dense_fp8"}


class _FactLike(Protocol):
    value: float | None
    unit: str | None
    status: str
    note: str
    confidence: str


class _FactsLike(Protocol):
    reference_id: str

    def get(self, key: str, required: bool = True) -> _FactLike: ...


@dataclass(frozen=True)
class AccField:
    key: str
    value: float | None  # in the unit of ACCELERATOR_FIELDS[key]
    status: str
    reason: str = ""
    confidence: str = ""  # of the registry field; by the one rule from the status when not given

    def __post_init__(self) -> None:
        if not self.confidence:
            object.__setattr__(self, "confidence", rule.of_status(self.status))


@dataclass
class Accelerator:
    reference_id: str
    fields: dict[str, AccField]

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


def accelerator(facts: _FactsLike) -> Accelerator:
    """The accelerator fields of a reference, converted to base units; unknown ones kept with their reason."""
    out = {}
    for key, unit in ACCELERATOR_FIELDS.items():
        f = facts.get(key, required=False)
        value = None if f.value is None else convert(f.value, f.unit or unit, unit)
        out[key] = AccField(key, value, f.status, "" if f.value is not None else f.note, f.confidence)
    return Accelerator(facts.reference_id, out)


@dataclass
class _Comm:
    exposed: float = 0.0
    dp: float = 0.0
    dp_last_bucket: float = 0.0
    by_phase: dict[str, float] = field(default_factory=dict)


def _heads(m: Any, assumptions: list[str]) -> int:
    heads = m.get("heads")
    if heads:
        return int(heads)
    assumptions.append("attention heads = hidden / head_dim (the workload does not state them)")
    return int(m["hidden"] // m["head_dim"])


def _experts(m: Any, missing: list[str]) -> tuple[float | None, float | None]:
    """(expert weights, active parameters): all weights are active for a dense model."""
    e = m.get("experts")
    if not e:
        return 0.0, float(m["params"])
    expert_params = e.get("params")
    if expert_params is None:
        missing.append("model.experts.params (the weights held in experts) is not stated by the workload")
        return None, None
    active = m["params"] - expert_params + expert_params * e["top_k"] / e["count"]
    return float(expert_params), float(active)


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


def training(w: Any, phases: list[Any], acc: Accelerator, mfu: float, memory_headroom: float = 0.0) -> dict[str, Any]:
    m, t = w.model, w.training
    missing: list[str] = []
    assumptions: list[str] = []
    tp, pp, dp, ep = t["tp"], t["pp"], t["dp"], t.get("ep", 1)
    zero = t.get("zero", 3 if t.get("sharded") else 0)
    heads = _heads(m, assumptions)
    sp = t.get("sequence_parallel")
    recompute = t.get("recompute")
    if sp is None:
        sp = tp > 1
        if tp > 1:
            assumptions.append("sequence parallelism with TP (not declared by the workload)")
    if recompute is None:
        recompute = "selective"
        assumptions.append(
            "selective activation recompute (not declared by the workload; Korthikanti et al.'s recommended setting)"
        )
    expert_params, active = _experts(m, missing)
    state = act = None
    if expert_params is not None:
        state = memory.training_state(
            m["params"], t.get("optimizer_layout", "mixed-adam"), dp=dp, zero=zero, tp=tp, pp=pp,
            expert_params=expert_params, ep=ep,
        )  # fmt: skip
        act = memory.activations_per_rank(
            t["seq_len"], t["micro_batch"], m["hidden"], heads, m["layers"], tp=tp, pp=pp,
            microbatches=t["microbatches"], sequence_parallel=sp, recompute=recompute,
        )  # fmt: skip
    per_rank = None if state is None or act is None else state["bytes"] + act["bytes"]
    capacity = acc.value("accelerator.memory", missing)
    usable = _usable(capacity, memory_headroom, assumptions)
    fits, headroom = _fits(per_rank, usable)

    comm = _Comm()
    unknown = _unknown_phases(phases, missing)
    for p in phases:
        if p.total_seconds is None:
            continue
        comm.by_phase[p.phase] = p.total_seconds
        if p.phase.startswith("dp-"):
            if not comm.dp:
                share = min(1.0, compute.DP_BUCKET_BYTES / p.bytes_per_rank) if p.bytes_per_rank else 1.0
                comm.dp_last_bucket = p.latency_s + (p.bandwidth_s + p.queueing_s) * share
            comm.dp += p.total_seconds
        else:
            comm.exposed += p.total_seconds
    tokens = t["micro_batch"] * t["microbatches"] * t["seq_len"] * dp
    flops = None
    if active is not None:
        flops = compute.training_flops_per_token(active, m["layers"], heads, m["head_dim"], t["seq_len"]) * tokens
    peak_key = PEAK_FIELD.get(m["dtype"])
    peak = acc.value(peak_key, missing) if peak_key else None
    if peak_key is None:
        missing.append(f"no registry field holds the peak {m['dtype']} throughput")
    out: dict[str, Any] = {
        "kind": "training",
        "memory_per_rank_bytes": per_rank,
        "memory": {
            "state": state,
            "activations": act,
            "accelerator_memory_bytes": capacity,
            "usable_memory_bytes": usable,
            "zero": zero,
        },
        "fits": fits,
        "headroom_bytes": headroom,
        "tokens_per_step": tokens,
        "flops_per_step": flops,
        "communication_seconds": None if unknown else sum(comm.by_phase.values()),
        # Known without the compute time: TP, EP and PP transfers and the last DP bucket never hide.
        "exposed_communication_at_least_seconds": None if unknown else comm.exposed + min(comm.dp_last_bucket, comm.dp),
        "compute_seconds": None,
        "bubble_seconds": None,
        "exposed_communication_seconds": None,
        "step_seconds": None,
    }
    if flops is not None and peak is not None and not unknown:
        c = compute.compute_seconds(flops, tp * pp * dp, peak, mfu)
        s = compute.training_step(
            c,
            pp=pp,
            microbatches=t["microbatches"],
            exposed_seconds=comm.exposed,
            dp_seconds=comm.dp,
            dp_last_bucket_seconds=comm.dp_last_bucket,
            dp_overlap_window_seconds=c if zero == 3 else None,
        )
        out.update(s)
        assumptions.append(compute.DP_BUCKET_SOURCE)
    out.update(_common(acc, missing, assumptions, mfu))
    return out


def inference(w: Any, phases: list[Any], acc: Accelerator, mfu: float, memory_headroom: float = 0.0) -> dict[str, Any]:
    m, i = w.model, w.inference
    missing: list[str] = []
    assumptions: list[str] = []
    heads = _heads(m, assumptions)
    _, active = _experts(m, missing)
    dtype = sizing.dtype_bytes(m["dtype"])
    weights = m["params"] * dtype
    batch, prompt, output = i.get("batch", 1), i["prompt_tokens"], i["output_tokens"]
    if i["mode"] == "aggregated":
        ptp = dtp = i.get("tp", 1)
    else:
        ptp, dtp = i.get("prefill_tp", 1), i.get("decode_tp", 1)
    capacity = acc.value("accelerator.memory", missing)
    usable = _usable(capacity, memory_headroom, assumptions)
    kv_decode = memory.kv_bytes_per_token_per_rank(m["layers"], m["kv_heads"], m["head_dim"], dtype, dtp)
    kv_prefill = memory.kv_bytes_per_token_per_rank(m["layers"], m["kv_heads"], m["head_dim"], dtype, ptp)
    decode_fit = memory.inference_fit(weights, kv_decode, prompt + output, dtp, usable, batch)
    prefill_fit = memory.inference_fit(weights, kv_prefill, prompt, ptp, usable, batch)
    per_rank = max(decode_fit["bytes"], prefill_fit["bytes"])
    fits, headroom = _fits(per_rank, usable)

    unknown = _unknown_phases(phases, missing)
    by_phase = {p.phase: p.total_seconds for p in phases}
    # TTFT counts the prefill all-reduces and the KV transfer, TPOT the decode all-reduces; the client's
    # frontend transfer is part of neither (nor of the request time built from them).
    needed = [by_phase.get(k, 0.0) for k in ("prefill-tp-all-reduce", "kv-transfer", "decode-tp-all-reduce")]
    if None in needed:
        prefill_comm = decode_comm = None
    else:
        prefill_comm = by_phase.get("prefill-tp-all-reduce", 0.0) + by_phase.get("kv-transfer", 0.0)
        decode_comm = by_phase.get("decode-tp-all-reduce", 0.0) / output
    total_comm = None if unknown else sum(t for t in by_phase.values() if t is not None)
    if unknown and prefill_comm is not None:
        assumptions.append(
            f"TTFT, TPOT and the request time (step_seconds) do not include {', '.join(unknown)}: they are costed "
            "without it; communication_seconds, which adds every phase, is unknown"
        )
    peak_key = PEAK_FIELD.get(m["dtype"])
    peak = acc.value(peak_key, missing) if peak_key else None
    if peak_key is None:
        missing.append(f"no registry field holds the peak {m['dtype']} throughput")
    hbm = acc.value("accelerator.memory_bandwidth", missing)
    # Decode attends, on average over the generation, to the prompt and half the output.
    context = prompt + output // 2
    assumptions.append(f"decode reads the KV cache of prompt + output/2 = {context} tokens per sequence (average)")
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
    }
    decode_compute = prefill_compute = None
    if active is not None and peak is not None:
        prefill_flops = (
            batch * prompt * compute.forward_flops_per_token(active, m["layers"], heads, m["head_dim"], prompt)
        )
        prefill_compute = compute.compute_seconds(prefill_flops, ptp, peak, mfu)
        decode_flops = batch * compute.forward_flops_per_token(active, m["layers"], heads, m["head_dim"], context)
        decode_compute = compute.compute_seconds(decode_flops, dtp, peak, mfu)
        out["ttft_seconds"] = None if prefill_comm is None else prefill_compute + prefill_comm
        out["compute_seconds"] = prefill_compute + decode_compute * output
    if hbm is not None and decode_comm is not None:
        # Every rank reads its weights; a mixture of experts may skip cold experts (not modelled: all are read).
        d = compute.decode_token(
            weights_per_rank_bytes=weights / dtp,
            kv_read_per_rank_bytes=batch * kv_decode * context,
            hbm_bytes_per_second=hbm,
            communication_seconds=decode_comm,
            compute=decode_compute,
        )
        out["tpot_memory_floor_seconds"] = d["memory_seconds"] + decode_comm
        if decode_compute is not None:
            out["tpot_seconds"] = d["tpot_seconds"]
            out["tpot_bound"] = d["bound"]
    if out["ttft_seconds"] is not None and out["tpot_seconds"] is not None:
        out["step_seconds"] = out["ttft_seconds"] + output * out["tpot_seconds"]
    out.update(_common(acc, missing, assumptions, mfu))
    return out


def _unknown_phases(phases: list[Any], missing: list[str]) -> list[str]:
    """The phases whose time is unknown, each named in `missing` with its reason; a total that would add them is
    reported as unknown (None), never as the sum of the others."""
    out = [p.phase for p in phases if p.total_seconds is None]
    for p in phases:
        if p.total_seconds is None:
            missing.append(
                f"{p.unknown}; every total that adds phase {p.phase} is unknown (null), never the sum of the "
                "other phases"
            )
    return out


def _common(acc: Accelerator, missing: list[str], assumptions: list[str], mfu: float) -> dict[str, Any]:
    return {
        "accelerator_reference": acc.reference_id,
        "accelerator_fields": acc.lineage(),
        "mfu": mfu,
        "mfu_source": compute.mfu_source(mfu),
        "missing": sorted(set(missing)),
        "assumptions": assumptions,
    }


def fit_verdict(st: dict[str, Any]) -> str:
    """One sentence beside a workload's times: does the layout fit, by how much, and if not, that the times are
    for a layout that cannot run as declared (a workload that does not fit is never costed silently)."""
    per_rank, capacity = st.get("memory_per_rank_bytes"), st.get("memory", {}).get("accelerator_memory_bytes")
    ref = st.get("accelerator_reference", "?")
    need = "unknown" if per_rank is None else f"{per_rank / 1e9:.1f} GB"
    have = "an unknown amount" if capacity is None else f"{capacity / 1e9:.1f} GB"
    usable = st.get("memory", {}).get("usable_memory_bytes")
    if usable is not None and capacity is not None and usable < capacity:
        have = f"{usable / 1e9:.1f} GB usable ({1 - usable / capacity:.0%} of {capacity / 1e9:.1f} GB kept free)"
    head = f"Memory per rank {need} against {have} of accelerator memory ({ref} accelerator.memory): "
    if st.get("fits") is True:
        return head + f"fits, {st['headroom_bytes'] / 1e9:.1f} GB of headroom."
    if st.get("fits") is False:
        return head + (
            f"DOES NOT FIT ({-st['headroom_bytes'] / 1e9:.1f} GB short); the times are for a layout that cannot "
            "run as declared."
        )
    missing = "; ".join(m for m in st.get("missing", []) if "memory" in m) or "an input is unknown"
    return head + f"fit unknown ({missing})."


def estimate(
    w: Any, phases: list[Any], acc: Accelerator, mfu: float, memory_headroom: float = 0.0, mfu_where: str = ""
) -> dict[str, Any]:
    """Memory fit and step time at `mfu` (params.yaml `step.mfu`, or given), the fit keeping `memory_headroom` of
    the accelerator memory free (params.yaml `step.memory_headroom`; 0: all of it usable). `mfu_where` labels an
    MFU that did not come from params.yaml (e.g. "--mfu on the command line")."""
    compute.check_mfu(mfu)
    if not 0 <= memory_headroom < 1:
        raise UsageError(f"memory headroom is a fraction of accelerator memory in [0, 1), got {memory_headroom!r}")
    kind = training if w.kind == "training" else inference
    out = kind(w, phases, acc, mfu, memory_headroom)
    if mfu_where:
        out["mfu_source"] = compute.mfu_source(mfu, mfu_where)
    return out
