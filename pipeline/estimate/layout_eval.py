"""One parallel layout evaluated from a cluster summary, without the graph: what the planner (pipeline/plan/) asks
of the traffic library for each of the tens of thousands of layouts it searches.

Two pieces live here rather than in the planner, because they are step-model arithmetic and belong beside it:

* `group_cost`: the analytical per-tier cost of one collective over a group whose shape (ranks per domain,
  domains, tier, the fabric seen there) was placed once on the installed wiring (`calculator.place`) — the same
  cost `calibrated.collective_cost` gives a phase that is not routed per link, computed from the placed shape
  alone so that layouts sharing a shape share one placement (symmetry) and a Ray worker needs no graph;
* `training`: `step.training` for a layout, plus what the step model does not express yet and a search must not
  ignore, each named in the result's assumptions: the interleaved pipeline schedule (v virtual stages per rank),
  uneven stages (layers need not divide PP: the fullest stage paces the pipeline), the FLOPs that activation
  recompute adds, and context parallelism (CP).

Context parallelism is costed as the layout the step model knows — TP × PP × (DP·CP) ranks over sequences of
seq/CP (every TP, PP and activation figure of a CP rank is that of a rank holding seq/CP tokens, and Megatron
reduces gradients over DP × CP) — corrected for what that stand-in gets wrong: each rank's queries attend over the
whole sequence (attention FLOPs and, without recompute, the attention-score activations × CP), and the K/V blocks
travel around the CP ring once per layer forward and backward (a phase of its own, passed in by the caller).
When the step model gains these itself (issue 27), `training` delegates to it and this shrinks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from . import compute
from . import step as step_model
from .calculator import Placed
from .cost import Cost

# Megatron-LM's interleaved 1F1B (Narayanan et al. SC21, section 2.2.2): bubble (p − 1)/(v·m) of the compute.
INTERLEAVED_SOURCE = (
    "interleaved 1F1B with v virtual stages per rank: bubble (p − 1)/(v·m) of the compute (Narayanan et al., "
    "Efficient Large-Scale Language Model Training on GPU Clusters, SC21, section 2.2.2); the first stage keeps "
    "activations of 1 + (p − 1)/(p·v) times its layers' (Korthikanti et al. 2022, section 4.2.3)"
)
UNEVEN_SOURCE = (
    "uneven stages: layers need not divide PP; the fullest stage (ceil(L/(p·v))·v layers) paces the pipeline, so "
    "the compute is the fullest stage's, p times (the others wait for it)"
)
RECOMPUTE_SOURCE = (
    "activation recompute adds FLOPs (Korthikanti et al. 2022, section 5): full recompute one more forward pass "
    "(2·N + 4·L·H·Q·T per token), selective recompute the attention scores' forward (4·L·H·Q·T per token)"
)
CP_SOURCE = (
    "context parallel CP: costed as TP × PP × (DP·CP) ranks over sequences of seq/CP (gradients reduced over "
    "DP·CP, as Megatron-LM does), with each rank's queries attending over the whole sequence (attention FLOPs × CP) "
    "and its K/V blocks passed around the CP ring once per layer forward and twice backward (assumed exposed: no "
    "overlap with attention modelled)"
)


class _CalibratedView:
    """What `calibrated._cost` reads of a view (the calibration, the topology id): a placed shape is costed without
    the graph it was placed on."""

    def __init__(self, calibration: Any, topology_id: str) -> None:
        self.calibration = calibration
        self.g = _Graph({"topology_id": topology_id})


@dataclass
class _Graph:
    graph: dict[str, str]


@dataclass(frozen=True)
class Shape:
    """A group placed once on the installed wiring: everything its collectives' costs depend on besides the
    operation and the bytes. Layouts whose groups have the same shape share it (one cost per shape and tier)."""

    placed: Placed
    tier: int  # 0 scale-up domain, 1 one leaf, 2 leaf-spine, 3 spine-core
    hops: int
    send: bool = False  # a two-rank shape for point-to-point messages

    @property
    def ranks(self) -> int:
        return self.placed.fabric.ranks

    @property
    def domains(self) -> int:
        return self.placed.fabric.domains


def group_cost(calibration: Any, topology_id: str, shape: Shape, op: str, size: float, concurrent: int = 2) -> Cost:
    """The analytical per-tier cost of `op` over a placed shape, exactly as `calibrated.collective_cost` /
    `send_cost` cost an unrouted phase: the calibrated algorithm and protocol for the size, queueing only where an
    oversubscribed tier is crossed by every group at once (a lone send is not)."""
    from .calibrated import _cost

    view = _CalibratedView(calibration, topology_id)
    placed = shape.placed
    notes: list[str] = []
    if op == "send":
        f = placed.fabric
        if shape.tier != 0 and f.out is not None and concurrent <= 1:
            placed = replace(placed, fabric=replace(f, out=replace(f.out, oversubscription=1.0)))
        notes.append(
            "local: both ends in one scale-up domain"
            if shape.tier == 0
            else "crosses the scale-out fabric: the ends sit in different scale-up domains"
        )
    return _cost(view, placed, op, size, shape.tier, shape.hops, notes)  # type: ignore[arg-type]


def stage_layers(layers: int, pp: int, v: int = 1) -> int:
    """Layers on the fullest pipeline rank: ceil(L / (p·v)) per virtual stage, v virtual stages per rank."""
    return math.ceil(layers / (pp * v)) * v


def bubble_fraction(pp: int, microbatches: int, v: int = 1) -> float:
    """(p − 1)/(v·m): 1F1B at v = 1, interleaved 1F1B with v virtual stages per rank."""
    return (pp - 1) / (v * microbatches)


def activation_factor(pp: int, v: int = 1) -> float:
    """How much more the first stage keeps under the interleaved schedule: 1 + (p − 1)/(p·v) (1 at v = 1)."""
    return 1.0 if v == 1 or pp == 1 else 1.0 + (pp - 1) / (pp * v)


def recompute_flops_per_token(active: float, layers: int, heads: int, head_dim: int, seq: int, mode: str) -> float:
    """FLOPs per token that recompute adds: a forward pass (full) or the attention scores' forward (selective)."""
    attention = 4.0 * layers * heads * head_dim * seq
    if mode == "full":
        return 2.0 * active + attention
    if mode == "selective":
        return attention
    return 0.0


