"""`models/clusters/<id>.yaml`: building blocks of one reference on a declared scale-out fabric and a separate
frontend (counts may name a parameter of the building block's reference, `{param: name}`); and
`models/topology/defaults.yaml`, the labelled teaching defaults every topology is built with."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from .common import Slug, Strict, Title


class ParamRef(Strict):
    """A count taken from a parameter of the reference named by `parameters_from`."""

    model_config = ConfigDict(title="param")
    param: str = Field(min_length=1)


Count = Annotated[int, Field(ge=1)] | ParamRef


class Ecmp(Strict):
    """How switches split flows over equal-cost paths. uniform: every flow spread evenly over all of them (a
    fluid average). hash: each flow takes ONE path, chosen per hop by a deterministic hash of (source, destination,
    seed) — BLAKE2b, the same on every run and platform — so colliding flows make real hot links."""

    mode: Literal["uniform", "hash"] = "uniform"
    seed: int = Field(default=0, ge=0, le=2**32 - 1)

    @model_validator(mode="after")
    def _seed_only_with_hash(self) -> Ecmp:
        # A seed under uniform would be read by nobody: the designer who wrote it meant hash.
        if self.mode != "hash" and "seed" in self.model_fields_set:
            raise ValueError("`seed` only applies to mode hash; expected mode: hash, or no seed with mode uniform")
        return self


class DesignSource(Strict):
    url: str
    publisher: str | None = None
    states: str


class InNetworkReduction(Strict):
    """Reduction the scale-out switches perform (InfiniBand SHARP, which NCCL runs as CollNet). A cluster declares
    it only with its label: a document that states it (`source`) or a design assumption and why (`assumed`), so
    CollNet is never costed for a fabric no one said has it."""

    kind: Literal["sharp"] = Field(description="sharp: InfiniBand SHARP in the switches (NCCL's CollNet).")
    source: DesignSource | None = Field(default=None, description="The document that states the fabric has it.")
    assumed: str | None = Field(
        default=None, min_length=3, description="Instead of a source: why this model assumes it (a design choice)."
    )

    @model_validator(mode="after")
    def _labelled(self) -> InNetworkReduction:
        if (self.source is None) == (self.assumed is None):
            raise ValueError("in-network reduction needs exactly one label: a source or assumed (with why)")
        return self


class ScaleOut(Strict):
    protocol: str = ""
    tiers: Literal[2, 3]
    rail_optimized: bool
    leaf_down_ports: Count
    leaf_up_ports: Count
    leaves_per_pod: Count
    spines_per_pod: Count
    spine_up_ports: Count | None = Field(default=None, description="Three tiers: uplink ports per spine.")
    spine_oversubscription: float | None = Field(
        default=None,
        ge=1,
        description="Three tiers, instead of spine_up_ports: spine downlink to uplink bandwidth ratio, when the "
        "port count is not published.",
    )
    cores_per_plane: Count = 1
    switch_radix: Count | None = None
    switch_product: Slug | None = Field(
        default=None,
        description="A `switch` reference (models/references/<id>.yaml) every scale-out switch of this fabric is "
        "an instance of: the radix and port speed then come from its switch.ports and switch.port_speed, with "
        "their statuses; a declared switch_radix must agree.",
    )
    switch_port_split: int = Field(
        default=1,
        ge=1,
        le=8,
        description="Each native port of the named switch run as this many ports at port speed / split (2: an "
        "800G port as 2 x 400G). A design choice: list it under `assumptions`.",
    )
    ecmp: Ecmp = Field(default_factory=Ecmp, description="Equal-cost multipath: uniform split (default) or hash.")
    in_network_reduction: InNetworkReduction | None = Field(
        default=None,
        description="In-network reduction the fabric performs (InfiniBand SHARP), with its source or assumption; "
        "absent: none, and CollNet is never costed.",
    )
    notes: str | None = None

    @model_validator(mode="after")
    def _split_needs_product(self) -> ScaleOut:
        if self.switch_port_split != 1 and self.switch_product is None:
            raise ValueError("switch_port_split splits the ports of a named switch_product; name one")
        return self


class Frontend(Strict):
    blocks_per_switch: int = Field(ge=1)
    notes: str | None = None


class DesignAssumption(Strict):
    """A design choice of a modelled cluster that no document states, labelled with the reason it was made."""

    name: str = Field(min_length=2, description="What is assumed, e.g. 'scale-out protocol'.")
    value: str = Field(min_length=1)
    why: str = Field(min_length=3)


class ClusterFile(Strict):
    """A cluster: building blocks of one reference on a declared scale-out fabric and a separate frontend."""

    id: Slug
    title: Title
    kind: Literal["illustrative", "modelled-on-published", "modelled-design"] = Field(
        description="A cluster model is never a vendor reference. modelled-on-published follows a published "
        "design; modelled-design is this project's own design around vendor parts, every choice in `assumptions`."
    )
    summary: str = ""
    parameters_from: Slug | None = Field(
        default=None,
        description="Reference whose parameters {param: name} values read (an illustrative model's design choices).",
    )
    design_sources: list[DesignSource] = Field(default_factory=list)
    assumptions: list[DesignAssumption] = Field(
        default_factory=list, description="Design choices no document states (required for a modelled-design)."
    )
    building_block: Slug = Field(description="The reference every block is an instance of.")
    building_blocks: Count
    blocks_per_rack: int | None = Field(
        default=None, ge=1, description="Containment only: how blocks are grouped into racks."
    )
    scale_out: ScaleOut
    frontend: Frontend
    placement: Literal["fill-domains", "spread"] = Field(
        default="fill-domains",
        description="Where a workload's ranks sit when the workload does not say (its `placement`).",
    )

    @model_validator(mode="after")
    def _design_is_labelled(self) -> ClusterFile:
        # A design of our own must say what it assumed, or it would read as a published one.
        if self.kind == "modelled-design" and not self.assumptions:
            raise ValueError("a modelled-design cluster lists its design choices under `assumptions`")
        return self


class LatencyNs(Strict):
    scale_up: float = Field(gt=0)
    host: float = Field(gt=0)
    scale_out: float = Field(gt=0)
    frontend: float = Field(gt=0)
    endpoint: float = Field(ge=0)


class HostLink(Strict):
    bandwidth: float = Field(gt=0)
    unit: str
    why: str


class TopologyDefaults(Strict):
    """Labelled teaching defaults for topologies (latencies, host link)."""

    latency_ns: LatencyNs
    host_link: HostLink
