"""Compute time and step time: FLOPs per step and per token, and how much communication hides behind compute.

FLOPs follow the PaLM paper's model-FLOPs convention (Chowdhery et al. 2022, Appendix B): per trained token
6·N + 12·L·H·Q·T (N parameters — the active ones for a mixture of experts —, L layers, H query heads of Q
dimensions, T the sequence length); a forward pass is a third of that, 2·N + 4·L·H·Q·T per token.
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from .memory import check_degree, check_number

# PyTorch DistributedDataParallel's default gradient bucket (bucket_cap_mb = 25): the last bucket's all-reduce
# starts only when the backward pass ends, so it can never hide behind compute.
DP_BUCKET_BYTES = 25e6
DP_BUCKET_SOURCE = "assumed: 25 MB gradient buckets (PyTorch DistributedDataParallel's default bucket_cap_mb)"


def training_flops_per_token(active_params: float, layers: int, heads: int, head_dim: int, seq: int) -> float:
    """6·N + 12·L·H·Q·T: forward and backward of the weights, plus attention over the sequence."""
    check_number(active_params, "active params", strict=True)
    for name, value in (("layers", layers), ("heads", heads), ("head dim", head_dim), ("seq", seq)):
        check_degree(value, name)
    return 6.0 * active_params + 12.0 * layers * heads * head_dim * seq


def forward_flops_per_token(active_params: float, layers: int, heads: int, head_dim: int, context: int) -> float:
    """2·N + 4·L·H·Q·T: one forward pass of one token attending over `context` tokens (2·N with no context)."""
    check_number(active_params, "active params", strict=True)
    for name, value in (("layers", layers), ("heads", heads), ("head dim", head_dim)):
        check_degree(value, name)
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise UsageError(f"context must be a whole number ≥ 0, got {context!r}")
    return 2.0 * active_params + 4.0 * layers * heads * head_dim * context


def compute_seconds(flops: float, accelerators: int, peak_flops_per_second: float, mfu: float) -> float:
    """FLOPs spread evenly over the accelerators, each running at peak × MFU."""
    check_number(flops, "flops")
    check_degree(accelerators, "accelerators")
    check_number(peak_flops_per_second, "peak FLOP/s", strict=True)
    check_mfu(mfu)
    return flops / (accelerators * peak_flops_per_second * mfu)


def check_mfu(mfu: float) -> float:
    check_number(mfu, "mfu", strict=True)
    if mfu > 1:
        raise UsageError(f"mfu is a fraction of peak in (0, 1], got {mfu!r}")
    return mfu


def training_step(
    compute: float,
    *,
    pp: int = 1,
    microbatches: int = 1,
    exposed_seconds: float = 0.0,
    dp_seconds: float = 0.0,
    dp_last_bucket_seconds: float = 0.0,
    dp_overlap_window_seconds: float | None = None,
) -> dict[str, Any]:
    """Step = compute + pipeline bubble + exposed communication.

    The 1F1B bubble is (p − 1)/m of the compute (Narayanan et al. 2021). Tensor-, expert- and pipeline-parallel
    transfers (`exposed_seconds`) sit on the critical path. Data-parallel gradient traffic overlaps the backward
    pass (the window, by default 2/3 of the compute) except its last bucket, so what shows is
    max(last bucket, DP time − window)."""
    check_number(compute, "compute seconds")
    check_degree(pp, "pp")
    check_degree(microbatches, "microbatches")
    for name, value in (
        ("exposed seconds", exposed_seconds),
        ("dp seconds", dp_seconds),
        ("dp last bucket seconds", dp_last_bucket_seconds),
    ):
        check_number(value, name)
    window = compute * 2.0 / 3.0 if dp_overlap_window_seconds is None else dp_overlap_window_seconds
    check_number(window, "dp overlap window")
    bubble = compute * (pp - 1) / microbatches
    dp_exposed = 0.0 if dp_seconds == 0 else max(min(dp_last_bucket_seconds, dp_seconds), dp_seconds - window)
    exposed = exposed_seconds + dp_exposed
    return {
        "compute_seconds": compute,
        "bubble_seconds": bubble,
        "bubble_fraction": (pp - 1) / microbatches,
        "dp_seconds": dp_seconds,
        "dp_exposed_seconds": dp_exposed,
        "dp_hidden_seconds": dp_seconds - dp_exposed,
        "exposed_communication_seconds": exposed,
        "step_seconds": compute + bubble + exposed,
    }


def decode_token(
    *,
    weights_per_rank_bytes: float,
    kv_read_per_rank_bytes: float,
    hbm_bytes_per_second: float,
    communication_seconds: float = 0.0,
    compute: float | None = None,
) -> dict[str, Any]:
    """Time per output token: every decode step reads the rank's weights and the KV cache it attends over from
    HBM, so TPOT ≥ bytes ÷ memory bandwidth; it is the larger of that and the compute, plus the decode
    communication that cannot overlap (TP all-reduces sit between the layers)."""
    check_number(weights_per_rank_bytes, "weights bytes per rank")
    check_number(kv_read_per_rank_bytes, "KV bytes read per rank")
    check_number(hbm_bytes_per_second, "memory bandwidth", strict=True)
    check_number(communication_seconds, "decode communication seconds")
    memory = (weights_per_rank_bytes + kv_read_per_rank_bytes) / hbm_bytes_per_second
    bound = "memory" if compute is None or memory >= compute else "compute"
    return {
        "memory_seconds": memory,
        "compute_seconds": compute,
        "communication_seconds": communication_seconds,
        "bound": bound,
        "tpot_seconds": max(memory, compute or 0.0) + communication_seconds,
    }
