"""`models/topology/defaults.yaml`: labelled teaching defaults for topologies (latencies, host link)."""

from __future__ import annotations

from pydantic import Field

from .common import Strict


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
