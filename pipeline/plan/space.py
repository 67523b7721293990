"""The search space of a training job: every legal layout of a model on a number of GPUs, and why the others are not.

A layout is TP × PP × DP × CP ranks (EP inside TP·DP·CP for a mixture of experts), a micro-batch and how many of
them make the global batch, a ZeRO stage, a recompute mode and a pipeline schedule (1F1B, or interleaved with v
virtual stages per rank). Legal means:

* TP inside one scale-up domain (a divisor of its size) and dividing the attention heads and the hidden size (and
  the KV heads, unless there are fewer of them than TP ranks: then each rank keeps one, replicated);
* CP dividing the sequence; DP the GPUs left, dividing the global batch; EP the experts and TP·DP·CP;
* PP at most the layers — layers need not divide PP (the fullest stage paces the pipeline); interleaving needs
  PP ≥ 2, v·PP ≤ layers and micro-batches a multiple of PP (Megatron-LM's schedule requires it).

Values the user names that break a rule are reported with the rule (`Rejections`); the default candidates are
those that can be legal, so a search says why only about what was asked for.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.paths import Layout as Checkout
from ..errors import UsageError, ValidationError
from ..estimate.flops import RECOMPUTE
from ..formats.workload import ModelShape
from .layout import Layout

OBJECTIVES = ("step", "tokens-per-second", "gpu-hours")
SCHEDULES = ("1f1b", "interleaved")
ZERO = (0, 1, 2, 3)
CP_DEGREES = (1, 2, 4, 8, 16, 32)
VIRTUAL_STAGES = (2, 3, 4, 5, 6, 7, 8)
MAX_MICRO_BATCH = 16
# A search this large asks for --max-layouts: ~100 s of evaluation on one core before pruning.
DEFAULT_MAX_LAYOUTS = 200_000


def workload_layout(t: Any) -> Layout:
    """The point of the space a workload's `training` block states (CP 1: the format has no context parallelism),
    its unstated choices read as the step model reads them: ZeRO-3 when sharded else 0, selective recompute."""
    zero = t.zero if t.zero is not None else (3 if t.sharded else 0)
    recompute = t.recompute or "selective"
    return Layout(
        t.tp * t.pp * t.dp, t.tp, t.pp, t.dp, 1, t.ep, t.micro_batch, t.microbatches, zero, recompute, t.schedule,
        t.virtual_stages,
    )  # fmt: skip


@dataclass(frozen=True)
class ModelSpec:
    """The model a search is for, and the defaults its workload file states (sequence, global batch, GPUs)."""

    id: str
    shape: ModelShape
    source: str
    grad_dtype: str = "bf16"
    optimizer_layout: str = "mixed-adam"
    seq_len: int | None = None
    global_batch: int | None = None
    gpus: int | None = None
    serving: dict[str, Any] = field(default_factory=dict)

    @property
    def heads(self) -> int:
        return self.shape.heads or self.shape.hidden // self.shape.head_dim


def load_model_spec(lay: Checkout, model: str) -> ModelSpec:
    """`--model`: a workload id (models/workloads/<id>.yaml), a workload file, or a YAML file whose `model:` block
    is a model definition (params, layers, hidden, kv_heads, head_dim, dtype, optional heads and experts)."""
    from ..estimate.workloads import find_workload, load_workload

    path = Path(model)
    if path.suffix not in (".yaml", ".yml"):
        w = find_workload(lay, model)
    else:
        if not path.is_file():
            raise UsageError(f"--model {model}: no such file (expected a workload id or a YAML model definition)")
        from ..core.schemas import load_yaml

        data, doc = load_yaml(path)
        if isinstance(data, dict) and "kind" in data:
            w = load_workload(path)
        else:
            return _definition(path, data, doc)
    spec: dict[str, Any] = {}
    if w.training is not None:
        t = w.training
        spec = {
            "grad_dtype": t.grad_dtype,
            "optimizer_layout": t.optimizer_layout,
            "seq_len": t.seq_len,
            "global_batch": t.micro_batch * t.microbatches * t.dp,
            "gpus": t.tp * t.pp * t.dp,
        }
    elif w.inference is not None:
        i = w.inference
        spec = {"serving": {"prompt_tokens": i.prompt_tokens, "output_tokens": i.output_tokens}}
        if i.requests_per_second is not None:
            spec["serving"]["requests_per_second"] = i.requests_per_second
    where = str(w.path.relative_to(lay.root)) if w.path and w.path.is_relative_to(lay.root) else str(w.path)
    return ModelSpec(id=w.id, shape=w.model, source=where, **spec)


def _definition(path: Path, data: Any, doc: Any) -> ModelSpec:
    from pydantic import ValidationError as PydanticError

    from ..core.schemas import _line_of, json_path

    block = data.get("model") if isinstance(data, dict) else None
    if not isinstance(block, dict):
        raise ValidationError(f"{path}: at $.model: expected a mapping (params, layers, hidden, kv_heads, ...)")
    try:
        shape = ModelShape.model_validate(block)
    except PydanticError as exc:
        lines = []
        for err in exc.errors()[:10]:
            parts = ["model", *err["loc"]]
            line = _line_of(doc, parts)
            lines.append(f"{path}{f':{line}' if line else ''}: at {json_path(parts)}: {err['msg']}")
        raise ValidationError("\n".join(lines)) from None
    return ModelSpec(id=path.stem, shape=shape, source=str(path))


@dataclass(frozen=True)
class TrainRequest:
    """What a training search is asked: validated once (`checked`), every bad value named by its option."""

    model: ModelSpec
    cluster: str
    gpus: tuple[int, ...]
    global_batch: int
    seq: int
    objective: str = "step"
    top: int = 10
    max_layouts: int = DEFAULT_MAX_LAYOUTS
    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    zero: tuple[int, ...] | None = None
    recompute: tuple[str, ...] | None = None
    schedule: tuple[str, ...] | None = None
    micro_batch: tuple[int, ...] | None = None
    max_micro_batch: int = MAX_MICRO_BATCH


def _whole(value: Any, option: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{option} {value!r}: expected a whole number ≥ {minimum}")
    if value > 2**53:
        raise UsageError(f"{option} {value}: expected a whole number of magnitude at most 2**53")
    return value


def train_request(
    model: ModelSpec,
    cluster: str,
    total_gpus: int,
    *,
    gpus: tuple[int, ...] | None = None,
    global_batch: int | None = None,
    seq: int | None = None,
    objective: str = "step",
    top: int = 10,
    max_layouts: int = DEFAULT_MAX_LAYOUTS,
    **filters: Any,
) -> TrainRequest:
    """A validated request: the workload's defaults where an option is not given, each value checked against the
    option that set it (so an error names `--gpus`, not a field of some file)."""
    if objective not in OBJECTIVES:
        raise UsageError(f"--objective {objective!r}: expected one of {', '.join(OBJECTIVES)}")
    _whole(top, "--top")
    _whole(max_layouts, "--max-layouts")
    checked: dict[str, Any] = {}
    for name, value in filters.items():
        if value is None:
            checked[name] = None
            continue
        option = f"--{name.replace('_', '-')}"
        if name == "max_micro_batch":
            checked[name] = _whole(value, option)
            continue
        values = tuple(dict.fromkeys(value))
        if not values:
            raise UsageError(f"{option}: expected at least one value")
        if name == "recompute":
            bad = [v for v in values if v not in RECOMPUTE]
            if bad:
                raise UsageError(f"{option} {bad[0]!r}: expected one of {', '.join(RECOMPUTE)}")
        elif name == "schedule":
            bad = [v for v in values if v not in SCHEDULES]
            if bad:
                raise UsageError(f"{option} {bad[0]!r}: expected one of {', '.join(SCHEDULES)}")
        elif name == "zero":
            bad = [v for v in values if v not in ZERO]
            if bad:
                raise UsageError(f"{option} {bad[0]!r}: expected a ZeRO stage 0, 1, 2 or 3")
        else:
            values = tuple(_whole(v, option) for v in values)
        checked[name] = values
    if gpus is None:
        gpus = (model.gpus,) if model.gpus else (total_gpus,)
        if gpus[0] > total_gpus:
            raise UsageError(
                f"{model.id} runs on {gpus[0]} GPUs ({model.source}); {cluster} has {total_gpus}: give --gpus"
            )
    gpus = tuple(dict.fromkeys(_whole(g, "--gpus") for g in gpus))
    for g in gpus:
        if g > total_gpus:
            raise UsageError(f"--gpus {g}: {cluster} has {total_gpus} accelerators")
    if global_batch is None:
        if model.global_batch is None:
            raise UsageError(f"--global-batch: required for {model.id} ({model.source} states no training batch)")
        global_batch = model.global_batch
    if seq is None:
        if model.seq_len is None:
            raise UsageError(f"--seq: required for {model.id} ({model.source} states no sequence length)")
        seq = model.seq_len
    _whole(global_batch, "--global-batch")
    _whole(seq, "--seq")
    return TrainRequest(
        model=model,
        cluster=cluster,
        gpus=gpus,
        global_batch=global_batch,
        seq=seq,
        objective=objective,
        top=top,
        max_layouts=max_layouts,
        **checked,
    )


class Rejections:
    """Why candidates were refused: each rule's sentence with how many layouts it removed (most first)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, reason: str, layouts: int = 1) -> None:
        self.counts[reason] += layouts

    def lines(self, n: int = 5) -> list[str]:
        """The `n` most frequent reasons, each with how many candidates (degree combinations) it refused."""
        out = [f"{reason} (×{count:,})" if count > 1 else reason for reason, count in self.counts.most_common(n)]
        rest = len(self.counts) - n
        return out + ([f"{rest} more reason{'s' if rest > 1 else ''}"] if rest > 0 else [])


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass(frozen=True)
class Cluster:
    """What the space needs to know of the cluster: its size and its scale-up domain."""

    id: str
    reference: str
    accelerators: int
    domain_size: int


