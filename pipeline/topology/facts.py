"""What the topology may use about a reference: its facts (pipeline/core/facts.py) and the topology defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..core.facts import Fact, Facts, load_facts  # noqa: F401  (where the topology code finds them)
from ..core.paths import PARAMS_FILE, Layout, checkout_params
from ..core.schemas import _line_of, at_params, load_yaml, validate
from ..errors import ValidationError


@dataclass(frozen=True)
class Defaults:
    latency_ns: dict[str, float]
    host_gbps: float
    host_why: str


# The teaching defaults people vary (issue 17) live in the checkout's params.yaml under `topology`, at the same
# path as in defaults.yaml (`topology.latency_ns.scale_up`, `topology.host_link.bandwidth`), so `dvc params diff`
# shows them and `dvc exp run -S` varies them; defaults.yaml keeps the host link's unit and why. Never both places.
PARAMS_KEY = "topology"
KNOBS = {
    "latency_ns": ("scale_up", "host", "scale_out", "frontend", "endpoint"),
    "host_link": ("bandwidth",),
}


def merge_params(data: Any, doc: Any, path: Path) -> dict[str, str]:
    """Put params.yaml's `topology` values into the defaults document (<root>/models/topology/defaults.yaml);
    refuse a value set in both places, a key that is not a default, and a value that is not a number. Returns
    where each merged value is written (for `at_params`)."""
    merged: dict[str, str] = {}
    params = checkout_params(path, "topology")
    if params is None or not isinstance(data, dict):
        return merged
    pdata, pdoc = load_yaml(params)
    block = pdata.get(PARAMS_KEY) if isinstance(pdata, dict) else None
    if block is None:
        return merged
    if not isinstance(block, dict):
        raise ValidationError(f"{params}:{_line_of(pdoc, [PARAMS_KEY])}: at $.{PARAMS_KEY}: expected a mapping")
    for group, values in block.items():
        at = f"{params}:{_line_of(pdoc, [PARAMS_KEY, group])}: at $.{PARAMS_KEY}.{group}"
        if group not in KNOBS or not isinstance(values, dict):
            raise ValidationError(
                f"{at}: expected one of {', '.join(KNOBS)}, each a mapping of its values (see {path.name})"
            )
        target = data.setdefault(group, {})
        if not isinstance(target, dict):
            raise ValidationError(f"{path}:{_line_of(doc, [group])}: at $.{group}: expected a mapping")
        for key, value in values.items():
            set_at = f"{params}:{_line_of(pdoc, [PARAMS_KEY, group, key])}"
            where = f"{set_at}: at $.{PARAMS_KEY}.{group}.{key}"
            if key not in KNOBS[group]:
                raise ValidationError(f"{where}: not a topology default; expected one of {', '.join(KNOBS[group])}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValidationError(f"{where}: expected a number ≥ 0, got {value!r}")
            if key in target:
                raise ValidationError(
                    f"{path}:{_line_of(doc, [group, key])}: at $.{group}.{key}: also set in {set_at} "
                    f"({PARAMS_KEY}.{group}.{key}); a value lives in one place: remove it from {path.name}"
                )
            target[key] = value
            merged[f"$.{group}.{key}"] = where
    return merged


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
