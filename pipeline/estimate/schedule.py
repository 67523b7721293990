"""Pipeline schedules (Narayanan et al., SC21, 2.2): layers per rank, a step's time from per-stage times, and the
micro-batches' activations a rank holds at once. 1F1B: rank r holds min(m, p − r), bubble (p − 1)/m; interleaved
(v chunks per rank): bubble (p − 1)/(v·m), warm-up 2(p − 1 − r) + (v − 1)·p chunk forwards, at most m·v.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError


def stage_layers(layers: int, pp: int, declared: list[int] | None = None) -> list[int]:
    """Transformer layers per pipeline rank: as declared, or as even as possible with the remainder on the middle
    ranks, so the first and last (embedding, loss) have the fewer (as Llama 3, arXiv 2407.21783, 3.3.2)."""
    if declared is not None:
        if len(declared) != pp or sum(declared) != layers:
            raise UsageError(f"stage_layers {declared} must list {pp} ranks adding up to {layers} layers")
        return list(declared)
    if pp > layers:
        raise UsageError(f"{pp} pipeline stages for {layers} layers: every stage needs at least one layer")
    base, extra = divmod(layers, pp)
    out = [base] * pp
    # Spread the extra layers over the middle ranks first, the ends last.
    order = sorted(range(pp), key=lambda r: (r in (0, pp - 1), abs(r - (pp - 1) / 2)))
    for r in order[:extra]:
        out[r] += 1
    return out


@dataclass(frozen=True)
class PipelineTime:
    seconds: float
    bubble_seconds: float
    bubble_fraction: float  # of the ideal (no-bubble) time
    slowest_stage: int
    formula: str


def step_time(stage_seconds: list[float], microbatches: int, virtual_stages: int = 1) -> PipelineTime:
    """Time of one step from each rank's forward + backward time per micro-batch: T = m·max(t) + (Σt − max t)/v (the
    slowest rank's steady state, the others' fill and drain once)."""
    if microbatches < 1 or virtual_stages < 1:
        raise UsageError("microbatches and virtual_stages must be ≥ 1")
    p = len(stage_seconds)
    slow = max(range(p), key=lambda r: stage_seconds[r])
    t_max = stage_seconds[slow]
    fill = (sum(stage_seconds) - t_max) / virtual_stages
    ideal = microbatches * t_max
    v = virtual_stages
    formula = f"m·max(t) + (Σt − max t)/v with m={microbatches}, p={p}" + (f", v={v}" if v > 1 else "")
    return PipelineTime(ideal + fill, fill, fill / ideal if ideal else 0.0, slow, formula)


def in_flight(pp: int, microbatches: int, virtual_stages: int, rank: int) -> float:
    """Micro-batches' worth of activations rank `rank` holds at a step's peak: 1F1B min(m, p − r); interleaved
    min(m·v, 2(p − 1 − r) + (v − 1)·p + 1) chunks of 1/v."""
    if pp == 1:
        return 1.0
    if virtual_stages == 1:
        return float(min(microbatches, pp - rank))
    v = virtual_stages
    chunks = min(microbatches * v, 2 * (pp - 1 - rank) + (v - 1) * pp + 1)
    return chunks / v
