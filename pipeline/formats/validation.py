"""`models/validation/<id>.yaml`: one publication's results, each with the configuration it was measured on, for
`fabricref validate`; the table is kept as transcribed beside the parsed rows."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import Slug, Strict, Title
from .workload import Inference, ModelShape, Training

Quantity = Literal["step_seconds", "tflops_per_gpu", "ttft_seconds", "tpot_seconds"]
Use = Literal["calibration", "check", "held-out"]
UNITS = {"step_seconds": "s", "tflops_per_gpu": "TFLOP/s", "ttft_seconds": "s", "tpot_seconds": "s"}


class Publication(Strict):
    title: Title
    authors: str = Field(min_length=2)
    year: int = Field(ge=1990, le=2100)
    url: str = Field(pattern=r"^https://")
    table: str = Field(min_length=1, description="Where in the publication the results are (table, section).")
    read: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    read_via: str = Field(min_length=3, description="How the table was read (the document, or the copy used).")


class Measured(Strict):
    quantity: Quantity
    value: float = Field(gt=0)
    unit: str = Field(min_length=1, description="The unit the publication states the value in.")
    counting: str | None = Field(
        default=None, description="For a throughput: how the publication counts FLOPs (which formula)."
    )


class Result(Strict):
    id: Slug
    label: str = Field(min_length=1, description="The row as the publication labels it.")
    use: Use = Field(
        description="calibration: a number of models/calibration/throughput.yaml was fitted on it; check: an "
        "acceptance check; held-out: never used to set any number"
    )
    target: Slug = Field(description="The reference or cluster the run is modelled on.")
    model: ModelShape
    training: Training | None = None
    inference: Inference | None = None
    measured: Measured
    tolerance: float = Field(gt=0, lt=1, description="The relative error the check allows (0.1: ±10 %).")
    note: str = ""

    @model_validator(mode="after")
    def _one_kind(self) -> Result:
        if (self.training is None) == (self.inference is None):
            raise ValueError("a result has exactly one of training or inference")
        if self.inference is not None and self.measured.quantity in ("step_seconds", "tflops_per_gpu"):
            raise ValueError("a serving result measures ttft_seconds or tpot_seconds")
        return self


class ValidationFile(Strict):
    id: Slug
    publication: Publication
    transcription: str = Field(min_length=10, description="The table as transcribed, in the publication's words.")
    results: list[Result] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> ValidationFile:
        ids = [r.id for r in self.results]
        if len(ids) != len(set(ids)):
            raise ValueError("result ids must be unique within a file")
        return self
