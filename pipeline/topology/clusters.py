"""Cluster models (`models/clusters/<id>.yaml`): how many building blocks, and the scale-out fabric
(rail-optimized or not, two or three tiers, ports per tier, oversubscription) and the separate frontend."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import CompileError, UsageError
from ..core.paths import Layout, check_slug
from ..core.schemas import load_yaml, validate


@dataclass(frozen=True)
class Fabric:
    tiers: int
    rail_optimized: bool
    leaf_down: int
    leaf_up: int
    leaves_per_pod: int
    spines_per_pod: int
    spine_up: int | None
    spine_oversubscription: float | None
    cores_per_plane: int
    radix: int | None
    protocol: str


@dataclass(frozen=True)
class Cluster:
    id: str
    title: str
    kind: str
    summary: str
    building_block: str
    blocks: int
    blocks_per_rack: int | None
    fabric: Fabric
    frontend_blocks_per_switch: int
    path: Path | None
    design_sources: tuple[dict[str, str], ...] = ()


def _resolve(value: Any, params: dict[str, Any], where: str) -> int:
    if isinstance(value, dict):
        name = value["param"]
        if name not in params:
            raise CompileError(f"{where}: no parameter {name!r} in the referenced model")
        number = params[name]["value"]
        if number != int(number):
            raise CompileError(f"{where}: parameter {name} = {number} is not a whole number")
        return int(number)
    return int(value)


def load_cluster(path: Path, params_for: Any) -> Cluster:
    data, doc = load_yaml(path)
    validate(data, "cluster.schema.json", path, doc)
    check_slug(data["id"], f"cluster id in {path}")
    if data["id"] != path.stem:
        raise CompileError(f"{path}: at $.id: {data['id']!r} must equal the file name {path.stem!r}")
    params = params_for(data["parameters_from"]) if data.get("parameters_from") else {}
    so = data["scale_out"]

    def r(key: str, default: Any = None) -> Any:
        return _resolve(so[key], params, f"{path}: at $.scale_out.{key}") if key in so else default

    fabric = Fabric(
        tiers=so["tiers"],
        rail_optimized=so["rail_optimized"],
        leaf_down=r("leaf_down_ports"),
        leaf_up=r("leaf_up_ports"),
        leaves_per_pod=r("leaves_per_pod"),
        spines_per_pod=r("spines_per_pod"),
        spine_up=r("spine_up_ports"),
        spine_oversubscription=so.get("spine_oversubscription"),
        cores_per_plane=r("cores_per_plane", 1),
        radix=r("switch_radix"),
        protocol=so.get("protocol", ""),
    )
    if fabric.tiers == 3 and (fabric.spine_up is None) == (fabric.spine_oversubscription is None):
        raise CompileError(
            f"{path}: at $.scale_out: a three-tier fabric needs spine_up_ports or spine_oversubscription (exactly one)"
        )
    return Cluster(
        id=data["id"],
        title=data["title"],
        kind=data["kind"],
        summary=data.get("summary", ""),
        building_block=data["building_block"],
        blocks=_resolve(data["building_blocks"], params, f"{path}: at $.building_blocks"),
        blocks_per_rack=data.get("blocks_per_rack"),
        fabric=fabric,
        frontend_blocks_per_switch=data["frontend"]["blocks_per_switch"],
        path=path,
        design_sources=tuple(data.get("design_sources", [])),
    )


def cluster_paths(lay: Layout) -> list[Path]:
    return sorted((lay.root / "models" / "clusters").glob("*.yaml"))


def find_cluster(lay: Layout, cluster_id: str) -> Path | None:
    try:
        check_slug(cluster_id, "cluster id")
    except Exception as exc:  # a bad id is bad usage here, not a validation failure
        raise UsageError(str(exc)) from None
    path = lay.root / "models" / "clusters" / f"{cluster_id}.yaml"
    return path if path.exists() else None
