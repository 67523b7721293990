"""The collective calibration (models/calibration/collectives.yaml): efficiencies and latencies as data, each
number with its status and provenance, so an estimate can say which statements it rests on and how firmly."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ..core.errors import ValidationError
from ..core.schemas import _line_of, json_path, load_model, load_yaml
from ..formats.calibration import (
    CALIBRATION_PATH,
    PROTOCOLS,
    SHA_RE,
    AlgorithmCalibration,
    Calibration,
    InNetwork,
    LinkClass,
    Number,
    PerProtocol,
    Pipeline,
    Protocol,
    Source,
    Status,
    StepLatency,
)

__all__ = [
    "CALIBRATION_PATH",
    "PROTOCOLS",
    "SHA_RE",
    "AlgorithmCalibration",
    "Calibration",
    "InNetwork",
    "LinkClass",
    "Number",
    "PerProtocol",
    "Pipeline",
    "Protocol",
    "Source",
    "Status",
    "StepLatency",
    "load_calibration",
    "load_calibration_file",
]


def load_calibration_file(path: Path) -> Calibration:
    """Parse and validate (pipeline/formats/calibration.py); every error names file:line, the JSON path and what
    was expected."""
    data, doc = load_yaml(path)
    cal: Calibration = load_model(Calibration, data, "calibration.schema.json", path, doc)
    for dotted, n in cal.numbers():
        if n.source is not None and n.source not in cal.sources:
            parts = [*dotted.split("."), "source"]
            raise ValidationError(
                f"{_where(path, doc, parts)}: at {json_path(parts)}: source {n.source!r} is not declared under "
                f"`sources` (declared: {', '.join(sorted(cal.sources))})"
            )
    return cal


def _where(path: Path, doc: object, parts: list[object]) -> str:
    line = _line_of(doc, list(parts))
    return f"{path}:{line}" if line else str(path)


@cache
def _cached(path: str, mtime_ns: int) -> Calibration:
    return load_calibration_file(Path(path))


def load_calibration(root: Path) -> Calibration:
    path = root / CALIBRATION_PATH
    try:
        stamp = path.stat().st_mtime_ns
    except FileNotFoundError:
        raise ValidationError(f"{path}: calibration file not found") from None
    return _cached(str(path), stamp)
