"""Memory per rank: does a parallel layout fit in the accelerators' memory? Pure arithmetic, sources named:
model state under mixed-precision Adam partitioned by ZeRO stage (Rajbhandari et al., SC20); activations per
layer after Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (MLSys 2023),
Table 2; the KV cache of inference and the concurrent sequences a tensor-parallel group can hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import UsageError
from . import sizing
from .flops import RECOMPUTE, Shape

ZERO_STAGES = {
    0: "no partitioning (plain data parallel): every replica holds the whole state",
    1: "ZeRO-1: optimizer states partitioned over the data-parallel degree",
    2: "ZeRO-2: optimizer states and gradients partitioned",
    3: "ZeRO-3 / FSDP: optimizer states, gradients and weights partitioned",
}


def check_number(value: float, what: str, *, minimum: float = 0.0, strict: bool = False) -> float:
    """Refuse NaN, infinities and values below the minimum with a message naming the input."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{what} must be a number, got {value!r}")
    if math.isnan(value) or math.isinf(value):
        raise UsageError(f"{what} must be a finite number, got {value!r}")
    if value < minimum or (strict and value == minimum):
        raise UsageError(f"{what} must be {'>' if strict else '≥'} {minimum:g}, got {value!r}")
    return float(value)


def plain(name: str) -> str:
    """An argument as a library message names it: `expert_params` → 'expert params'."""
    return name.replace("_", " ")


def flag(name: str) -> str:
    """An argument as the CLI's option: `expert_params` → '--expert-params'."""
    return "--" + name.replace("_", "-")


def check_degree(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what} must be a whole number ≥ 1, got {value!r}")
    return value


