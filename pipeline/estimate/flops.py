"""The work of one transformer layer, kernel by kernel: FLOPs of every matrix product and bytes of every
memory-bound kernel, per tensor-parallel rank and micro-batch, forward, backward and recomputed.

Counting follows Narayanan et al. (SC21, arXiv 2104.04473: 2·m·n·k FLOPs per product, a backward of twice the
forward's GEMM work) and Korthikanti et al. (arXiv 2205.05198: what full and selective recompute repeat). A time
model needs the kernels, not 6·N: attention's small batched products and the elementwise kernels run far from
peak, and recompute repeats only some of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..errors import UsageError
from .sizing import dtype_bytes

if TYPE_CHECKING:
    from ..formats.workload import ModelShape

RECOMPUTE = ("none", "selective", "full")
# FlashAttention's backward computes five products to the forward's two (it recomputes the scores): Dao,
# "FlashAttention-2" (arXiv 2307.08691), section 3.1.
FLASH_BACKWARD_FACTOR = 2.5


@dataclass(frozen=True, kw_only=True)
class Shape:
    """A model as the operation count needs it; `from_workload` fills it from a workload's `model` block."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_hidden: int
    gated: bool = True
    vocab: int | None = None
    dtype_bytes: float = 2.0
    attention: str = "flash"  # flash: fused, no s² tensor in memory; unfused: scores and softmax in HBM
    causal: bool = True  # a fused kernel skips the masked half of the scores
    dropout: bool = False  # GPT-3-style dropout after attention scores and on the hidden states
    experts: int = 0
    top_k: int = 0
    moe_layers: int = 0
    expert_ffn_hidden: int = 0
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Op:
    """One kernel: `gemm` (a matrix product m×k·k×n, `count` of them batched), `attention` (a fused attention
    kernel: FLOPs and the bytes it streams) or `memory` (elementwise / reduction: bytes read and written)."""

    name: str
    kind: str
    flops: float = 0.0
    bytes: float = 0.0
    count: int = 1  # kernels launched


@dataclass
class LayerWork:
    """The kernels of one layer for one micro-batch on one rank, by pass."""

    forward: list[Op] = field(default_factory=list)
    backward: list[Op] = field(default_factory=list)
    recompute: list[Op] = field(default_factory=list)

    def flops(self, part: str | None = None) -> float:
        parts = (part,) if part else ("forward", "backward", "recompute")
        return sum(o.flops for p in parts for o in getattr(self, p))


def attention_weights(hidden: int, heads: int, kv_heads: int, head_dim: int) -> int:
    """Weights of one layer's attention projections: Q and the output projection hidden × heads·head_dim, K and V
    hidden × kv_heads·head_dim (grouped-query); heads·head_dim need not be hidden (Gemma's is not)."""
    return hidden * (heads * head_dim + 2 * kv_heads * head_dim) + heads * head_dim * hidden


def _gemm(name: str, m: float, n: float, k: float, dtype: float, batch: int = 1) -> Op:
    """A product m×k·k×n, `batch` of them in one batched kernel (one launch)."""
    m, n, k = int(m), int(n), int(k)
    return Op(name, "gemm", 2.0 * m * n * k * batch, dtype * (m * k + k * n + m * n) * batch)


def _mem(name: str, nbytes: float) -> Op:
    return Op(name, "memory", 0.0, nbytes)


