"""Workload models (`models/workloads/<id>.yaml`): validated, typed, defaults filled in by the format."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UsageError, ValidationError
from ..core.paths import Layout, check_slug
from ..core.schemas import load_model, load_yaml
from ..formats.workload import Inference, InferenceWorkload, ModelShape, Training, TrainingWorkload, WorkloadFile


@dataclass(frozen=True)
class Workload:
    """A workload as loaded: typed parts (pipeline/formats/workload.py) carrying every default, so code reads
    `w.training.ep` and never repeats a default. Exactly one of `training` / `inference` is set, as `kind` says."""

    id: str
    title: str
    kind: str
    model: ModelShape
    training: Training | None
    inference: Inference | None
    targets: tuple[str, ...]
    shares_with: str | None
    path: Path | None

    @property
    def accelerators(self) -> int:
        if self.training is not None:
            t = self.training
            return t.tp * t.pp * t.dp
        i = self.inference
        assert i is not None
        return i.prefill_tp + i.decode_tp if i.mode == "disaggregated" else i.tp


def load_workload(path: Path) -> Workload:
    data, doc = load_yaml(path)
    model: TrainingWorkload | InferenceWorkload = load_model(WorkloadFile, data, "workload.schema.json", path, doc)
    check_slug(model.id, f"workload id in {path}")
    if model.id != path.stem:
        raise ValidationError(f"{path}: at $.id: {model.id!r} must equal the file name {path.stem!r}")
    t = model.training if isinstance(model, TrainingWorkload) else None
    if t and t.ep > 1 and model.model.experts is None:
        raise ValidationError(f"{path}: at $.training.ep: expert parallelism needs model.experts")
    if t and t.ep > 1 and (t.dp * t.tp) % t.ep:
        raise ValidationError(f"{path}: at $.training.ep: ep {t.ep} must divide dp × tp = {t.dp * t.tp}")
    if t and t.sharded and t.zero not in (None, 3):
        raise ValidationError(f"{path}: at $.training.zero: sharded (FSDP) is ZeRO-3; zero {t.zero} contradicts it")
    e = model.model.experts
    if e is not None and e.params is not None and e.params > model.model.params:
        raise ValidationError(
            f"{path}: at $.model.experts.params: {e.params:g} exceeds the model's params {model.model.params:g}"
        )
    return Workload(
        id=model.id,
        title=model.title,
        kind=model.kind,
        model=model.model,
        training=t,
        inference=model.inference if isinstance(model, InferenceWorkload) else None,
        targets=tuple(model.targets),
        shares_with=model.shares_with,
        path=path,
    )


def workload_paths(lay: Layout) -> list[Path]:
    return sorted((lay.root / "models" / "workloads").glob("*.yaml"))


def find_workload(lay: Layout, workload_id: str) -> Workload:
    try:
        check_slug(workload_id, "workload id")
    except ValidationError as exc:
        raise UsageError(str(exc)) from None
    path = lay.root / "models" / "workloads" / f"{workload_id}.yaml"
    if not path.exists():
        known = ", ".join(p.stem for p in workload_paths(lay))
        raise UsageError(f"no workload {workload_id!r}; known: {known}")
    return load_workload(path)
