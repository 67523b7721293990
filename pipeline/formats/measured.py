"""`sources/measured/<measurement-id>.json`: what a measured nccl-tests / rccl-tests log was imported as."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Sha256, Slug, Strict


class MeasuredPin(Strict):
    """What was imported: the bytes (by hash), what they were declared to measure, and on which topology."""

    measurement_id: Slug
    origin: Literal["measured"] = "measured"
    sha256: Sha256
    size: int = Field(ge=0)
    file_name: str
    topology_id: Slug
    op: str
    algorithm: str | None = None
    ranks: int = Field(ge=1)
    hosts: int = Field(ge=1)
    devices: list[str]