def from_workload(model: ModelShape) -> Shape:
    """The shape of a workload's `model` block, with what it leaves out filled and said (in `assumptions`)."""
    said: list[str] = []
    h, layers, d, e = model.hidden, model.layers, model.head_dim, model.experts
    heads = model.heads
    if not heads:
        heads = h // d
        said.append("attention heads = hidden / head_dim (the workload does not state them)")
    gated = model.mlp == "gated"
    mats = 3 if gated else 2
    f = model.ffn_hidden
    if not f:
        # Solve the dense parameter count for the MLP width: params ≈ layers·(attention + mats·h·f) + embeddings.
        dense = float(model.params) - (float(e.params) if e and e.params else 0.0)
        per_layer = (dense - 2 * (model.vocab or 0) * h) / layers - attention_weights(h, heads, model.kv_heads, d)
        f = max(1, int(per_layer / (mats * h))) if not e else 4 * h
        said.append(
            f"MLP width {f} solved from the parameter count (the workload does not state model.ffn_hidden)"
            if not e
            else f"dense MLP width {f} = 4 × hidden (not used: every layer is a mixture of experts)"
        )
    experts = top_k = moe_layers = ef = 0
    if e:
        experts, top_k, moe_layers = e.count, e.top_k, e.moe_layers
        ef = e.ffn_hidden or 0
        if not ef and e.params:
            ef = int(float(e.params) / (moe_layers * experts * mats * h))
            said.append(f"expert MLP width {ef} solved from model.experts.params")
        if not ef:
            raise UsageError("model.experts needs ffn_hidden or params to count the experts' FLOPs")
    if not model.vocab:
        said.append("no vocabulary size stated (model.vocab): the embedding and the logits are not counted")
    return Shape(
        hidden=h,
        layers=layers,
        heads=heads,
        kv_heads=model.kv_heads,
        head_dim=d,
        ffn_hidden=f,
        gated=gated,
        vocab=model.vocab or None,
        dtype_bytes=dtype_bytes(model.dtype),
        attention=model.attention,
        dropout=model.dropout,
        experts=experts,
        top_k=top_k,
        moe_layers=moe_layers,
        expert_ffn_hidden=ef,
        assumptions=tuple(said),
    )


