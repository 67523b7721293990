"""Workload models (`models/workloads/<id>.yaml`): validated, typed, defaults filled in by the format."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..core.paths import Layout, check_slug, checkout_params, workload_paths
from ..core.schemas import at_params, load_model, load_yaml, params_overlay, params_text
from ..errors import UnknownIdError, UsageError, ValidationError
from ..formats.workload import (
    Inference,
    InferenceWorkload,
    ModelShape,
    Placement,
    Training,
    TrainingWorkload,
    WorkloadFile,
    check_degrees,
)


@dataclass(frozen=True)
class Workload:
    """A workload as loaded: typed parts carrying every default; exactly one of `training` / `inference` is set."""

    id: str
    title: str
    kind: str
    model: ModelShape
    training: Training | None
    inference: Inference | None
    targets: tuple[str, ...]
    shares_with: str | None
    path: Path | None
    placement: Placement | None = None  # declared placement; None: the target cluster's default
    teaching: str | None = None  # "does not fit": shown for its traffic, not a runnable job
    summary: str = ""

    @property
    def accelerators(self) -> int:
        block = self.training or self.inference
        assert block is not None
        return block.ranks

    @property
    def used_ranks(self) -> list[int]:
        """The ranks the workload occupies (a disaggregated service may leave a gap before its decode pool)."""
        if self.training is not None:
            return list(range(self.accelerators))
        i = self.inference
        assert i is not None
        if i.mode == "aggregated":
            return list(range(i.tp))
        start = self.decode_start
        return sorted(set(range(i.prefill_tp)) | set(range(start, start + i.decode_tp)))

    @property
    def decode_start(self) -> int:
        """The rank where a disaggregated service's decode pool starts (default: right after the prefill pool)."""
        i = self.inference
        assert i is not None
        return i.prefill_tp if i.decode_pool_start is None else i.decode_pool_start


# The knobs people vary live in params.yaml (`workloads.<id>.<knob>`), or in the file outside a checkout; never both.
KNOBS = {"training": Training.KNOBS, "inference": Inference.KNOBS}


def _place(data: dict[str, Any], parts: tuple[str, ...], value: Any) -> list[str]:
    """Where a knob params.yaml sets goes in the workload document: its training / inference block."""
    kind = data.get("kind")
    if kind not in KNOBS:
        raise ValueError("the workload file must say its kind (training or inference)")
    block = data.get(kind)
    mode = block.get("mode") if isinstance(block, dict) and isinstance(block.get("mode"), str) else None
    knobs = knobs_of(kind, mode)
    if len(parts) != 1 or parts[0] not in knobs:
        raise ValueError(
            f"not a knob of a {_kind_label(kind, mode)} workload; expected one of {', '.join(knobs)} (the rest of a "
            f"workload lives in its file, models/workloads/{data.get('id')}.yaml)"
        )
    return [kind, parts[0]]


def standalone_text(path: Path) -> str:
    """The workload file as it reads outside a checkout: its knobs from params.yaml written into its block."""
    return params_text(path, ("workloads", path.stem), _place)


def load_workload(path: Path) -> Workload:
    data, doc = load_yaml(path)
    merged = params_overlay(data, doc, path, ("workloads", path.stem), _place)
    try:
        return _checked(data, doc, path)
    except ValidationError as e:
        raise _knobs_missing(e, path, data) or at_params(e, path, merged) from None


def _knobs_missing(e: ValidationError, path: Path, data: Any) -> ValidationError | None:
    """Knobs the workload needs and neither params.yaml nor the file sets: named where they belong, params.yaml's
    `workloads.<id>` in a checkout (not the file's block, where they were never written)."""
    params = checkout_params(path, "workloads")
    kind = data.get("kind") if isinstance(data, dict) else None
    if params is None or kind not in KNOBS:
        return None
    missing = re.findall(rf"at \$\.{kind}\.(\w+): (?:as `{kind}`: )?Field required", str(e))
    missing = [k for k in missing if k in KNOBS[kind]]
    if not missing:
        return None
    return ValidationError(
        f"{params}: at $.workloads.{path.stem}: {', '.join(missing)} missing: a workload's knobs live in "
        f"params.yaml under workloads.{path.stem} (its file, {path}, keeps the rest)"
    )


