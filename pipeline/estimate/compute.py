"""The step model's constants and checks that are not FLOPs or memory: the gradient bucket that never hides
behind compute, and the bounds of a given MFU."""

from __future__ import annotations

from ..errors import UsageError
from .memory import check_number

# PyTorch DistributedDataParallel's default gradient bucket (bucket_cap_mb = 25): the last bucket's all-reduce
# starts only when the backward pass ends, so it can never hide behind compute.
DP_BUCKET_BYTES = 25e6
DP_BUCKET_SOURCE = "assumed: 25 MB gradient buckets (PyTorch DistributedDataParallel's default bucket_cap_mb)"


def check_mfu(mfu: float) -> float:
    check_number(mfu, "mfu", strict=True)
    if mfu > 1:
        raise UsageError(f"mfu is a fraction of peak in (0, 1], got {mfu!r}")
    return mfu
