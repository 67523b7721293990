"""Workload models (`models/workloads/<id>.yaml`), schema-validated."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import UsageError, ValidationError
from ..core.paths import Layout, check_slug
from ..core.schemas import load_yaml, validate


@dataclass(frozen=True)
class Workload:
    id: str
    title: str
    kind: str
    model: dict[str, Any]
    training: dict[str, Any] | None
    inference: dict[str, Any] | None
    targets: tuple[str, ...]
    shares_with: str | None
    path: Path | None

    @property
    def accelerators(self) -> int:
        if self.training:
            t = self.training
            return t["tp"] * t["pp"] * t["dp"]
        i = self.inference or {}
        if i["mode"] == "disaggregated":
            return i.get("prefill_tp", 1) + i.get("decode_tp", 1)
        return i.get("tp", 1)


def load_workload(path: Path) -> Workload:
    data, doc = load_yaml(path)
    validate(data, "workload.schema.json", path, doc)
    check_slug(data["id"], f"workload id in {path}")
    if data["id"] != path.stem:
        raise ValidationError(f"{path}: at $.id: {data['id']!r} must equal the file name {path.stem!r}")
    t = data.get("training")
    if t and t.get("ep", 1) > 1 and "experts" not in data["model"]:
        raise ValidationError(f"{path}: at $.training.ep: expert parallelism needs model.experts")
    if t and t.get("ep", 1) > 1 and (t["dp"] * t["tp"]) % t["ep"]:
        raise ValidationError(f"{path}: at $.training.ep: ep {t['ep']} must divide dp × tp = {t['dp'] * t['tp']}")
    return Workload(
        data["id"],
        data["title"],
        data["kind"],
        data["model"],
        t,
        data.get("inference"),
        tuple(data["targets"]),
        data.get("shares_with"),
        path,
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
