"""What a workload asks of the network: its phases as communications between ranks. Pure: no topology, no cost.

Ranks are numbered with tensor parallelism innermost, then data parallel, then pipeline stages
(rank = tp + TP·(dp + DP·pp)); an inference service numbers its prefill pool first and its decode pool from
`decode_pool_start`. Groups are regular, so each phase names one representative group and how many such
groups run it at the same time: never every pair of ranks. Where the ranks sit is placement's business,
what a communication costs on the wiring is costing's (`cost.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import sizing
from .workloads import Workload

# Where a communication travels: `backend` lets placement decide (scale-up or scale-out), `frontend` is
# client traffic on the service network, never the backend fabric.
NETWORKS = ("backend", "frontend")


@dataclass(frozen=True, kw_only=True)
class Communication:
    """One phase's communication: a collective over a representative group of ranks, repeated `count` times per
    step (training) or request (inference), with `concurrent_groups` groups doing the same at once."""

    phase: str
    description: str
    collective: str  # all-reduce | reduce-scatter | all-gather | all-to-all | send
    group: tuple[int, ...]  # ranks of one representative group; a send is (source, destination)
    bytes_per_rank: float  # buffer size S in nccl-tests' convention (see collectives.py)
    count: int
    concurrent_groups: int
    network: str = "backend"
    one_domain: str | None = None  # set for tensor parallelism: the group must lie in one scale-up domain
    peer: str | None = None  # an endpoint outside the ranks (the client of a request)

    @property
    def group_size(self) -> int:
        return len(self.group) + (self.peer is not None)


@dataclass(frozen=True, kw_only=True)
class Demand:
    """All a workload asks of the network, and how many ranks (in placement order) it occupies."""

    workload_id: str
    ranks: int
    communications: tuple[Communication, ...]


def _act_bytes(w: Workload) -> float:
    return sizing.dtype_bytes(w.model.dtype)


def decode_pool_start(w: Workload) -> int:
    """The rank where a disaggregated service's decode pool starts (default: right after the prefill pool)."""
    i = w.inference
    assert i is not None
    return i.prefill_tp if i.decode_pool_start is None else i.decode_pool_start


