"""`models/calibration/throughput.yaml`: achieved compute throughput per accelerator (what the step estimates
divide work by, never an MFU knob), each number with its status and provenance."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from .common import Strict, Title

THROUGHPUT_PATH = Path("models") / "calibration" / "throughput.yaml"
Status = Literal["published", "fitted", "assumed"]


class Source(Strict):
    url: str = Field(pattern=r"^https://")
    title: Title
    read: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="The date the document was read.")
    states: str = Field(min_length=1, description="What the document states, in its own figures.")


class _Numbered(Strict):
    status: Status
    source: str | None = None
    fitted_on: str | None = Field(default=None, description="The validation result (file#row) it was solved from.")
    note: str | None = None

    @model_validator(mode="after")
    def _provenance(self) -> _Numbered:
        if self.status == "published" and not self.source:
            raise ValueError("a published number names its source (an entry of `sources`)")
        if self.status == "fitted" and not self.fitted_on:
            raise ValueError("a fitted number names the one published result it was fitted on (fitted_on)")
        if self.status == "assumed" and not self.note:
            raise ValueError("an assumed number says why in `note`")
        return self


class Gemm(_Numbered):
    """Large-GEMM throughput: measured TFLOP/s, or (for a part with no measurement) a fraction of the registry's
    peak for the dtype."""

    tflops: float | None = Field(default=None, gt=0)
    fraction: float | None = Field(default=None, gt=0, le=1)

    @model_validator(mode="after")
    def _one(self) -> Gemm:
        if (self.tflops is None) == (self.fraction is None):
            raise ValueError("state exactly one of tflops (achieved) or fraction (of the registry's peak)")
        return self


class Fraction(_Numbered):
    fraction: float = Field(gt=0, le=1)


class Value(_Numbered):
    value: float = Field(ge=0)


class Accelerator(Strict):
    references: list[str] = Field(min_length=1, description="Registry references whose accelerators these are.")
    gemm: dict[Literal["bf16", "fp16", "fp8"], Gemm] = Field(min_length=1)
    attention: Fraction = Field(description="A fused attention kernel's fraction of the registry's peak.")
    hbm: Fraction = Field(description="An elementwise kernel's fraction of the registry's HBM bandwidth.")


class Kernels(Strict):
    gemm_sustained_fraction: Fraction = Field(
        description="The fraction of an accelerator's measured best-shape GEMM throughput (sustained where a "
        "power-saturated measurement is published, else a burst) that a run's own shapes and kernels reach; applied "
        "to every measured GEMM rate."
    )
    gemm_fixed_us: Value
    memory_fixed_us: Value
    decode_step_overhead_us: Value
    optimizer_bytes_per_param: Value
    sharded_layer_overhead_us: Value = Field(
        description="Per layer and micro-batch of a fully sharded (ZeRO-3 / FSDP) run: the time a rank waits on "
        "the framework's gathering, freeing and reduce-scattering of that layer's parameters, beyond the kernels "
        "and the communication."
    )


class Throughput(Strict):
    sources: dict[str, Source]
    accelerators: dict[str, Accelerator]
    kernels: Kernels

    @model_validator(mode="after")
    def _sources_known(self) -> Throughput:
        seen: dict[str, str] = {}
        for name, acc in self.accelerators.items():
            for ref in acc.references:
                if ref in seen:
                    raise ValueError(f"reference {ref!r} is listed by both {seen[ref]} and {name}")
                seen[ref] = name
            numbers = [*acc.gemm.values(), acc.attention, acc.hbm]
            for n in numbers:
                if n.source and n.source not in self.sources:
                    raise ValueError(f"{name}: source {n.source!r} is not an entry of `sources`")
        return self