def _comm(phases: list[Any]) -> tuple[float, float, float, dict[str, float], bool]:
    """(exposed non-DP seconds, DP seconds, last DP bucket seconds, seconds by phase, any unknown): the same split
    `step.training` makes (TP, EP, PP and CP transfers on the critical path; DP gradients overlap backward)."""
    exposed = dp = last = 0.0
    by_phase: dict[str, float] = {}
    unknown = False
    for p in phases:
        total = p.total_seconds
        if total is None:
            unknown = True
            continue
        by_phase[p.phase] = total
        if p.phase.startswith("dp-"):
            if not dp:
                share = min(1.0, compute.DP_BUCKET_BYTES / p.bytes_per_rank) if p.bytes_per_rank else 1.0
                last = p.latency_s + (p.bandwidth_s + p.queueing_s) * share
            dp += total
        else:
            exposed += total
    return exposed, dp, last, by_phase, unknown


def training(
    w: Any,
    phases: list[Any],
    acc: step_model.Accelerator,
    mfu: float,
    memory_headroom: float = 0.0,
    *,
    v: int = 1,
    cp: int = 1,
    seq: int | None = None,
) -> dict[str, Any]:
    """`step.training` of `w` (for CP > 1, the stand-in above: `w` holds seq/CP and DP·CP), with the interleaved
    schedule (`v`), uneven stages, recompute FLOPs and CP corrections applied; `seq` is the full sequence (default
    `w`'s). The keys are `step.training`'s; `compute_seconds`, `bubble_seconds`, `step_seconds`, the memory and
    the fit are the corrected ones."""
    st = step_model.training(w, phases, acc, mfu, memory_headroom)
    m, t = w.model, w.training
    seq = seq or t.seq_len
    tp, pp = t.tp, t.pp
    heads = m.heads or m.hidden // m.head_dim
    layers = m.layers
    notes = st["assumptions"]
    act = st["memory"]["activations"]
    state = st["memory"]["state"]
    if act is not None and state is not None:
        per_layer = act["bytes_per_layer"]
        if cp > 1 and act["recompute"] == "none":
            # The score matrix of a CP rank is (seq/CP) × seq, CP times the stand-in's (seq/CP)².
            sub = t.seq_len
            per_layer += 5.0 * heads * sub * sub * t.micro_batch / tp * (cp - 1)
        flight = act["microbatches_in_flight"]
        act_bytes = per_layer * stage_layers(layers, pp, v) * flight * activation_factor(pp, v)
        per_rank = state["bytes"] + act_bytes
        st["memory"]["activations"] = {**act, "bytes": act_bytes, "layers_per_stage": stage_layers(layers, pp, v)}
        st["memory_per_rank_bytes"] = per_rank
        usable = st["memory"]["usable_memory_bytes"]
        if usable is not None:
            st["fits"], st["headroom_bytes"] = per_rank <= usable, usable - per_rank
    flops = st["flops_per_step"]
    if flops is None:
        return st
    tokens = st["tokens_per_step"]
    sub = t.seq_len
    active = (flops / tokens - 12.0 * layers * heads * m.head_dim * sub) / 6.0
    per_token = 12.0 * layers * heads * m.head_dim * (seq - sub)  # CP: queries attend over the whole sequence
    recompute = act["recompute"] if act is not None else (t.recompute or "selective")
    per_token += recompute_flops_per_token(active, layers, heads, m.head_dim, seq, recompute)
    flops += per_token * tokens
    st["flops_per_step"] = flops
    peak_key = step_model.PEAK_FIELD.get(m.dtype)
    peak = acc.fields[peak_key].value if peak_key in acc.fields else None
    exposed, dp, last, _, unknown = _comm(phases)
    if peak is None or unknown:
        return st
    c = compute.compute_seconds(flops, tp * pp * t.dp, peak, mfu) * stage_layers(layers, pp, v) * pp / layers
    zero = t.zero if t.zero is not None else (3 if t.sharded else 0)
    s = compute.training_step(
        c,
        pp=pp,
        microbatches=t.microbatches * v,
        exposed_seconds=exposed,
        dp_seconds=dp,
        dp_last_bucket_seconds=last,
        dp_overlap_window_seconds=c if zero == 3 else None,
    )
    st.update(s)
    if recompute != "none":
        notes.append(RECOMPUTE_SOURCE)
    if layers % (pp * v):
        notes.append(UNEVEN_SOURCE)
    if v > 1:
        notes.append(INTERLEAVED_SOURCE)
    if cp > 1:
        notes.append(CP_SOURCE)
    return st