def _checked(data: Any, doc: Any, path: Path) -> Workload:
    """The merged workload document validated and checked across fields."""
    model: TrainingWorkload | InferenceWorkload = load_model(WorkloadFile, data, "workload.schema.json", path, doc)
    check_slug(model.id, f"workload id in {path}")
    if model.id != path.stem:
        raise ValidationError(f"{path}: at $.id: {model.id!r} must equal the file name {path.stem!r}")
    t = model.training if isinstance(model, TrainingWorkload) else None
    twice = sorted({x for x in model.targets if model.targets.count(x) > 1})
    if twice:
        raise ValidationError(
            f"{path}: at $.targets: {', '.join(twice)} listed twice; each target once (its traffic rows would double)"
        )
    if model.shares_with == model.id:
        raise ValidationError(
            f"{path}: at $.shares_with: {model.id!r} is this workload itself; name another workload that shares its "
            "cluster, or leave shares_with out"
        )
    _check_size(model, path)
    if t and t.ep > 1 and model.model.experts is None:
        raise ValidationError(f"{path}: at $.training.ep: expert parallelism needs model.experts")
    if t and t.ep > 1 and (t.dp * t.tp) % t.ep:
        raise ValidationError(f"{path}: at $.training.ep: ep {t.ep} must divide dp × tp = {t.dp * t.tp}")
    if t and t.sharded and t.zero not in (None, 3):
        raise ValidationError(f"{path}: at $.training.zero: sharded (FSDP) is ZeRO-3; zero {t.zero} contradicts it")
    if t and t.stage_layers is not None and sum(t.stage_layers) != model.model.layers:
        raise ValidationError(
            f"{path}: at $.training.stage_layers: the stages hold {sum(t.stage_layers)} layers; the model has "
            f"{model.model.layers}"
        )
    e = model.model.experts
    if e is not None and e.params is not None and e.params > model.model.params:
        raise ValidationError(
            f"{path}: at $.model.experts.params: {e.params:g} exceeds the model's params {model.model.params:g}"
        )
    if t is not None:
        try:
            check_degrees(model.model, t, str(path))  # here, so a knob params.yaml set is named at its line
        except UsageError as exc:
            raise ValidationError(str(exc)) from None
    same = ("id", "title", "kind", "model", "shares_with", "placement", "teaching", "summary")
    w = Workload(
        **{k: getattr(model, k) for k in same},
        training=t,
        inference=model.inference if isinstance(model, InferenceWorkload) else None,
        targets=tuple(model.targets),
        path=path,
    )
    _check_ranges(w, path)
    return w


# What one workload may ask for, checked before anything is sized from it (2**20 ranks is 40x the largest topology
# the caps let be built).
MAX_RANKS = 2**20
MAX_DEGREE = 2**16
MAX_COUNT = 2**24  # micro-batches, tokens, requests in a batch


def _check_size(model: Any, path: Path) -> None:
    """Every parallel degree at most MAX_DEGREE, the ranks at most MAX_RANKS, every count at most MAX_COUNT."""
    kind = "training" if isinstance(model, TrainingWorkload) else "inference"
    block = model.training if kind == "training" else model.inference
    degrees = ("tp", "pp", "dp", "ep") if kind == "training" else ("tp", "prefill_tp", "decode_tp")
    for key in degrees:
        value = getattr(block, key, None)
        if isinstance(value, int) and value > MAX_DEGREE:
            raise ValidationError(f"{path}: at $.{kind}.{key}: {value:,} is too large; expected at most {MAX_DEGREE:,}")
    if kind == "training":
        ranks = block.tp * block.pp * block.dp
        if ranks > MAX_RANKS:
            largest = max(("tp", "pp", "dp"), key=lambda k: getattr(block, k))
            raise ValidationError(
                f"{path}: at $.training.{largest}: tp × pp × dp = {ranks:,} ranks; expected at most {MAX_RANKS:,}"
            )
    for key, value in block:
        if key not in degrees and isinstance(value, int) and not isinstance(value, bool) and value > MAX_COUNT:
            raise ValidationError(f"{path}: at $.{kind}.{key}: {value:,} is too large; expected at most {MAX_COUNT:,}")