def training(w: Workload) -> Demand:
    t, m = w.training, w.model
    assert t is not None
    tp, pp, dp, ep = t.tp, t.pp, t.dp, t.ep

    def rank(tp_i: int, dp_i: int, pp_i: int) -> int:
        return tp_i + tp * (dp_i + dp * pp_i)

    act = t.micro_batch * t.seq_len * m.hidden * _act_bytes(w)
    layers_per_stage = m.layers / pp
    out: list[Communication] = []
    if tp > 1:
        out.append(
            Communication(
                phase="tp-all-reduce",
                description="tensor-parallel activation all-reduce (2 forward + 2 backward per layer per micro-batch)",
                collective="all-reduce",
                group=tuple(rank(i, 0, 0) for i in range(tp)),
                bytes_per_rank=act,
                count=int(4 * layers_per_stage * t.microbatches),
                concurrent_groups=dp * pp,
                one_domain=f"workload {w.id}",
            )
        )
    if pp > 1:
        out.append(
            Communication(
                phase="pp-send",
                description="pipeline activations forward and gradients backward between "
                "neighbouring stages (per TP rank, scatter-gather of 1/TP)",
                collective="send",
                group=(rank(0, 0, 0), rank(0, 0, 1)),
                bytes_per_rank=act / tp,
                count=2 * t.microbatches,
                concurrent_groups=tp * dp * (pp - 1),
            )
        )
    if dp > 1:
        grad = m.params / (tp * pp) * sizing.dtype_bytes(t.grad_dtype)
        group = tuple(rank(0, d, 0) for d in range(dp))
        if t.sharded:
            out.append(
                Communication(
                    phase="dp-reduce-scatter",
                    description="sharded data parallel (FSDP / ZeRO-3): reduce-scatter of gradients",
                    collective="reduce-scatter",
                    group=group,
                    bytes_per_rank=grad,
                    count=1,
                    concurrent_groups=tp * pp,
                )
            )
            out.append(
                Communication(
                    phase="dp-all-gather",
                    description="sharded data parallel: all-gather of parameters, forward and backward",
                    collective="all-gather",
                    group=group,
                    bytes_per_rank=grad,
                    count=2,
                    concurrent_groups=tp * pp,
                )
            )
        else:
            out.append(
                Communication(
                    phase="dp-all-reduce",
                    description="data-parallel gradient all-reduce",
                    collective="all-reduce",
                    group=group,
                    bytes_per_rank=grad,
                    count=1,
                    concurrent_groups=tp * pp,
                )
            )
    if ep > 1:
        e = m.experts
        assert e is not None  # the format refuses ep > 1 without experts
        out.append(
            Communication(
                phase="ep-all-to-all",
                description="expert-parallel all-to-all dispatch and combine "
                "(forward and backward per MoE layer per micro-batch)",
                collective="all-to-all",
                group=tuple(rank(i % tp, i // tp, 0) for i in range(ep)),
                bytes_per_rank=t.micro_batch * t.seq_len * e.top_k * m.hidden * _act_bytes(w),
                count=int(4 * e.moe_layers / pp * t.microbatches),
                concurrent_groups=tp * dp * pp // ep,
            )
        )
    return Demand(workload_id=w.id, ranks=w.accelerators, communications=tuple(out))


def _tp_all_reduce(w: Workload, stage: str, group: tuple[int, ...], pool: bool) -> Communication:
    """A service's 2 TP all-reduces per layer: prefill over the whole prompt once, decode per output token. The
    aggregated and disaggregated modes differ only in naming the pool (disaggregated) or not."""
    i, m = w.inference, w.model
    assert i is not None
    hidden_bytes = m.hidden * _act_bytes(w)
    prefill = stage == "prefill"
    where = f"{stage} pool" if pool else stage
    tail = " per output token" if not prefill else ("" if pool else " over the whole prompt")
    return Communication(
        phase=f"{stage}-tp-all-reduce",
        description=f"{where}: 2 TP all-reduces per layer{tail}",
        collective="all-reduce",
        group=group,
        bytes_per_rank=i.batch * i.prompt_tokens * hidden_bytes if prefill else i.batch * hidden_bytes,
        count=2 * m.layers * (1 if prefill else i.output_tokens),
        concurrent_groups=1,
        one_domain=f"workload {w.id} {where}" if pool else f"workload {w.id}",
    )


def inference(w: Workload) -> Demand:
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
        start = decode_pool_start(w)
        ranks = max(ranks, start + dtp)
        prefill = tuple(range(ptp))
        decode = tuple(range(start, start + dtp))
        kv = sizing.kv_cache(m.layers, m.kv_heads, m.head_dim, m.dtype, i.prompt_tokens)
        if ptp > 1:
            out.append(_tp_all_reduce(w, "prefill", prefill, True))
        out.append(
            Communication(
                phase="kv-transfer",
                description="KV cache from the prefill pool to the decode pool; each of the decode ranks receives "
                "its 1/TP shard of the KV heads",
                collective="send",
                group=(prefill[0], decode[0]),
                bytes_per_rank=kv["bytes"] * batch / dtp,
                count=1,
                concurrent_groups=dtp,
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
            group=(0,),
            bytes_per_rank=(i.prompt_tokens + i.output_tokens) * i.bytes_per_token_on_frontend * batch,
            count=1,
            concurrent_groups=1,
            network="frontend",
            peer="client",
        )
    )
    return Demand(workload_id=w.id, ranks=ranks, communications=tuple(out))


def decompose(w: Workload) -> Demand:
    """The workload's communications, in the order its phases are reported."""
    return training(w) if w.kind == "training" else inference(w)
