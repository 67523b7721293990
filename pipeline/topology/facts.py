"""What the topology may use about a reference: its facts (pipeline/core/facts.py) and the topology defaults."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..core.facts import Fact, Facts, load_facts  # noqa: F401  (where the topology code has always found them)
from ..core.paths import Layout
from ..core.schemas import load_yaml, validate


@dataclass(frozen=True)
class Defaults:
    latency_ns: dict[str, float]
    host_gbps: float
    host_why: str


@cache
def _defaults(path: Path) -> Defaults:
    from ..core.units import Quantity

    data, doc = load_yaml(path)
    validate(data, "topology-defaults.schema.json", path, doc)
    host = data["host_link"]
    gbps = Quantity(host["bandwidth"], host["unit"], "per_direction").to("Gb/s", "per_direction").value
    return Defaults(data["latency_ns"], gbps, host["why"])


def defaults(lay: Layout) -> Defaults:
    return _defaults(lay.root / "models" / "topology" / "defaults.yaml")