def _attention_core(s: Shape, b: int, seq: int, t: int, context: int | None = None, cp: int = 1) -> list[Op]:
    """Scores, softmax (and dropout), and the weighted sum over V, for `b` sequences of `seq` query tokens
    attending to `context` keys (default: the sequence itself). With context parallelism (`cp` > 1) the `seq`
    queries are a rank's 1/cp of the sequence attending over all of it; the sequence is split load-balanced
    (each rank two mirrored chunks), so a fused causal kernel still skips half of the scores."""
    ctx = seq * cp if context is None else context
    heads = max(1, s.heads // t)
    kv = max(1, s.kv_heads // t)
    by = s.dtype_bytes
    if s.attention == "flash":
        frac = 0.5 if s.causal and (ctx == seq or cp > 1) else 1.0
        flops = 4.0 * b * heads * seq * ctx * s.head_dim * frac
        streamed = by * b * s.head_dim * (2 * heads * seq + 2 * kv * ctx)  # Q and O once, K and V once
        return [Op("attention (fused)", "attention", flops, streamed, 1)]
    elems = float(b) * heads * seq * ctx
    ops = [
        _gemm("attention scores QKᵀ", seq, ctx, s.head_dim, by, b * heads),
        _mem("scaled masked softmax", 2 * by * elems),
    ]
    if s.dropout:
        ops.append(_mem("attention dropout", (2 * by + 1) * elems))
    ops.append(_gemm("attention over V", seq, s.head_dim, ctx, by, b * heads))
    return ops


def _mlp(s: Shape, tokens: int, t: int, width: int, name: str, share: float = 1.0) -> list[Op]:
    """The MLP's products and activation; `share` scales the tokens (the experts' share of a rank's tokens)."""
    by, h = s.dtype_bytes, s.hidden
    n = max(1, int(tokens * share))
    ff = max(1, width // t)
    # Gated (SwiGLU): gate and up in one product of twice the width; plain: one up projection and a GeLU.
    up, act, wide, act_bytes = ("gate+up", "SwiGLU", 2, 3) if s.gated else ("up", "bias + GeLU", 1, 2)
    return [
        _gemm(f"{name} {up} projection", n, wide * ff, h, by),
        _mem(f"{name} {act}", act_bytes * by * n * ff),
        _gemm(f"{name} down projection", n, h, ff, by),
    ]


def layer_forward(
    s: Shape,
    b: int,
    seq: int,
    *,
    tp: int = 1,
    sp: bool = False,
    moe: bool = False,
    context: int | None = None,
    cp: int = 1,
) -> list[Op]:
    """The forward kernels of one layer for `b` sequences of `seq` tokens on one of `tp` ranks. With sequence
    parallelism the norms, dropouts and residual adds run on 1/tp of the tokens; without it every rank repeats
    them on all of them (Korthikanti et al., section 4.2.2). With context parallelism `seq` is the rank's 1/cp of
    each sequence: everything runs on those tokens but attention, whose queries see the whole sequence."""
    by, h, t = s.dtype_bytes, s.hidden, tp
    tokens = b * seq
    local = tokens / t if sp else tokens  # the elementwise region outside the TP-split products
    qkv = (s.heads + 2 * s.kv_heads) * s.head_dim // t
    residual = _mem("bias-dropout-add" if s.dropout else "residual add", (3 * by + (1 if s.dropout else 0)) * local * h)
    ops = [_mem("input norm", 2 * by * local * h), _gemm("QKV projection", tokens, qkv, h, by)]
    ops += _attention_core(s, b, seq, t, context, cp)
    ops += [_gemm("attention output projection", tokens, h, s.heads * s.head_dim // t, by), residual]
    ops.append(_mem("post-attention norm", 2 * by * local * h))
    if moe and s.experts:
        ops.append(_gemm("router", tokens, s.experts, h, by))
        ops += _mlp(s, tokens, t, s.expert_ffn_hidden, "experts", share=float(s.top_k))
    else:
        ops += _mlp(s, tokens, t, s.ffn_hidden, "MLP")
    return [*ops, residual]


def backward_of(ops: list[Op]) -> list[Op]:
    """Backward of forward kernels: each product twice (input and weight gradient; Narayanan et al., section 5.1),
    a fused attention kernel FLASH_BACKWARD_FACTOR times, each elementwise kernel twice the forward's bytes (its
    saved input and the incoming gradient read, the outgoing one written)."""
    out = []
    for o in ops:
        gemm = o.kind == "gemm"
        flops = o.flops * (2 if gemm else FLASH_BACKWARD_FACTOR if o.kind == "attention" else 1)
        out.append(replace(o, name=f"{o.name} (backward)", flops=flops, bytes=2 * o.bytes, count=o.count * (1 + gemm)))
    return out


def recompute_of(ops: list[Op], mode: str) -> list[Op]:
    """What the backward pass recomputes: full — the layer's whole forward; selective — the attention core
    (scores, softmax, dropout, weighted sum: Korthikanti et al., section 5), which a fused attention kernel
    recomputes inside its own backward already (nothing more); none — nothing."""
    if mode == "none":
        return []
    if mode == "full":
        return [replace(o, name=f"{o.name} (recompute)") for o in ops]
    core = ("attention scores", "scaled masked softmax", "attention dropout", "attention over V")
    return [replace(o, name=f"{o.name} (recompute)") for o in ops if o.name.startswith(core)]


def layer(
    s: Shape,
    b: int,
    seq: int,
    *,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    moe: bool = False,
    cp: int = 1,
) -> LayerWork:
    fwd = layer_forward(s, b, seq, tp=tp, sp=sp, moe=moe, cp=cp)
    return LayerWork(fwd, backward_of(fwd), recompute_of(fwd, recompute))


def embedding_forward(s: Shape, b: int, seq: int, tp: int = 1) -> list[Op]:
    """The token-embedding lookup on the first stage: one row of h read and written per token."""
    if not s.vocab:
        return []
    return [_mem("embedding lookup", 2 * s.dtype_bytes * b * seq * s.hidden)]


def head_forward(s: Shape, b: int, seq: int, tp: int = 1) -> list[Op]:
    """The final norm, the logits (vocabulary split over TP) and the cross-entropy loss on the last stage."""
    if not s.vocab:
        return []
    tokens = b * seq
    v = s.vocab // tp
    return [
        _mem("final norm", 2 * s.dtype_bytes * tokens * s.hidden),
        _gemm("logits", tokens, v, s.hidden, s.dtype_bytes),
        # Vocabulary-parallel cross entropy reads the logits and writes fp32 softmax terms.
        _mem("cross-entropy loss", (s.dtype_bytes + 4) * tokens * v),
    ]


def model_flops_per_token(s: Shape, seq: int) -> float:
    """Training FLOPs per token as published MFU figures count them (PaLM, Chowdhery et al. 2022, appendix B;
    Llama 3 reports its MFU this way): 6 × the weights a token passes through (dense, plus top_k experts and the
    router of each MoE layer, plus the logits) + 12·L·H·Q·T for attention over the whole sequence (T = seq),
    no recompute."""
    h, d = s.hidden, s.head_dim
    attn = attention_weights(h, s.heads, s.kv_heads, d)
    mats = 3 if s.gated else 2
    dense_layers = s.layers - (s.moe_layers if s.experts else 0)
    weights = s.layers * attn + dense_layers * mats * h * s.ffn_hidden
    if s.experts:
        weights += s.moe_layers * (s.top_k * mats * h * s.expert_ffn_hidden + h * s.experts)
    if s.vocab:
        weights += h * s.vocab
    return 6.0 * weights + 12.0 * s.layers * s.heads * d * seq
