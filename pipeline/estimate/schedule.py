"""Pipeline schedules: which layers sit on which rank, how long a step of `m` micro-batches takes from the
per-stage times, and how many micro-batches' activations a rank holds at once.

1F1B (Narayanan et al., SC21, section 2.2.1): after a warm-up of p − 1 − r forwards, rank r alternates one forward
and one backward, so it holds min(m, p − r) micro-batches' activations; the bubble is (p − 1)/m of the ideal time.
Interleaved (section 2.2.2): each rank holds v chunks of its layers; the bubble shrinks to (p − 1)/(v·m) and the
warm-up grows to 2(p − 1 − r) + (v − 1)·p chunk forwards (Megatron-LM's schedule), capped by the m·v a step has.
Layers need not divide p: the first and last ranks, which also run the embedding and the loss, take the fewer
(Llama 3, arXiv 2407.21783, section 3.3.2, balances 126 layers on 16 ranks this way).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError


def stage_layers(layers: int, pp: int, declared: list[int] | None = None) -> list[int]:
    """Transformer layers per pipeline rank: as declared, or as even as possible with the remainder on the middle
    ranks, so the ranks that also hold the embedding (first) and the loss (last) have the fewer."""
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
    """Time of one step from each rank's forward + backward time for one micro-batch. The slowest rank sets the
    steady state (m of its micro-batches); the fill and drain add the other ranks' time once, divided by v when the
    schedule is interleaved: T = m·max(t) + (Σt − max t)/v. With equal stages this is (m + (p − 1)/v)·t, the
    bubble (p − 1)/(v·m) of Narayanan et al."""
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
    """Micro-batches' worth of the rank's layers whose activations rank `rank` holds at the peak of a step:
    1F1B min(m, p − r); interleaved (chunks of 1/v of the rank's layers) min(m·v, 2(p − 1 − r) + (v − 1)·p + 1)
    chunk activations, i.e. that over v micro-batches' worth."""
    if pp == 1:
        return 1.0
    if virtual_stages == 1:
        return float(min(microbatches, pp - rank))
    v = virtual_stages
    chunks = min(microbatches * v, 2 * (pp - 1 - rank) + (v - 1) * pp + 1)
    return chunks / v
