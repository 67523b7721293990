"""What the topology may use about a reference: its facts (pipeline/core/facts.py) and the topology defaults."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..core.facts import Fact, Facts, load_facts  # noqa: F401  (where the topology code finds them)
from ..core.paths import PARAMS_FILE, Layout
from ..core.schemas import Merged, at_params, load_yaml, params_overlay, validate
from ..errors import ValidationError


@dataclass(frozen=True)
class Defaults:
    latency_ns: dict[str, float]
    host_gbps: float
    host_why: str


# The defaults people vary live in params.yaml under `topology`, at their path in defaults.yaml
# (`topology.latency_ns.scale_up`), never in both; defaults.yaml keeps the host link's unit and why.
KNOBS = {
    "latency_ns": ("scale_up", "host", "scale_out", "frontend", "endpoint"),
    "host_link": ("bandwidth",),
}


def _place(data: dict[str, Any], parts: tuple[str, ...], value: Any) -> list[str]:
    known = KNOBS.get(parts[0], ()) if len(parts) == 2 else ()
    if parts[-1] not in known:
        raise ValueError(f"not a topology default; expected one of {', '.join(known or KNOBS)}")
    return list(parts)


def merge_params(data: Any, doc: Any, path: Path) -> list[Merged]:
    """Put params.yaml's `topology` values into the defaults document (<root>/models/topology/defaults.yaml)."""
    return params_overlay(data, doc, path, ("topology",), _place)


@cache
def _defaults(path: Path, params_mtime_ns: int) -> Defaults:
    from ..core.units import Quantity

    data, doc = load_yaml(path)
    merged = merge_params(data, doc, path)
    try:
        validate(data, "topology-defaults.schema.json", path, doc)
    except ValidationError as e:
        raise at_params(e, path, merged) from None
    host = data["host_link"]
    gbps = Quantity(host["bandwidth"], host["unit"], "per_direction").to("Gb/s", "per_direction").value
    return Defaults(data["latency_ns"], gbps, host["why"])


def defaults(lay: Layout) -> Defaults:
    params = lay.root / PARAMS_FILE
    return _defaults(
        lay.root / "models" / "topology" / "defaults.yaml", params.stat().st_mtime_ns if params.is_file() else 0
    )


# registry/topology/defaults.json: the defaults the topology was built with, so a reader of the built wiring can
# tell that params.yaml has moved on since (`stale_defaults`).
BUILT_WITH = "defaults.json"


def built_with(lay: Layout) -> dict[str, Any]:
    """The `topology` knobs as the topology stage uses them (params.yaml over defaults.yaml)."""
    d = defaults(lay)
    return {"latency_ns": dict(sorted(d.latency_ns.items())), "host_link": {"bandwidth_gbps": d.host_gbps}}


def stale_defaults(lay: Layout) -> list[str]:
    """Each `topology` knob params.yaml now sets otherwise than registry/topology/ was built with: the estimates
    read the built wiring, so until `dvc repro` they use the old value."""
    import json

    path = lay.registry_dir / "topology" / BUILT_WITH
    try:
        built = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []  # not built yet, or built before the file existed: `dvc status` tells
    moved = []
    for section, values in built_with(lay).items():
        for key, value in values.items():
            old = (built.get(section) or {}).get(key) if isinstance(built, dict) else None
            if old != value:
                knob, unit = ("bandwidth", "Gb/s per direction") if key == "bandwidth_gbps" else (key, "ns")
                moved.append(
                    f"topology.{section}.{knob}: registry/topology/ was built with {_shown(old, unit)}, params.yaml "
                    f"now gives {_shown(value, unit)}; the estimates use the built wiring until `dvc repro`"
                )
    return moved


def _shown(value: Any, unit: str) -> str:
    return f"{value:g} {unit}" if isinstance(value, int | float) else "no value"
