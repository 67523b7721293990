"""One parallel layout evaluated from a cluster summary, without the graph: what the planner (pipeline/plan/) asks
of the traffic library for each of the tens of thousands of layouts it searches.

Two pieces live here rather than in the planner, because they are step-model arithmetic and belong beside it:

* `group_cost`: the analytical per-tier cost of one collective over a group whose shape (ranks per domain,
  domains, tier, the fabric seen there) was placed once on the installed wiring (`calculator.place`) — the
  library's time `cost.library` gives a phase before it is routed, computed from the placed shape alone so that
  layouts sharing a shape share one placement (symmetry) and a Ray worker needs no graph;
* `training`: `step.training` for a layout (schedule, uneven stages, recompute, ZeRO and overlap are the step
  model's), plus context parallelism (CP), which the step model does not express yet.

Context parallelism is costed as the layout the step model knows — TP × PP × (DP·CP) ranks over sequences of
seq/CP (every TP, PP and activation figure of a CP rank is that of a rank holding seq/CP tokens, and Megatron
reduces gradients over DP × CP) — corrected for what that stand-in gets wrong: each rank's queries attend over the
whole sequence (the attention kernels' extra work, at the calibrated attention rate), and the K/V blocks travel
around the CP ring once per layer forward and twice backward (a phase of its own, passed in by the caller, on the
critical path: no overlap with attention is modelled). Both are added to every pipeline stage's time, through the
schedule's own step formula. When the step model gains CP itself, `training` delegates to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from . import collectives, flops, memory
from . import step as step_model
from .collectives import Shape
from .cost import Cost, bytes_by_network, timed, unrouted_terms
from .view import TIER_NAMES

CP_SOURCE = (
    "context parallel CP: costed as TP × PP × (DP·CP) ranks over sequences of seq/CP (gradients reduced over "
    "DP·CP, as Megatron-LM does), each rank's queries attending over the whole sequence (the attention kernels' "
    "extra work at the calibrated attention rate) and its K/V blocks passed around the CP ring once per layer "
    "forward and twice backward (assumed exposed: no overlap with attention modelled)"
)


@dataclass(frozen=True)
class GroupShape:
    """A group placed once on the installed wiring (`calculator.place`): the collective's shape there, the tier
    separating its ranks and the hops of its path. Layouts whose groups have the same shape share it (one cost per
    shape and tier)."""

    shape: Shape
    tier: int  # 0 scale-up domain, 1 one leaf, 2 leaf-spine, 3 spine-core
    hops: int
    send: bool = False  # a two-rank shape for point-to-point messages

    @property
    def ranks(self) -> int:
        return self.shape.ranks

    @property
    def domains(self) -> int:
        return self.shape.domains


def group_cost(calibration: Any, placed: GroupShape, op: str, size: float, concurrent: int = 2) -> Cost:
    """The analytical per-tier cost of `op` over a placed group, as `cost.library` times a phase before routing:
    the algorithm and protocol the library chooses with the fabric's oversubscription shared by every group of
    the phase (a lone send shares nothing), the same algorithm on the fabric alone for the time terms, and the
    difference as queueing."""
    shape, real, free = timed(calibration, op, placed.shape, size, concurrent)
    by_net = bytes_by_network(real)
    network = "scale_up" if shape.domains == 1 else ("scale_out" if shape.local == 1 else "scale_up+scale_out")
    slowest = max(real.stages, key=lambda x: x.bandwidth_seconds, default=None)
    tier = shape.out if shape.domains > 1 else shape.up
    line = tier.bytes_per_s / collectives.GBPS_TO_BYTES if tier is not None else None
    effective = (
        slowest.bytes_per_rank / slowest.bandwidth_seconds / collectives.GBPS_TO_BYTES
        if slowest and slowest.bandwidth_seconds > 0
        else None
    )
    algorithm = "point-to-point" if op == "send" else real.algorithm
    return Cost(
        algorithm=f"{algorithm} / {real.protocol}",
        network=network,
        tier=TIER_NAMES[placed.tier],
        hops=placed.hops,
        bottleneck_gbps=line,
        effective_gbps=effective,
        notes="analytical per-tier cost (the group's shape on the installed wiring; not routed per link)",
        bytes_on_wire_by_network=dict(sorted(by_net.items())),
        **unrouted_terms(shape, real, free),
    )


def _cp_attention_seconds(shape: Any, rates: Any, b: int, sub: int, seq: int, tp: int) -> tuple[float, float]:
    """Extra (forward, backward) seconds per layer and micro-batch when `sub` query tokens attend over the whole
    `seq` (CP) instead of over `sub` (the stand-in): the scores a balanced CP rank computes are (seq/sub) times the
    stand-in's."""
    own = flops._attention_core(shape, b, sub, tp)
    extra = [replace(o, flops=o.flops * (seq / sub - 1), bytes=o.bytes * (seq / sub - 1)) for o in own]
    return rates.seconds(extra), rates.seconds(flops.backward_of(extra))


