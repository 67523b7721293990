"""`models/calibration/collectives.yaml`: efficiencies and latencies of collectives as data, each number with its
status and provenance. A number's status is a promise the format keeps (a tagged union on `status`): published
needs `source`, measured the SHA-256 of a pinned log, assumed a `note` saying why."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import UsageError
from .common import SHA256_PATTERN, Sha256, Strict

CALIBRATION_PATH = Path("models") / "calibration" / "collectives.yaml"
PROTOCOLS = ("LL", "LL128", "Simple")
Status = Literal["published", "measured", "assumed"]
SHA_RE = SHA256_PATTERN


class Source(Strict):
    url: str = Field(pattern=r"^https://")
    statement: str = Field(min_length=1)


class Number(Strict):
    """One calibrated number (the common shape; a file holds one of the three forms below)."""

    value: float = Field(ge=0)
    status: Status
    source: str | None = None
    measured_sha256: Sha256 | None = None
    note: str | None = None


class PublishedNumber(Number):
    """A maintainer's or vendor's statement: `source` names an entry under `sources`."""

    model_config = ConfigDict(title="published")
    status: Literal["published"]
    source: str = Field(min_length=1)


class MeasuredNumber(Number):
    """Read from a measured nccl-tests / rccl-tests log pinned by SHA-256."""

    model_config = ConfigDict(title="measured")
    status: Literal["measured"]
    measured_sha256: Sha256


class AssumedNumber(Number):
    """No source states it: `note` says why this value and what would settle it."""

    model_config = ConfigDict(title="assumed")
    status: Literal["assumed"]
    note: str = Field(min_length=1)


Calibrated = Annotated[PublishedNumber | MeasuredNumber | AssumedNumber, Field(discriminator="status")]


class PerProtocol(Strict):
    LL: Calibrated | None = None
    LL128: Calibrated | None = None
    Simple: Calibrated | None = None

    def get(self, protocol: str) -> Number | None:
        return getattr(self, protocol, None)

    def protocols(self) -> list[str]:
        return [p for p in PROTOCOLS if self.get(p) is not None]


class StepLatency(Strict):
    ring: PerProtocol
    tree: PerProtocol


class InNetwork(Strict):
    """In-network reduction (NVLS in the scale-up switch, CollNet / SHARP in the fabric): efficiency and latency."""

    efficiency: Calibrated
    latency_us: Calibrated


class LinkClass(Strict):
    """A class of links (matched on the topology's technology text) with its efficiency and step latencies.
    Efficiencies are fractions in (0, 1]: checked in code (the schema cannot say it of a tagged number)."""

    network: Literal["scale_up", "scale_out"]
    matches: list[str] = Field(min_length=1)
    efficiency: Calibrated
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


class AlgorithmCalibration(Strict):
    base_latency_us: PerProtocol
    protocol_factor: PerProtocol


class Pipeline(Strict):
    chunk_bytes: Calibrated


class Calibration(Strict):
    """Calibration of collective costs: efficiencies and latencies, each number with its provenance."""

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

    def number(self, dotted: str) -> Number | None:
        """The number at a dotted path (as `numbers()` names it), or None."""
        return dict(self.numbers()).get(dotted)

    def link_class(self, network: str, technology: str | None) -> tuple[str, LinkClass]:
        """The first class of this network whose pattern matches the technology text (case-insensitive)."""
        for name, lc in self.link_classes.items():
            if lc.network == network and any(re.search(p, technology or "", re.IGNORECASE) for p in lc.matches):
                return name, lc
        names = ", ".join(n for n, lc in self.link_classes.items() if lc.network == network)
        raise UsageError(
            f"no {network} link class in {CALIBRATION_PATH} matches technology {technology!r}; classes: {names}"
        )