def _shard(params: float, layout: str, zero: int, dp: int) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states) one rank holds of `params`, ZeRO partitioning over `dp`."""
    w, g, o = sizing.TRAINING_LAYOUTS[layout][:3]
    return (
        params * w / (dp if zero >= 3 else 1),
        params * g / (dp if zero >= 2 else 1),
        params * o / (dp if zero >= 1 else 1),
    )


def training_state(
    params: float,
    layout: str = "mixed-adam",
    *,
    dp: int = 1,
    zero: int = 0,
    tp: int = 1,
    pp: int = 1,
    expert_params: float = 0.0,
    ep: int = 1,
    names: Callable[[str], str] = plain,
) -> dict[str, Any]:
    """Model state per rank. Dense weights split over TP × PP, expert weights over EP × PP (whole experts, not
    split by TP), each partitioned by ZeRO over its replicas: DP for dense, TP × DP / EP for expert weights
    (embeddings count as dense). A weights-only layout (`sizing.LAYOUTS`) splits over TP × PP only. `names`: what
    an error calls an argument (`flag` for the CLI's options)."""
    sizing.check_layout(layout)
    check_number(params, names("params"), strict=True)
    check_number(expert_params, names("expert_params"))
    for name, value in (("dp", dp), ("tp", tp), ("pp", pp), ("ep", ep)):
        check_degree(value, names(name))
    if layout not in sizing.TRAINING_LAYOUTS:
        if zero or expert_params or dp != 1 or ep != 1:
            unused = ", ".join(names(k) for k in ("dp", "zero", "ep", "expert_params"))
            raise UsageError(f"{names('layout')} {layout}: weights only; {unused} do not apply")
        data = sizing.memory(params, layout)
        return {**data, "tp": tp, "pp": pp, "total_bytes": data["bytes"], "bytes": data["bytes"] / (tp * pp)}
    if zero not in ZERO_STAGES:
        raise UsageError(f"zero stage must be 0, 1, 2 or 3 (FSDP = 3), got {zero!r}")
    if expert_params > params:
        raise UsageError(f"expert params {expert_params:g} exceed the model's params {params:g}")
    if expert_params and (tp * dp) % ep:
        raise UsageError(f"ep {ep} must divide tp × dp = {tp * dp}")
    dense = _shard((params - expert_params) / (tp * pp), layout, zero, dp)
    expert_dp = max(1, tp * dp // ep)
    experts = _shard(expert_params / (ep * pp), layout, zero, expert_dp)
    weights, gradients, optimizer = (a + b for a, b in zip(dense, experts, strict=True))
    w, g, o, why = sizing.TRAINING_LAYOUTS[layout]
    return {
        "params": params,
        "layout": layout,
        "bytes_per_param": w + g + o,
        "breakdown": why,
        "zero": zero,
        "zero_meaning": ZERO_STAGES[zero],
        "dp": dp,
        "tp": tp,
        "pp": pp,
        "ep": ep,
        "expert_params": expert_params,
        "total_bytes": params * (w + g + o),
        "weights_bytes": weights,
        "gradients_bytes": gradients,
        "optimizer_bytes": optimizer,
        "bytes": weights + gradients + optimizer,
    }


def activations_per_layer(
    seq: int,
    batch: int,
    hidden: int,
    heads: int,
    *,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> dict[str, Any]:
    """Activation bytes one GPT-style layer keeps for the backward pass: `layer_activation_bytes` of the shape of
    Korthikanti et al., Table 2 (MLP 4h, dropout, unfused attention), with their formula. Full recompute keeps
    the layer's 2sbh input whatever t (an implementation sharding it under sequence parallelism keeps less)."""
    for name, value in (("seq", seq), ("batch", batch), ("hidden", hidden), ("heads", heads), ("tp", tp)):
        check_degree(value, name)
    if recompute not in RECOMPUTE:
        raise UsageError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    gpt = Shape(
        hidden=hidden, layers=1, heads=heads, kv_heads=heads, head_dim=hidden / heads, ffn_hidden=4 * hidden,
        gated=False, attention="unfused", dropout=True,
    )  # fmt: skip
    per = layer_activation_bytes(gpt, batch, seq, tp=tp, sequence_parallel=sequence_parallel, recompute=recompute)
    attention = recompute != "selective"
    if recompute == "full":
        formula = "2sbh"
    elif tp == 1 or sequence_parallel:
        formula = ("sbh/t·(34" if tp > 1 else "sbh(34") + (" + 5as/h)" if attention else ")")
    else:
        formula = "sbh(10 + 24/t" + (" + 5as/(ht))" if attention else ")")
    return {
        "seq": seq,
        "batch": batch,
        "hidden": hidden,
        "heads": heads,
        "tp": tp,
        "sequence_parallel": sequence_parallel,
        "recompute": recompute,
        "formula": formula,
        "source": "Korthikanti et al., Reducing Activation Recomputation in Large Transformer Models (MLSys 2023)",
        "bytes_per_layer": per["bytes_per_layer"],
    }


def kv_bytes_per_token_per_rank(layers: int, kv_heads: int, head_dim: int, dtype_bytes: float, tp: int) -> float:
    """`sizing.kv_bytes_per_token`, its inputs checked."""
    for name, value in (("layers", layers), ("kv heads", kv_heads), ("head dim", head_dim), ("tp", tp)):
        check_degree(value, name)
    check_number(dtype_bytes, "bytes per element", strict=True)
    return sizing.kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes, tp)


def inference_fit(
    weights_bytes: float,
    kv_per_token_per_rank: float,
    context_tokens: int,
    tp: int,
    memory_bytes: float | None,
    concurrency: int = 1,
) -> dict[str, Any]:
    """Weights / TP + KV cache of `concurrency` sequences of `context_tokens` on one rank; and how many
    sequences of that context one TP group can hold (None when the accelerator memory is unknown)."""
    check_number(weights_bytes, "weights bytes", strict=True)
    check_number(kv_per_token_per_rank, "KV bytes per token", strict=True)
    check_degree(tp, "tp")
    check_degree(context_tokens, "context tokens")
    check_degree(concurrency, "concurrency")
    weights_per_rank = weights_bytes / tp
    kv_per_sequence = kv_per_token_per_rank * context_tokens
    per_rank = weights_per_rank + kv_per_sequence * concurrency
    out: dict[str, Any] = {
        "weights_per_rank_bytes": weights_per_rank,
        "kv_bytes_per_sequence_per_rank": kv_per_sequence,
        "concurrency": concurrency,
        "context_tokens": context_tokens,
        "bytes": per_rank,
        "max_concurrent_sequences": None,
    }
    if memory_bytes is not None:
        check_number(memory_bytes, "accelerator memory", strict=True)
        out["max_concurrent_sequences"] = max(0, math.floor((memory_bytes - weights_per_rank) / kv_per_sequence))
    return out


def layer_activation_bytes(
    shape: Shape,
    b: int,
    seq: int,
    *,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    moe: bool = False,
    cp: int = 1,
) -> dict[str, Any]:
    """Activation bytes one layer keeps for its backward pass, tensor by tensor (Korthikanti et al., section 4,
    generalised to grouped-query attention, a gated MLP, fused attention and no dropout; for their GPT shape it
    is their Table 2). Selective recompute keeps no s² tensor; full keeps only the layer's input (2sbh). With
    context parallelism `seq` is the rank's 1/cp of the sequence: unfused scores still span all of it."""
    s, t, by = shape, tp, shape.dtype_bytes
    tok = float(b) * seq
    if recompute == "full":
        return {"bytes_per_layer": by * tok * s.hidden, "formula": "2sbh (the layer input only)"}
    rep = tok * s.hidden * (1.0 / t if sequence_parallel else 1.0)  # elements outside the TP-split region
    split_q = tok * s.heads * s.head_dim / t
    split_kv = tok * s.kv_heads * s.head_dim / t
    parts: dict[str, float] = {
        "norm inputs": 2 * by * rep,
        "QKV input": by * rep,
        "Q, K, V": by * (split_q + 2 * split_kv),
        "attention output (projection input)": by * split_q,
    }
    if s.dropout:
        parts["hidden dropout masks"] = 2 * rep  # one byte per element, after attention and after the MLP
    if s.attention == "unfused" and recompute != "selective":
        scores = float(b) * s.heads / t * seq * seq * cp
        parts["softmax output"] = by * scores
        if s.dropout:
            parts["attention dropout mask and output"] = (1 + by) * scores
    elif s.attention == "flash":
        parts["softmax statistics"] = 4.0 * b * s.heads / t * seq
    width = s.expert_ffn_hidden if moe and s.experts else s.ffn_hidden
    routed = tok * (s.top_k if moe and s.experts else 1)
    parts["MLP input"] = by * rep + (by * routed * s.hidden / t if moe and s.experts else 0.0)
    parts["MLP intermediates"] = by * routed * width / t * (3 if s.gated else 2)
    total = sum(parts.values())
    return {"bytes_per_layer": total, "parts": parts, "formula": "tensor by tensor (see parts)"}
