"""The arithmetic engineers do before any network model: memory, KV cache, fleet capacity."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UsageError

# Bytes per parameter of a training layout, split the way ZeRO partitions them: (weights, gradients, optimizer
# states, what they are); the fp32 master copy is a weight copy, but ZeRO partitions it with the optimizer.
TRAINING_LAYOUTS: dict[str, tuple[float, float, float, str]] = {
    "mixed-adam": (
        2.0,
        4.0,
        12.0,
        "6 B weight copies (bf16 + fp32 master) + 4 B fp32 gradients + 8 B fp32 Adam moments",
    ),
    "mixed-adam-16": (
        2.0,
        2.0,
        12.0,
        "16 B/param (ZeRO paper): 2 B fp16 weights + 2 B fp16 gradients + 12 B optimizer "
        "(fp32 master 4 + momentum 4 + variance 4)",
    ),
}
# Bytes per parameter of a weights-only layout.
LAYOUTS: dict[str, tuple[float, str]] = {
    "bf16-weights": (2.0, "bf16 weights only (inference)"),
    "fp8-weights": (1.0, "fp8 weights only (inference)"),
    "fp32-weights": (4.0, "fp32 weights only"),
    "int4-weights": (0.5, "4-bit weights only (inference)"),
}
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


def check_layout(layout: str) -> None:
    if layout not in TRAINING_LAYOUTS and layout not in LAYOUTS:
        raise UsageError(f"unknown layout {layout!r}: expected one of {', '.join([*TRAINING_LAYOUTS, *LAYOUTS])}")


def memory(params: float, layout: str) -> dict[str, object]:
    check_layout(layout)
    if params <= 0:
        raise UsageError("params must be positive")
    if layout in TRAINING_LAYOUTS:
        *split, why = TRAINING_LAYOUTS[layout]
        per = sum(split)
    else:
        per, why = LAYOUTS[layout]
    return {"params": params, "layout": layout, "bytes_per_param": per, "bytes": params * per, "breakdown": why}


def dtype_bytes(dtype: str) -> float:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise UsageError(f"unknown dtype {dtype!r}: expected one of {', '.join(DTYPE_BYTES)}") from None


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, element_bytes: float, tp: int = 1) -> float:
    """K and V of one token on one of `tp` ranks: 2 × layers × kv_heads × head_dim × bytes. KV heads, not query
    heads (GQA), split over TP; when TP exceeds them each rank keeps (at least) one head, replicated."""
    return 2.0 * layers * math.ceil(kv_heads / tp) * head_dim * element_bytes


def kv_cache(layers: int, kv_heads: int, head_dim: int, dtype: str, tokens: int) -> dict[str, object]:
    if min(layers, kv_heads, head_dim) < 1 or tokens < 0:
        raise UsageError("layers, kv-heads and head-dim must be positive and tokens non-negative")
    per_token = kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes(dtype))
    return {"bytes_per_token": per_token, "tokens": tokens, "bytes": per_token * tokens}


@dataclass(frozen=True, kw_only=True)
class Capacity:
    demand_tokens_per_second: float
    groups: int
    accelerators: int
    headroom: float


def capacity(
    requests_per_second: float,
    output_tokens: float,
    group_tokens_per_second: float,
    group_size: int,
    headroom: float = 0.0,
) -> Capacity:
    """Groups needed to sustain the demand: ceil(R × T × (1 + headroom) / G)."""
    if requests_per_second < 0 or output_tokens < 0 or group_tokens_per_second <= 0 or group_size < 1:
        raise UsageError("rates and tokens must be non-negative, group throughput positive, group size ≥ 1")
    if headroom < 0:
        raise UsageError("headroom must be non-negative (0.2 means 20 % spare)")
    demand = requests_per_second * output_tokens
    groups = math.ceil(demand * (1 + headroom) / group_tokens_per_second - 1e-9)
    return Capacity(demand_tokens_per_second=demand, groups=groups, accelerators=groups * group_size, headroom=headroom)
