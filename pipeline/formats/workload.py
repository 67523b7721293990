"""`models/workloads/<id>.yaml`: model size, parallelism and sequence lengths, laid onto a topology by the
traffic stage. Every default a workload may leave out lives here, not in the code that reads it."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

from ..errors import UsageError
from .common import Dtype, Slug, Strict, Title

Positive = Annotated[int, Field(ge=1)]
# A number as written: 100 stays the integer 100 (so derived figures print as the file states them), 0.5 a float.
NonNegative = Annotated[int, Field(ge=0)] | Annotated[float, Field(ge=0)]
PositiveNumber = Annotated[int, Field(gt=0)] | Annotated[float, Field(gt=0)]


class Experts(Strict):
    count: int = Field(ge=2)
    top_k: Positive
    moe_layers: Positive
    ffn_hidden: Positive | None = Field(
        default=None, description="One expert's MLP width; default solved from `params` (all experts' weights)."
    )
    params: PositiveNumber | None = Field(
        default=None,
        description="Parameters held in the experts (all of them; the rest of model.params is dense). Expert "
        "parallelism shards them, and only top_k / count of them are active per token.",
    )


class ModelShape(Strict):
    params: PositiveNumber
    layers: Positive
    hidden: Positive
    kv_heads: Positive
    head_dim: Positive
    heads: Positive | None = Field(default=None, description="Attention (query) heads; default hidden / head_dim.")
    ffn_hidden: Positive | None = Field(
        default=None, description="MLP width; default solved from params, layers, hidden and the attention shape."
    )
    mlp: Literal["gated", "plain"] = Field(
        default="gated", description="gated: SwiGLU (three weight matrices, Llama); plain: two with GeLU (GPT-3)."
    )
    vocab: Positive | None = Field(
        default=None, description="Vocabulary size (embedding and logits); unstated: neither is counted."
    )
    attention: Literal["flash", "unfused"] = Field(
        default="flash",
        description="flash: a fused attention kernel (no s² scores in memory); unfused: scores, softmax and dropout "
        "as separate kernels through HBM (Megatron-LM of 2021-2022).",
    )
    dropout: bool = Field(default=False, description="Dropout on attention scores and hidden states (GPT-3 style).")
    dtype: Dtype
    experts: Experts | None = None


class Training(Strict):
    # The knobs people vary: their one home is the checkout's params.yaml (`workloads.<id>.<knob>`).
    KNOBS: ClassVar[tuple[str, ...]] = ("tp", "pp", "dp", "ep", "cp", "micro_batch", "microbatches", "seq_len")

    tp: Positive
    pp: Positive
    dp: Positive
    ep: Positive = 1
    cp: Positive = Field(
        default=1,
        description="Context parallel degree: each sequence split over cp ranks, their K and V passed around the CP "
        "ring every layer; gradients reduced over DP × CP.",
    )
    sharded: bool = Field(default=False, description="FSDP / ZeRO-3: reduce-scatter gradients, all-gather parameters.")
    micro_batch: Positive
    microbatches: Positive
    seq_len: Positive
    grad_dtype: Dtype = "bf16"
    optimizer_layout: Literal["mixed-adam", "mixed-adam-16"] = "mixed-adam"
    zero: Literal[0, 1, 2, 3] | None = Field(
        default=None, description="ZeRO stage over the data-parallel degree; default 3 when sharded, else 0."
    )
    sequence_parallel: bool | None = Field(
        default=None, description="Sequence parallelism with TP; when unstated the memory estimate assumes it."
    )
    recompute: Literal["none", "selective", "full"] | None = Field(
        default=None, description="Activation recompute; when unstated the memory estimate assumes selective."
    )
    schedule: Literal["1f1b", "interleaved"] = Field(
        default="1f1b", description="Pipeline schedule: 1F1B, or interleaved with `virtual_stages` chunks per rank."
    )
    virtual_stages: Positive = Field(default=1, description="Model chunks per pipeline rank (interleaved: v ≥ 2).")
    stage_layers: list[Positive] | None = Field(
        default=None,
        description="Transformer layers per pipeline rank (pp entries adding up to model.layers); default: as even as "
        "possible, the first and last ranks (which also hold the embedding and the loss) taking the fewer.",
    )
    tp_overlap: bool = Field(
        default=False, description="Tensor-parallel communication overlapped with the GEMMs it feeds (hidden)."
    )
    dp_overlap: bool = Field(
        default=True, description="Data-parallel gradient buckets reduced while the backward pass still runs."
    )
    pp_overlap: bool = Field(
        default=False, description="Pipeline sends asynchronous: only the fill and drain sends are exposed."
    )
    ep_overlap: bool = Field(
        default=False, description="Expert all-to-all overlapped with computation of another micro-batch."
    )
    cp_overlap: bool = Field(
        default=False, description="Context-parallel K/V ring passes overlapped with the attention kernel they feed."
    )

    @model_validator(mode="after")
    def _schedule(self) -> Training:
        if self.schedule == "1f1b" and self.virtual_stages != 1:
            raise ValueError("virtual_stages > 1 needs schedule: interleaved")
        if self.stage_layers is not None and len(self.stage_layers) != self.pp:
            raise ValueError(f"stage_layers lists {len(self.stage_layers)} ranks; pp is {self.pp}")
        return self

    @property
    def ranks(self) -> int:
        """Ranks the layout spans: every degree that splits the job multiplies (expert parallelism reuses the
        TP·CP·DP plane of each stage)."""
        return self.tp * self.pp * self.dp * self.cp


class Inference(Strict):
    KNOBS: ClassVar[tuple[str, ...]] = (
        "tp", "prefill_tp", "decode_tp", "batch", "prompt_tokens", "output_tokens", "requests_per_second",
    )  # fmt: skip

    mode: Literal["aggregated", "disaggregated"]
    tp: Positive = 1
    prefill_tp: Positive = 1
    decode_tp: Positive = 1
    decode_pool_start: int | None = Field(
        default=None,
        ge=0,
        description="Rank (placement order) where the decode pool starts (disaggregated); default: right after "
        "the prefill pool.",
    )
    batch: Positive = 1
    prompt_tokens: Positive
    output_tokens: Positive
    requests_per_second: NonNegative | None = None
    group_tokens_per_second: PositiveNumber | None = None
    bytes_per_token_on_frontend: PositiveNumber = 4.0

    # What sizes each mode's groups: an aggregated service is one TP group, a disaggregated one a prefill and a
    # decode pool. A size of the other mode is refused where it is written, never read as nothing.
    POOLS: ClassVar[dict[str, tuple[str, ...]]] = {
        "aggregated": ("tp",),
        "disaggregated": ("prefill_tp", "decode_tp", "decode_pool_start"),
    }

    @classmethod
    def knobs(cls, mode: str) -> tuple[str, ...]:
        """The knobs a service in `mode` reads (KNOBS less the other mode's pool sizes)."""
        other = {k for m, pools in cls.POOLS.items() if m != mode for k in pools}
        return tuple(k for k in cls.KNOBS if k not in other)

    @field_validator("tp", "prefill_tp", "decode_tp", "decode_pool_start")
    @classmethod
    def _of_its_mode(cls, value: int | None, info: ValidationInfo) -> int | None:
        mode = info.data.get("mode")
        if value is not None and mode in cls.POOLS and info.field_name not in cls.POOLS[mode]:
            sized = "one TP group, tp" if mode == "aggregated" else "a prefill and a decode pool: prefill_tp, decode_tp"
            raise ValueError(f"a {mode} service does not read it (it is sized by {sized}); leave it out")
        return value

    @property
    def ranks(self) -> int:
        """Ranks the service spans: one TP group (aggregated), or the prefill and the decode pools."""
        return self.prefill_tp + self.decode_tp if self.mode == "disaggregated" else self.tp


PlacementStrategy = Literal["fill-domains", "spread", "explicit"]


class PlacementRange(Strict):
    """Ranks `first_rank` … `first_rank + ranks − 1` on consecutive accelerators in topology order (scale-up
    domains in order, each by accelerator index), starting at `accelerator`."""

    first_rank: int = Field(ge=0)
    ranks: Positive
    accelerator: Annotated[int, Field(ge=0)] | Annotated[str, Field(min_length=1)] = Field(
        description="The first accelerator: its index in topology order, or its node id (e.g. 'b004/gpu0')."
    )


class Placement(Strict):
    """Where ranks sit. fill-domains: scale-up domains filled in topology order, rails aligned (local index i
    beside NIC i). spread: the same, but the domains the job needs are spread evenly over the topology (every
    k-th domain), so its data-parallel rings cross leaves and pods. explicit: `ranges` map every rank."""

    strategy: PlacementStrategy = "fill-domains"
    ranges: list[PlacementRange] | None = Field(
        default=None, description="explicit only: every rank the workload uses, in exactly one range."
    )

    @model_validator(mode="after")
    def _ranges_with_explicit(self) -> Placement:
        if (self.strategy == "explicit") != (self.ranges is not None):
            raise ValueError("`ranges` is required with strategy explicit and refused with any other strategy")
        return self


class _WorkloadBase(Strict):
    id: Slug
    title: Title
    summary: str = ""
    model: ModelShape
    targets: list[str] = Field(min_length=1)
    shares_with: Slug | None = Field(
        default=None, description="Another workload id running on the same cluster at the same time."
    )
    placement: Placement | None = Field(
        default=None,
        description="Where ranks sit; when unstated, the target cluster's default placement (fill-domains).",
    )
    teaching: str | None = Field(
        default=None,
        pattern=r"^(does not fit|not a planner's choice)(: .{10,300})?$",
        description="A teaching example, not a layout a planner would run: 'does not fit' says the layout is shown "
        "for its traffic although its memory exceeds the accelerator's; 'not a planner's choice' that it fits but "
        "`fabricref plan train` does not put it in its top 10 by step time on its targets. After a colon, why it "
        "is kept (every output repeats it).",
    )


class TrainingWorkload(_WorkloadBase):
    model_config = ConfigDict(title="training")
    kind: Literal["training"]
    training: Training


class InferenceWorkload(_WorkloadBase):
    model_config = ConfigDict(title="inference")
    kind: Literal["inference"]
    inference: Inference


WorkloadFile = Annotated[
    Annotated[TrainingWorkload, Tag("training")] | Annotated[InferenceWorkload, Tag("inference")],
    Discriminator("kind"),
]


def check_degrees(m: ModelShape, t: Training, what: str) -> None:
    """Degrees must divide what they split: TP the hidden size and the KV heads, EP the experts. PP need not divide
    the layers: stages may be uneven (`schedule.stage_layers`), as Llama 3's 126 layers on 16 stages were."""
    checks = [(t.tp, "training.tp", m.hidden, "model.hidden")]
    if t.pp > m.layers:
        raise UsageError(f"{what}: at $.training.pp: {t.pp} stages for {m.layers} layers")
    if m.kv_heads >= t.tp:
        checks.append((t.tp, "training.tp", m.kv_heads, "model.kv_heads"))
    if t.ep > 1 and m.experts is not None:
        checks.append((t.ep, "training.ep", m.experts.count, "model.experts.count"))
        plane = "training.tp × training.dp" + (" × training.cp" if t.cp > 1 else "")
        checks.append((t.ep, "training.ep", t.tp * t.dp * t.cp, plane))
    if t.cp > 1:
        checks.append((t.cp, "training.cp", t.seq_len, "training.seq_len"))
    for degree, key, value, of in checks:
        if value % degree:
            raise UsageError(f"{what}: at $.{key}: {degree} must divide {of} = {value}")


def check_serving_degrees(m: ModelShape, i: Inference, what: str) -> None:
    """Each pool's TP must split what a serving engine splits: the hidden size, the attention heads and the KV heads
    (unless there are fewer KV heads than ranks: then each rank keeps one, replicated)."""
    heads = m.heads or m.hidden // m.head_dim
    for key in ("tp",) if i.mode == "aggregated" else ("prefill_tp", "decode_tp"):
        tp = getattr(i, key)
        checks = [(m.hidden, "model.hidden"), (heads, "model.heads" if m.heads else "model.hidden / model.head_dim")]
        if m.kv_heads >= tp:
            checks.append((m.kv_heads, "model.kv_heads"))
        for value, of in checks:
            if value % tp:
                raise UsageError(f"{what}: at $.inference.{key}: {tp} must divide {of} = {value}")