def _tp_ok(tp: int, spec: ModelSpec, cluster: Cluster) -> str | None:
    m, d = spec.shape, cluster.domain_size
    if tp > d:
        return f"TP {tp} exceeds the {d}-GPU scale-up domain of {cluster.reference}"
    if d % tp:
        return f"TP {tp} does not divide the {d}-GPU scale-up domain: a TP group would straddle two domains"
    if spec.heads % tp:
        return f"TP {tp} does not divide the {spec.heads} attention heads of {spec.id}"
    if m.hidden % tp:
        return f"TP {tp} does not divide the hidden size {m.hidden} of {spec.id}"
    if m.kv_heads >= tp and m.kv_heads % tp:
        return f"TP {tp} does not divide the {m.kv_heads} KV heads of {spec.id}"
    return None


def training_layouts(req: TrainRequest, cluster: Cluster) -> tuple[list[Layout], Rejections]:
    """Every legal layout of the request in a fixed order (the same on every run and engine), and the rejections
    of values the request named. Larger than `max_layouts`: bad usage asking for --max-layouts."""
    spec, m = req.model, req.model.shape
    rejected = Rejections()
    experts = m.experts.count if m.experts is not None else None
    total = _count(req, cluster, spec, experts, rejected, build=False)[0]
    if total > req.max_layouts:
        raise UsageError(
            f"the search has {total:,} legal layouts, more than --max-layouts {req.max_layouts:,}: raise "
            "--max-layouts, or narrow it (--gpus, --tp, --pp, --cp, --zero, --recompute, --schedule)"
        )
    rejected = Rejections()
    _, layouts = _count(req, cluster, spec, experts, rejected, build=True)
    return layouts, rejected


