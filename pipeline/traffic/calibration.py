"""The collective calibration (models/calibration/collectives.yaml): efficiencies and latencies as data, each
number with its status and provenance, so an estimate can say which statements it rests on and how firmly."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic import ValidationError as PydanticError

from ..core.errors import UsageError, ValidationError
from ..core.schemas import _line_of, json_path, load_yaml

CALIBRATION_PATH = Path("models") / "calibration" / "collectives.yaml"
PROTOCOLS = ("LL", "LL128", "Simple")
Protocol = Literal["LL", "LL128", "Simple"]
Status = Literal["published", "measured", "assumed"]
SHA_RE = r"^[0-9a-f]{64}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Strict):
    url: str = Field(pattern=r"^https://")
    statement: str = Field(min_length=1)


class Number(_Strict):
    """One calibrated number: published needs a source, measured a pinned log hash, assumed a note saying why."""

    value: float = Field(ge=0)
    status: Status
    source: str | None = None
    measured_sha256: str | None = Field(default=None, pattern=SHA_RE)
    note: str | None = None

    @model_validator(mode="after")
    def _provenance(self) -> Number:
        if self.status == "published" and not self.source:
            raise ValueError("a published number needs `source` (an id under `sources`)")
        if self.status == "measured" and not self.measured_sha256:
            raise ValueError("a measured number needs `measured_sha256` (the pinned log it came from)")
        if self.status == "assumed" and not self.note:
            raise ValueError("an assumed number needs `note` saying why this value and what would settle it")
        return self


class PerProtocol(_Strict):
    LL: Number | None = None
    LL128: Number | None = None
    Simple: Number | None = None

    def get(self, protocol: str) -> Number | None:
        return getattr(self, protocol, None)

    def protocols(self) -> list[str]:
        return [p for p in PROTOCOLS if self.get(p) is not None]


class StepLatency(_Strict):
    ring: PerProtocol
    tree: PerProtocol


class InNetwork(_Strict):
    """In-network reduction (NVLS in the scale-up switch, CollNet / SHARP in the fabric): efficiency and latency."""

    efficiency: Number
    latency_us: Number


class LinkClass(_Strict):
    network: Literal["scale_up", "scale_out"]
    matches: list[str] = Field(min_length=1)
    efficiency: Number
    step_latency_us: StepLatency
    nvls: InNetwork | None = None
    collnet: InNetwork | None = None
    one_shot: bool = False

    @model_validator(mode="after")
    def _fraction(self) -> LinkClass:
        for what, n in (("efficiency", self.efficiency), *((f"{k}.efficiency", v.efficiency) for k, v in self._inn())):
            if not 0 < n.value <= 1:
                raise ValueError(f"{what} must be a fraction in (0, 1], got {n.value}")
        return self

    def _inn(self) -> list[tuple[str, InNetwork]]:
        return [(k, v) for k, v in (("nvls", self.nvls), ("collnet", self.collnet)) if v is not None]


class AlgorithmCalibration(_Strict):
    base_latency_us: PerProtocol
    protocol_factor: PerProtocol


class Pipeline(_Strict):
    chunk_bytes: Number


class Calibration(_Strict):
    version: Literal[1]
    sources: dict[str, Source]
    link_classes: dict[str, LinkClass]
    algorithms: dict[str, AlgorithmCalibration]
    pipeline: Pipeline

    @model_validator(mode="after")
    def _protocols(self) -> Calibration:
        for name, algo in self.algorithms.items():
            if set(algo.base_latency_us.protocols()) != set(algo.protocol_factor.protocols()):
                raise ValueError(f"algorithms.{name}: base_latency_us and protocol_factor name different protocols")
        return self

    def numbers(self) -> list[tuple[str, Number]]:
        """Every number with its dotted path, for audits and for the source check."""
        out: list[tuple[str, Number]] = []

        def walk(prefix: str, node: object) -> None:
            if isinstance(node, Number):
                out.append((prefix, node))
            elif isinstance(node, BaseModel):
                for key in type(node).model_fields:
                    walk(f"{prefix}.{key}" if prefix else key, getattr(node, key))
            elif isinstance(node, dict):
                for key, value in node.items():
                    walk(f"{prefix}.{key}", value)

        walk("", self)
        return out

    def link_class(self, network: str, technology: str | None) -> tuple[str, LinkClass]:
        """The first class of this network whose pattern matches the technology text (case-insensitive)."""
        for name, lc in self.link_classes.items():
            if lc.network == network and any(re.search(p, technology or "", re.IGNORECASE) for p in lc.matches):
                return name, lc
        names = ", ".join(n for n, lc in self.link_classes.items() if lc.network == network)
        raise UsageError(
            f"no {network} link class in {CALIBRATION_PATH} matches technology {technology!r}; classes: {names}"
        )


def _pydantic_message(err: dict[str, object]) -> str:
    msg = str(err["msg"]).removeprefix("Value error, ")
    got = err.get("input")
    if isinstance(got, str | int | float | bool) and not str(err.get("type", "")).startswith("value_error"):
        msg += f", got {got!r}"
    return msg


def load_calibration_file(path: Path) -> Calibration:
    """Parse and validate; every error names file:line, the JSON path and what was expected."""
    data, doc = load_yaml(path)
    try:
        cal = Calibration.model_validate(data)
    except PydanticError as exc:
        lines = []
        for err in exc.errors()[:10]:
            parts = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
            lines.append(f"{_where(path, doc, parts)}: at {json_path(parts)}: {_pydantic_message(dict(err))}")
        raise ValidationError("\n".join(lines)) from None
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
