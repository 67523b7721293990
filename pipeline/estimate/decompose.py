"""What a workload asks of the network, decomposed once (pure: no topology, no cost): its phases as
communications between ranks, which placement, routing and costing all read.

Ranks are numbered tp + TP·(cp + CP·(dp + DP·pp)) (Megatron-LM's order); a service numbers its prefill pool first
and its decode pool from `decode_pool_start`. Every group of every phase is listed; the first is the
representative one the collective is costed on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..formats.workload import ModelShape, Training, check_degrees  # noqa: F401  (the planner's name for it)
from . import flops, sizing
from .workloads import Workload

# What a communication may hide behind ("" for traffic on the critical path): data-parallel traffic overlaps the
# compute of the step, all but its last gradient bucket (step.py).
BACKWARD = "compute"


@dataclass(frozen=True)
class Part:
    """Groups of ranks that run one collective at the same time, each rank with the same buffer."""

    groups: tuple[tuple[int, ...], ...]
    bytes_per_rank: float


@dataclass(frozen=True, kw_only=True)
class Communication:
    """One phase's communication: a collective over groups of ranks (parts that run at once, e.g. dense and expert
    gradients), `count` times per step or request."""

    phase: str
    description: str
    collective: str  # an operation of the collective registry (all-reduce, reduce-scatter, ..., send)
    parts: tuple[Part, ...]
    count: int
    # The representative group's buffer S (nccl-tests' convention) and how many groups (a send: pairs) run at once;
    # by default the first part's.
    bytes_per_rank: float | None = None
    concurrency: int | None = None
    network: str = "backend"  # or `frontend`: client traffic on the service network
    one_domain: str | None = None  # set for tensor parallelism: its groups must each lie in one scale-up domain
    peer: str | None = None  # an endpoint outside the ranks (the client of a request)
    overlaps: str = ""  # what it may hide behind ("" when it sits on the critical path)

    def __post_init__(self) -> None:
        if self.bytes_per_rank is None:
            object.__setattr__(self, "bytes_per_rank", self.parts[0].bytes_per_rank)
        if self.concurrency is None:
            object.__setattr__(self, "concurrency", len(self.parts[0].groups))

    @property
    def group(self) -> tuple[int, ...]:
        """The representative group: what the collective is costed on (a send: its first pair)."""
        return self.parts[0].groups[0]

    @property
    def group_size(self) -> int:
        return len(self.group) + (self.peer is not None)


@dataclass(frozen=True, kw_only=True)
class Decomposition:
    """All a workload asks of the network, and how many ranks (in placement order) it spans."""

    workload_id: str
    ranks: int
    communications: tuple[Communication, ...]


@dataclass(frozen=True)
class Groups:
    """Rank groups by kind. `expert` groups are the ranks holding the same expert (its data-parallel replicas)."""

    tp: tuple[tuple[int, ...], ...] = ()
    pp: tuple[tuple[int, ...], ...] = ()
    dp: tuple[tuple[int, ...], ...] = ()  # the gradient groups: DP × CP ranks holding the same weights
    ep: tuple[tuple[int, ...], ...] = ()
    expert: tuple[tuple[int, ...], ...] = ()
    cp: tuple[tuple[int, ...], ...] = ()


def training_groups(tp: int, pp: int, dp: int, ep: int = 1, cp: int = 1) -> Groups:
    """All groups of a TP × CP × DP × PP (× EP over the TP·CP·DP plane of each stage) layout; gradients reduce over
    DP × CP (Megatron-LM's dp-cp group)."""

    # rank[p, d, c, t] = t + TP·(c + CP·(d + DP·p)); each kind's groups are the rows of one reshape.
    rank = np.arange(tp * cp * dp * pp).reshape(pp, dp, cp, tp)

    def rows(a: np.ndarray, size: int) -> tuple[tuple[int, ...], ...]:
        return tuple(map(tuple, a.reshape(-1, size).tolist()))

    tps, pps = rows(rank, tp), rows(rank.transpose(1, 2, 3, 0), pp)
    dps, cps = rows(rank.transpose(0, 3, 1, 2), dp * cp), rows(rank.transpose(0, 1, 3, 2), cp)
    eps: tuple[tuple[int, ...], ...] = ()
    experts: tuple[tuple[int, ...], ...] = ()
    if ep > 1:
        # The EP group walks the TP·CP·DP plane of a stage in rank order (ep divides it: check_degrees); the
        # holders of one expert are the ranks at the same place in every EP group of the stage.
        groups = rank.reshape(pp, -1, ep)
        eps, experts = rows(groups, ep), rows(groups.transpose(0, 2, 1), groups.shape[1])
    return Groups(tps, pps, dps, eps, experts, cps if cp > 1 else ())


def attention_params(m: ModelShape) -> float:
    """Parameters of every layer's attention projections: what each expert-parallel rank of an MoE holds (the rest
    counts as expert weights, a labelled derivation)."""
    s = flops.from_workload(m)
    return float(m.layers * flops.attention_weights(s.hidden, s.heads, s.kv_heads, s.head_dim))


def gradient_shards(m: ModelShape, t: Training) -> tuple[float, float]:
    """Gradient parameters a rank holds, (dense / (tp · pp), expert / (ep · pp)): an expert lives on one rank of each
    EP group; dense are the attention projections."""
    params = float(m.params)
    if t.ep <= 1 or m.experts is None:
        return params / (t.tp * t.pp), 0.0
    dense = min(params, attention_params(m))
    return dense / (t.tp * t.pp), (params - dense) / (t.ep * t.pp)


def training(w: Workload) -> Decomposition:
    t, m = w.training, w.model
    assert t is not None
    tp, pp, dp, ep, cp = t.tp, t.pp, t.dp, t.ep, t.cp
    grp = training_groups(tp, pp, dp, ep, cp)
    tokens_per_rank = t.micro_batch * t.seq_len // cp  # CP splits each sequence
    by = sizing.dtype_bytes(m.dtype)  # an activation element
    act = tokens_per_rank * m.hidden * by
    layers_per_stage = m.layers / pp
    out: list[Communication] = []
    if tp > 1:
        out.append(
            Communication(
                phase="tp-all-reduce",
                description="tensor-parallel activation all-reduce (2 forward + 2 backward per layer per micro-batch)",
                collective="all-reduce",
                parts=(Part(grp.tp, act),),
                count=int(4 * layers_per_stage * t.microbatches),
                one_domain=f"workload {w.id}",
            )
        )
    if pp > 1:
        pairs = tuple((x[k], x[k + 1]) for x in grp.pp for k in range(pp - 1))
        out.append(
            Communication(
                phase="pp-send",
                description="pipeline activations forward and gradients backward between "
                "neighbouring stages (per TP rank, scatter-gather of 1/TP)",
                collective="send",
                parts=(Part(pairs, act / tp),),
                count=2 * t.microbatches,
            )
        )
    if cp > 1:
        # Ring attention: each rank's K and V blocks travel once around the CP ring per layer forward, and twice
        # backward (the blocks again, and their gradients back); nccl-tests' S is the whole sequence's K and V.
        kv = sizing.kv_bytes_per_token(1, m.kv_heads, m.head_dim, by, tp)
        out.append(
            Communication(
                phase="cp-kv-exchange",
                description="context parallel: K and V of every layer around the CP ring (forward once, backward "
                "twice per layer per micro-batch)",
                collective="all-gather",
                parts=(Part(grp.cp, kv * t.micro_batch * t.seq_len),),
                count=int(3 * layers_per_stage * t.microbatches),
            )
        )
    dense_params, expert_params = gradient_shards(m, t)
    gb = sizing.dtype_bytes(t.grad_dtype)
    dense, expert = dense_params * gb, expert_params * gb
    parts = []
    if dp * cp > 1:
        parts.append(Part(grp.dp, dense))
    if expert and len(grp.expert[0]) > 1:
        parts.append(Part(grp.expert, expert))
    if parts:
        ops = (
            [("reduce-scatter", 1, "sharded data parallel (FSDP / ZeRO-3): reduce-scatter of gradients"),
             ("all-gather", 2, "sharded data parallel: all-gather of parameters, forward and backward")]
            if t.sharded
            else [("all-reduce", 1, "data-parallel gradient all-reduce")]
        )  # fmt: skip
        for op, count, description in ops:
            out.append(
                Communication(
                    phase=f"dp-{op}",
                    description=description,
                    collective=op,
                    parts=tuple(parts),
                    bytes_per_rank=dense + expert,
                    count=count,
                    overlaps=BACKWARD,
                )
            )
    if ep > 1:
        e = m.experts
        assert e is not None  # the format refuses ep > 1 without experts
        tokens = tokens_per_rank * e.top_k * m.hidden * by
        out.append(
            Communication(
                phase="ep-all-to-all",
                description="expert-parallel all-to-all dispatch and combine "
                "(forward and backward per MoE layer per micro-batch)",
                collective="all-to-all",
                parts=(Part(grp.ep, tokens),),
                count=int(4 * e.moe_layers / pp * t.microbatches),
            )
        )
    return Decomposition(workload_id=w.id, ranks=w.accelerators, communications=tuple(out))


def _tp_all_reduce(w: Workload, stage: str, group: tuple[int, ...], pool: bool) -> Communication:
    """A service's 2 TP all-reduces per layer: prefill over the prompt once, decode per output token (`pool`: named
    as a disaggregated pool)."""
    i, m = w.inference, w.model
    assert i is not None
    hidden_bytes = m.hidden * sizing.dtype_bytes(m.dtype)
    prefill = stage == "prefill"
    where = f"{stage} pool" if pool else stage
    tail = " per output token" if not prefill else ("" if pool else " over the whole prompt")
    size = i.batch * i.prompt_tokens * hidden_bytes if prefill else i.batch * hidden_bytes
    return Communication(
        phase=f"{stage}-tp-all-reduce",
        description=f"{where}: 2 TP all-reduces per layer{tail}",
        collective="all-reduce",
        parts=(Part((group,), size),),
        count=2 * m.layers * (1 if prefill else i.output_tokens),
        one_domain=f"workload {w.id} {where}" if pool else f"workload {w.id}",
    )


def inference(w: Workload) -> Decomposition:
    i, m = w.inference, w.model
    assert i is not None
    batch = i.batch
    out: list[Communication] = []
    ranks = w.accelerators
    if i.mode == "aggregated":
        group = tuple(range(i.tp))
        if i.tp > 1:
            out += [_tp_all_reduce(w, "prefill", group, False), _tp_all_reduce(w, "decode", group, False)]
    else:
        ptp, dtp = i.prefill_tp, i.decode_tp
        start = w.decode_start
        ranks = max(ranks, start + dtp)
        prefill = tuple(range(ptp))
        decode = tuple(range(start, start + dtp))
        kv = sizing.kv_cache(m.layers, m.kv_heads, m.head_dim, m.dtype, i.prompt_tokens)["bytes"] * batch
        if ptp > 1:
            out.append(_tp_all_reduce(w, "prefill", prefill, True))
        # Prefill rank i holds KV heads [i/ptp, (i+1)/ptp); decode rank j needs [j/dtp, (j+1)/dtp).
        shares = [
            Part(((a, b),), share * kv)
            for x, a in enumerate(prefill)
            for y, b in enumerate(decode)
            if (share := max(0.0, min((x + 1) / ptp, (y + 1) / dtp) - max(x / ptp, y / dtp))) > 0 and a != b
        ]
        out.append(
            Communication(
                phase="kv-transfer",
                description="KV cache from the prefill pool to the decode pool; each of the decode ranks receives "
                "its 1/TP shard of the KV heads",
                collective="send",
                parts=tuple(shares),
                bytes_per_rank=kv / dtp,
                count=1,
                concurrency=len(shares),
            )
        )
        if dtp > 1:
            out.append(_tp_all_reduce(w, "decode", decode, True))
    out.append(
        Communication(
            phase="frontend-request",
            description=f"client request in and {i.output_tokens} tokens out over the frontend "
            "service network (separate from the backend fabric)",
            collective="send",
            parts=(Part(((0,),), (i.prompt_tokens + i.output_tokens) * i.bytes_per_token_on_frontend * batch),),
            count=1,
            network="frontend",
            peer="client",
        )
    )
    return Decomposition(workload_id=w.id, ranks=ranks, communications=tuple(out))


def decompose(w: Workload) -> Decomposition:
    """The workload's communications, in the order its phases are reported."""
    return training(w) if w.kind == "training" else inference(w)