def _count(
    req: TrainRequest, cluster: Cluster, spec: ModelSpec, experts: int | None, rejected: Rejections, build: bool
) -> tuple[int, list[Layout]]:
    m = spec.shape
    out: list[Layout] = []
    total = 0
    zeros = req.zero or ZERO
    recomputes = req.recompute or RECOMPUTE
    schedules = req.schedule or SCHEDULES
    tps = req.tp or tuple(divisors(cluster.domain_size))
    for tp in tps:
        why = _tp_ok(tp, spec, cluster)
        if why:
            rejected.add(why)
            continue
        for cp in req.cp or CP_DEGREES:
            if req.seq % cp:
                if req.cp:
                    rejected.add(f"CP {cp} does not divide the sequence of {req.seq} tokens")
                continue
            for gpus in req.gpus:
                if gpus % (tp * cp):
                    if req.tp or req.cp:
                        rejected.add(f"TP {tp} × CP {cp} does not divide {gpus} GPUs")
                    continue
                rest = gpus // (tp * cp)
                pps = req.pp or tuple(p for p in divisors(rest) if p <= m.layers)
                for pp in pps:
                    if pp > m.layers:
                        rejected.add(f"PP {pp} exceeds the {m.layers} layers of {spec.id}")
                        continue
                    if rest % pp:
                        rejected.add(f"TP {tp} × PP {pp} × CP {cp} does not divide {gpus} GPUs")
                        continue
                    dp = rest // pp
                    if req.global_batch % dp:
                        rejected.add(
                            f"the global batch of {req.global_batch} sequences does not split over DP {dp} replicas"
                        )
                        continue
                    local = req.global_batch // dp
                    eps = _eps(req, experts, tp * dp * cp, rejected)
                    mbs = [b for b in divisors(local) if b <= req.max_micro_batch]
                    if req.micro_batch:
                        for b in req.micro_batch:
                            if local % b:
                                rejected.add(f"micro-batch {b} does not divide the {local} sequences of a DP replica")
                        mbs = [b for b in divisors(local) if b in req.micro_batch]
                    for ep in eps:
                        for mb in mbs:
                            micro = local // mb
                            scheds = _schedules(schedules, pp, micro, m.layers, rejected, bool(req.schedule))
                            total += len(zeros) * len(recomputes) * len(scheds)
                            if not build:
                                continue
                            for zero in zeros:
                                for rc in recomputes:
                                    for name, v in scheds:
                                        out.append(Layout(gpus, tp, pp, dp, cp, ep, mb, micro, zero, rc, name, v))
    return total, out


def _eps(req: TrainRequest, experts: int | None, plane: int, rejected: Rejections) -> list[int]:
    if experts is None:
        if req.ep and any(e > 1 for e in req.ep):
            rejected.add(f"EP needs a mixture-of-experts model ({req.model.id} declares no experts)")
        return [1] if not req.ep or 1 in req.ep else []
    out = []
    for ep in req.ep or divisors(experts):
        if experts % ep:
            rejected.add(f"EP {ep} does not divide the {experts} experts")
        elif plane % ep:
            if req.ep:
                rejected.add(f"EP {ep} does not divide TP × DP × CP = {plane}")
        else:
            out.append(ep)
    return out


def _schedules(
    schedules: tuple[str, ...], pp: int, micro: int, layers: int, rejected: Rejections, asked: bool
) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    if "1f1b" in schedules:
        out.append(("1f1b", 1))
    if "interleaved" in schedules:
        if pp < 2:
            if asked:
                rejected.add("the interleaved schedule needs PP ≥ 2")
        elif micro % pp:
            if asked:
                rejected.add(f"the interleaved schedule needs micro-batches a multiple of PP {pp} (have {micro})")
        else:
            out += [("interleaved", v) for v in VIRTUAL_STAGES if v * pp <= layers]
    return out
