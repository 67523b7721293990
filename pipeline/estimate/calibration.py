"""The collective calibration (models/calibration/collectives.yaml): efficiencies and latencies as data, each
number with its status and provenance, so an estimate can say which statements it rests on and how firmly."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from ..core.paths import PARAMS_FILE, Layout
from ..core.schemas import _line_of, at_params, json_path, load_json, load_model, load_yaml, params_overlay, params_text
from ..core.store import SnapshotStore
from ..errors import ValidationError
from ..formats.calibration import CALIBRATION_PATH, SHA_RE, Calibration

# The assumed numbers people vary live in the checkout's params.yaml under `calibration`, at the same path as in
# the calibration file (`calibration.link_classes.nvlink5.efficiency`); the file keeps each one's status and note.
# Only a number no source states (status assumed) may live there: a published or measured number stays beside its
# source. Never both places.
PARAMS_BLOCK = ("calibration",)


def _place(data: dict[str, Any], parts: tuple[str, ...], value: Any) -> list[str]:
    """Where a number params.yaml sets goes: the `value` of the assumed number at the same path in the file."""
    if parts[-1] == "efficiency" and not 0 < value <= 1:
        raise ValueError(f"an efficiency is a fraction of line rate in (0, 1], got {value!r}")
    node: Any = data
    for part in parts:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or "status" not in node:
        raise ValueError(
            f"{CALIBRATION_PATH} holds no number at $.{'.'.join(parts)} (expected the path of an assumed number "
            "there, e.g. link_classes.nvlink5.efficiency)"
        )
    if node["status"] != "assumed":
        raise ValueError(
            f"the number is `{node['status']}` in {CALIBRATION_PATH}: a number with a source stays beside it; "
            "params.yaml holds only assumed numbers (status assumed)"
        )
    return [*parts, "value"]


def standalone_text(path: Path) -> str:
    """The calibration file as it reads outside a checkout: the numbers params.yaml sets written back in."""
    return params_text(path, PARAMS_BLOCK, _place)


def load_calibration_file(path: Path) -> Calibration:
    """Parse, merge the numbers params.yaml sets, and validate (pipeline/formats/calibration.py); every error names
    file:line, the JSON path and what was expected."""
    data, doc = load_yaml(path)
    merged = params_overlay(data, doc, path, PARAMS_BLOCK, _place)
    try:
        cal: Calibration = load_model(Calibration, data, "calibration.schema.json", path, doc)
    except ValidationError as e:
        raise at_params(e, path, merged) from None
    for dotted, n in cal.numbers():
        if n.source is not None and n.source not in cal.sources:
            parts = [*dotted.split("."), "source"]
            raise ValidationError(
                f"{_where(path, doc, parts)}: at {json_path(parts)}: source {n.source!r} is not declared under "
                f"`sources` (declared: {', '.join(sorted(cal.sources))})"
            )
    _check_measured(cal, path, doc)
    return cal


def _check_measured(cal: Calibration, path: Path, doc: object) -> None:
    """A number `measured` must name a measured log the checkout has pinned (sources/measured/, its bytes in the
    store): a status is a claim, and an estimate's confidence rises with it. Pins are read only when a measured
    number is declared."""
    measured = [(dotted, n) for dotted, n in cal.numbers() if n.status == "measured"]
    if not measured:
        return
    root = (
        path.parent.parent.parent if path.parent.name == "calibration" and path.parent.parent.name == "models" else None
    )
    pinned: set[str] = set()
    lay = Layout(root) if root is not None else None
    if lay is not None and lay.measured_dir.is_dir():
        store = SnapshotStore(lay.store_dir)
        for pin in sorted(lay.measured_dir.glob("*.json")):
            data = load_json(pin)
            sha = data.get("sha256") if isinstance(data, dict) else None
            if isinstance(sha, str) and re.fullmatch(SHA_RE, sha) and store.path_for(sha).is_file():
                pinned.add(sha)
    for dotted, n in measured:
        if n.measured_sha256 not in pinned:
            parts = [*dotted.split("."), "measured_sha256"]
            where = "sources/measured/" if lay is None else f"{lay.measured_dir}/"
            raise ValidationError(
                f"{_where(path, doc, parts)}: at {json_path(parts)}: {n.measured_sha256} names no measured log pinned "
                f"in {where} with its bytes in the store; a number is `measured` only with the log it was read from "
                "(pin it with `fabricref measured import`, or declare the number assumed with a note)"
            )


def _where(path: Path, doc: object, parts: list[object]) -> str:
    line = _line_of(doc, list(parts))
    return f"{path}:{line}" if line else str(path)


@cache
def _cached(path: str, mtime_ns: int, params_mtime_ns: int, measured_mtime_ns: int) -> Calibration:
    return load_calibration_file(Path(path))


def load_calibration(root: Path) -> Calibration:
    path = root / CALIBRATION_PATH
    try:
        stamp = path.stat().st_mtime_ns
    except FileNotFoundError:
        raise ValidationError(f"{path}: calibration file not found") from None
    params = root / PARAMS_FILE
    pins = Layout(root).measured_dir  # a pin added or removed changes what a measured number may name
    return _cached(
        str(path),
        stamp,
        params.stat().st_mtime_ns if params.is_file() else 0,
        pins.stat().st_mtime_ns if pins.is_dir() else 0,
    )
