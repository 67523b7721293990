"""Cluster models (`models/clusters/<id>.yaml`): how many building blocks, and the scale-out fabric
(rail-optimized or not, two or three tiers, ports per tier, oversubscription) and the separate frontend."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.paths import Layout, check_slug
from ..core.schemas import load_model, load_yaml
from ..errors import CompileError, UsageError
from ..formats.cluster import ClusterFile, DesignSource, ParamRef, ScaleOut


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
    switch_product: str | None = None
    port_split: int = 1
    ecmp_mode: str = "uniform"  # how switches split flows over equal-cost paths (formats/cluster.py: Ecmp)
    ecmp_seed: int = 0
    in_network_reduction: str | None = None  # "sharp" when declared
    in_network_reduction_basis: str | None = None  # "source: URL: what it states" or "assumed: why"


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
    design_sources: tuple[DesignSource, ...] = ()
    placement: str = "fill-domains"  # where a workload's ranks sit when it does not say


# The topology is built node by node (networkx), so its size is bounded before anything is built: 65,536
# building blocks is 21x the largest shipped cluster (3,072 servers), and no switch has more ports than this.
MAX_BUILDING_BLOCKS = 65_536
MAX_COUNT = 65_536
# ... and what the blocks make is bounded too, since a block may be a rack of hundreds of nodes (65,536 NVL72 racks
# are 13 million): about 6x the largest shipped cluster (86,000 nodes, 234,000 links; ~1 s to build).
MAX_NODES = 500_000
MAX_LINKS = 1_500_000


def _resolve(value: int | ParamRef, params: dict[str, Any], where: str, limit: int = MAX_COUNT) -> int:
    if isinstance(value, ParamRef):
        if value.param not in params:
            raise CompileError(f"{where}: no parameter {value.param!r} in the referenced model")
        number = params[value.param]["value"]
        if number != int(number):
            raise CompileError(f"{where}: parameter {value.param} = {number} is not a whole number")
        number, shown = int(number), f"parameter {value.param} = {int(number)}"
    else:
        number, shown = int(value), str(int(value))
    if number > limit:
        raise CompileError(
            f"{where}: {shown} is too large; expected at most {limit:,} (the topology is built node by node)"
        )
    return number


def _in_network(so: ScaleOut) -> dict[str, str | None]:
    """The declared in-network reduction and its label, as the graph carries them (nothing when undeclared)."""
    inr = so.in_network_reduction
    if inr is None:
        return {}
    src = inr.source
    basis = f"source: {src.url}: {src.states}" if src is not None else f"assumed: {inr.assumed}"
    return {"in_network_reduction": inr.kind, "in_network_reduction_basis": basis}


def load_cluster(path: Path, params_for: Any) -> Cluster:
    """A cluster model, every `{param: name}` count resolved from `params_for(parameters_from)`."""
    data, doc = load_yaml(path)
    model: ClusterFile = load_model(ClusterFile, data, "cluster.schema.json", path, doc)
    check_slug(model.id, f"cluster id in {path}")
    if model.id != path.stem:
        raise CompileError(f"{path}: at $.id: {model.id!r} must equal the file name {path.stem!r}")
    params = params_for(model.parameters_from) if model.parameters_from else {}
    so = model.scale_out

    def r(key: str) -> Any:
        value = getattr(so, key)
        return None if value is None else _resolve(value, params, f"{path}: at $.scale_out.{key}")

    fabric = Fabric(
        **{k: getattr(so, k) for k in ("tiers", "rail_optimized", "spine_oversubscription", "protocol")},
        leaf_down=r("leaf_down_ports"),
        leaf_up=r("leaf_up_ports"),
        leaves_per_pod=r("leaves_per_pod"),
        spines_per_pod=r("spines_per_pod"),
        spine_up=r("spine_up_ports"),
        cores_per_plane=r("cores_per_plane"),
        radix=r("switch_radix"),
        switch_product=so.switch_product,
        port_split=so.switch_port_split,
        ecmp_mode=so.ecmp.mode,
        ecmp_seed=so.ecmp.seed,
        **_in_network(so),
    )
    if fabric.tiers == 3 and (fabric.spine_up is None) == (fabric.spine_oversubscription is None):
        raise CompileError(
            f"{path}: at $.scale_out: a three-tier fabric needs spine_up_ports or spine_oversubscription (exactly one)"
        )
    return Cluster(
        **{k: getattr(model, k) for k in ("id", "title", "kind", "summary", "building_block", "blocks_per_rack")},
        blocks=_resolve(model.building_blocks, params, f"{path}: at $.building_blocks", MAX_BUILDING_BLOCKS),
        fabric=fabric,
        frontend_blocks_per_switch=model.frontend.blocks_per_switch,
        path=path,
        design_sources=tuple(model.design_sources),
        placement=model.placement,
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