def _check_ranges(w: Workload, path: Path) -> None:
    """Explicit ranges place every rank the workload uses exactly once, and no other rank."""
    if w.placement is None or w.placement.ranges is None:
        return
    used = set(w.used_ranks)
    owner: dict[int, int] = {}
    for k, rng in enumerate(w.placement.ranges):
        for r in range(rng.first_rank, rng.first_rank + rng.ranks):
            if r not in used:
                raise ValidationError(
                    f"{path}: at $.placement.ranges[{k}]: rank {r} is not a rank of this workload "
                    f"(it uses {len(used)}: {min(used)}–{max(used)})"
                )
            if r in owner:
                raise ValidationError(
                    f"{path}: at $.placement.ranges[{k}]: rank {r} is already placed by ranges[{owner[r]}]"
                )
            owner[r] = k
    missing = sorted(used - set(owner))
    if missing:
        raise ValidationError(
            f"{path}: at $.placement.ranges: rank {missing[0]} (and {len(missing) - 1} more) is not placed"
        )


# Beyond the knobs, what a what-if may set: a service's mode, and a placement strategy (ranges need a file).
CHOICES = {"training": ("placement",), "inference": ("mode", "placement")}


def knobs_of(kind: str, mode: str | None = None) -> tuple[str, ...]:
    """The knobs a workload of `kind` reads: a service only its `mode`'s pool sizes (every mode's when None)."""
    return Inference.knobs(mode) if kind == "inference" and mode in Inference.POOLS else KNOBS[kind]


def _kind_label(kind: str, mode: Any) -> str:
    """'training', or a service with its mode ('disaggregated inference') when the mode decides its knobs."""
    return f"{mode} {kind}" if kind == "inference" and mode in Inference.POOLS else kind


def with_knobs(w: Workload, knobs: dict[str, Any] | None) -> Workload:
    """`w` with some knobs (or its `mode`, or a `placement` strategy) set otherwise, validated as its file would be."""
    if not knobs:
        return w
    block = w.training if w.training is not None else w.inference
    assert block is not None
    mode = knobs.get("mode", getattr(block, "mode", None))
    allowed = (*knobs_of(w.kind, mode if isinstance(mode, str) else None), *CHOICES[w.kind])
    for key in knobs:
        if key not in allowed:
            label = _kind_label(w.kind, mode)
            raise UsageError(f"{key}: not a knob of this {label} workload; expected one of {', '.join(allowed)}")
    data = {f.name: getattr(w, f.name) for f in fields(w) if f.name not in ("path", "training", "inference")}
    data["targets"] = list(w.targets)
    written = block.model_dump(exclude_unset=True)
    if w.inference is not None and mode != w.inference.mode:  # the file's pool sizes are its own mode's
        written = {k: v for k, v in written.items() if k not in Inference.POOLS[w.inference.mode]}
    data[w.kind] = {**written, **{k: v for k, v in knobs.items() if k != "placement"}}
    if "placement" in knobs:  # a block of its own
        data["placement"] = {"strategy": knobs["placement"]}
    try:
        return _checked(data, None, w.path or Path(f"{w.id}.yaml"))
    except ValidationError as exc:  # a knob set for this estimate: named as it was given, not as the file's
        key = next((k for k in knobs if f"at $.{w.kind}.{k}: " in str(exc)), None)
        if key is None:
            raise
        reason = str(exc).split(f"at $.{w.kind}.{key}: ", 1)[1].removeprefix(f"as `{w.kind}`: ")
        raise UsageError(f"{key}={knobs[key]}: {reason}") from None


def find_workload(lay: Layout, workload_id: str) -> Workload:
    known = [p.stem for p in workload_paths(lay)]
    try:
        check_slug(workload_id, "workload id")
    except ValidationError as exc:
        raise UnknownIdError("workload", workload_id, known, str(exc)) from None
    path = lay.root / "models" / "workloads" / f"{workload_id}.yaml"
    if not path.exists():
        raise UnknownIdError("workload", workload_id, known)
    return load_workload(path)