def training(
    w: Any,
    phases: list[Any],
    acc: step_model.Accelerator,
    rates: Any,
    memory_headroom: float = 0.0,
    *,
    cp: int = 1,
    seq: int | None = None,
) -> dict[str, Any]:
    """`step.training` of `w` (for CP > 1 the stand-in above: `w` holds seq/CP and DP·CP; `seq` is the full
    sequence), with the CP corrections added to every stage's time and to the step."""
    with _memoized():
        st = step_model.training(w, phases, acc, rates, memory_headroom)
    if cp == 1:
        return st
    t = w.training
    seq = seq or t.seq_len * cp
    shape = flops_shape(w.model)
    layers = st["stage_layers"]
    mbs, v = t.microbatches, t.virtual_stages
    fwd, bwd = _cp_attention_seconds(shape, rates, t.micro_batch, t.seq_len, seq, t.tp)
    recompute = st["recompute"]
    # Full recompute repeats the forward; selective repeats the attention core unless a fused kernel already
    # recomputes it inside its backward (flops.recompute_of).
    again = recompute == "full" or (recompute == "selective" and shape.attention != "flash")
    attention = fwd + bwd + (fwd if again else 0.0)
    if shape.attention == "unfused" and recompute == "none":
        # The stand-in keeps (seq/CP)² scores per head; a CP rank keeps (seq/CP) × seq.
        scores = shape.dtype_bytes * t.micro_batch * shape.heads / t.tp * t.seq_len * (seq - t.seq_len)
        scores *= (2 + 1 / shape.dtype_bytes) if shape.dropout else 1.0
        a = st["memory"]["activations"]
        added_bytes = scores * a["layers_on_rank"] * a["microbatches_in_flight"]
        a["bytes"] += added_bytes
        st["memory_per_rank_bytes"] += added_bytes
        usable = st["memory"]["usable_memory_bytes"]
        if usable is not None:
            st["fits"], st["headroom_bytes"] = (
                st["memory_per_rank_bytes"] <= usable,
                usable - st["memory_per_rank_bytes"],
            )
    if st["step_seconds"] is None:
        return st
    ring = sum(p.total_seconds or 0.0 for p in phases if p.phase.startswith("cp-"))
    mean = sum(layers) / len(layers)
    per_layer = attention + (ring / (mbs * mean) if ring else 0.0)  # per micro-batch and layer
    extra = [n * per_layer for n in layers]
    slow = max(range(len(layers)), key=lambda r: layers[r])
    added = mbs * extra[slow] + (sum(extra) - extra[slow]) / v
    st["compute_seconds"] += mbs * layers[slow] * attention
    st["exposed_communication_seconds"] += ring / mean * layers[slow] if ring else 0.0
    st["step_seconds"] += added
    st["bubble_seconds"] += (sum(extra) - extra[slow]) / v
    st["assumptions"].append(CP_SOURCE)
    return st


def flops_shape(model: Any) -> Any:
    """The model's operation-count shape (`flops.from_workload`), computed once per model object."""
    key = id(model)
    found = _SHAPES.get(key)
    if found is None or found[0] is not model:
        found = _SHAPES[key] = (model, flops.from_workload(model))
    return found[1]


_SHAPES: dict[int, tuple[Any, Any]] = {}


# --- Memoized pure functions for a search ---------------------------------------------------------------------
# `step.training` computes the model state and the per-layer activations of every pipeline rank, and the layer's
# operations, afresh: ranks holding the same number of layers repeat the same arithmetic, and the layouts of a
# search repeat the same arguments thousands of times (half of each evaluation's time). While a search evaluates,
# those three pure functions answer from a cache keyed by their arguments (copies of the results, so no caller can
# alter a cached one). Nothing else changes: the values are the functions' own.
_CACHES: dict[str, dict[Any, Any]] = {"state": {}, "activations": {}, "layer": {}}
_ORIGINAL = {
    "state": memory.training_state,
    "activations": memory.layer_activation_bytes,
    "layer": flops.layer,
}
_CACHE_LIMIT = 20_000


def _cached(kind: str, copy: Any) -> Any:
    original, cache = _ORIGINAL[kind], _CACHES[kind]

    def call(*args: Any, **kwargs: Any) -> Any:
        key = (args, tuple(sorted(kwargs.items())))
        found = cache.get(key)
        if found is None:
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            found = cache[key] = original(*args, **kwargs)
        return copy(found)

    return call


_STATE = _cached("state", dict)
_ACTIVATIONS = _cached("activations", lambda r: {**r, "parts": dict(r["parts"])} if "parts" in r else dict(r))
_LAYER = _cached("layer", lambda r: flops.LayerWork(list(r.forward), list(r.backward), list(r.recompute)))


def forget() -> None:
    """Empty the search caches (a benchmark timing a cold search)."""
    for cache in _CACHES.values():
        cache.clear()


@contextlib.contextmanager
def _memoized() -> Iterator[None]:
    """`memory.training_state`, `memory.layer_activation_bytes` and `flops.layer` answered from the caches while
    the block runs (a search evaluates in one thread; another thread calling them meanwhile gets the same values)."""
    memory.training_state, memory.layer_activation_bytes, flops.layer = _STATE, _ACTIVATIONS, _LAYER
    try:
        yield
    finally:
        memory.training_state = _ORIGINAL["state"]
        memory.layer_activation_bytes = _ORIGINAL["activations"]
        flops.layer = _ORIGINAL["layer"]
