"""How long a kernel of `flops.py` takes on an accelerator, by the throughput calibration
(models/calibration/throughput.yaml).

A product runs at the measured large-GEMM rate, bounded below by its bytes at the achieved HBM bandwidth (a
small inner dimension, like attention's QKᵀ, is memory-bound), plus a fixed cost per kernel: GEMM efficiency
falls with size as F / (F + R·t₀). An elementwise kernel moves its bytes at the achieved HBM bandwidth plus its
launch; fused attention runs at its measured fraction of peak. Every number used is reported with its status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ..core.format import format_exact
from ..core.schemas import load_model
from ..errors import UsageError
from ..formats.throughput import THROUGHPUT_PATH, Throughput
from .flops import Op

# fp16 runs on bf16's tensor cores: its registry peak is bf16's, and so is its GEMM entry when it has none.
PEAK_DTYPE = {"fp16": "bf16"}


@cache
def _load(path: Path, mtime: float) -> Throughput:
    from ..core.schemas import load_yaml

    data, doc = load_yaml(path)
    return load_model(Throughput, data, "throughput.schema.json", path, doc)


def load_throughput(root: Path) -> Throughput:
    """The checkout's throughput calibration, validated (an error names the file, line and field)."""
    path = root / THROUGHPUT_PATH
    if not path.is_file():
        raise UsageError(f"{path}: not found; it holds the achieved compute throughput per accelerator")
    return _load(path, path.stat().st_mtime)


@dataclass
class Rates:
    """One accelerator's achieved rates in base units, and the calibration numbers behind them."""

    accelerator: str  # the calibration entry
    reference: str
    dtype: str
    gemm_fixed_s: float
    memory_fixed_s: float
    decode_step_overhead_s: float
    optimizer_bytes_per_param: float
    sharded_layer_overhead_s: float
    gemm_flops_per_s: float | None = None
    attention_flops_per_s: float | None = None
    hbm_bytes_per_s: float | None = None
    used: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    # What `missing` lacks, by where it would be stated: the registry fields of `reference` (with what needs each),
    # and the calibration entries.
    unknown_fields: dict[str, str] = field(default_factory=dict)
    unknown_calibration: list[str] = field(default_factory=list)
    what_if: str = ""  # set when a user's --mfu replaced the calibrated GEMM and attention rates

    def label(self, unused: tuple[str, ...] = ()) -> list[str]:
        """Each calibration number used, with its status; `unused`: the kernel numbers the estimate did not need
        (a training step has no decode step; a replicated run gathers no layer's parameters)."""
        return [
            f"{u['number']} = {u['value']} [{u['status']}] {u['why']}".rstrip()
            for u in self.used
            if u["number"] not in unused
        ]

    def time(self, op: Op) -> float:
        """Seconds for one operation (all its `count` kernels)."""
        hbm = self.hbm_bytes_per_s
        if op.kind == "memory":
            return op.bytes / hbm + self.memory_fixed_s * op.count if hbm else float("nan")
        # A product or a fused attention kernel: compute-bound, or bound by the bytes it streams.
        fused = op.kind == "attention"
        rate = self.attention_flops_per_s if fused else self.gemm_flops_per_s
        if not rate:
            return float("nan")
        floor = op.bytes / hbm if hbm else 0.0
        return max(op.flops / rate, floor) + self.gemm_fixed_s * (1 if fused else op.count)

    def seconds(self, ops: list[Op]) -> float:
        return sum(self.time(o) for o in ops)


def _why(n: Any, cal: Throughput) -> str:
    if n.status == "published" and n.source:
        return f"({cal.sources[n.source].url})"
    if n.status == "fitted":
        return f"(fitted on {n.fitted_on})"
    return f"({n.note})" if n.note else ""


def rates(cal: Throughput, reference: str, dtype: str, peaks: dict[str, float | None], hbm: float | None) -> Rates:
    """The rates of the accelerator `reference` holds, for `dtype`; `peaks` are the registry's dense peaks per
    dtype (FLOP/s), `hbm` its memory bandwidth (B/s). A number the calibration or the registry lacks is named in
    `missing`, and what needs it is unknown."""
    entry = next(((k, a) for k, a in cal.accelerators.items() if reference in a.references), None)
    k = cal.kernels
    out = Rates(
        accelerator=entry[0] if entry else "",
        reference=reference,
        dtype=dtype,
        gemm_fixed_s=k.gemm_fixed_us.value * 1e-6,
        memory_fixed_s=k.memory_fixed_us.value * 1e-6,
        decode_step_overhead_s=k.decode_step_overhead_us.value * 1e-6,
        optimizer_bytes_per_param=k.optimizer_bytes_per_param.value,
        sharded_layer_overhead_s=k.sharded_layer_overhead_us.value * 1e-6,
    )

    def use(number: str, value: str, n: Any, status: str = "") -> None:
        out.used.append({"number": number, "value": value, "status": status or n.status, "why": _why(n, cal)})

    for name, n in k:  # in the file's order; the GEMM fraction is reported with the GEMM rate it scales
        if name != "gemm_sustained_fraction":
            use(f"kernels.{name}", format_exact(n.value), n)
    if entry is None:
        out.unknown_calibration.append(
            f"{THROUGHPUT_PATH}: no accelerator entry lists reference {reference!r}: its achieved throughput is unknown"
        )
        out.missing += out.unknown_calibration
        return out
    name, acc = entry
    base = PEAK_DTYPE.get(dtype, dtype)
    peak = peaks.get(base)
    g = acc.gemm.get(dtype) or acc.gemm.get(base)
    if g is None:
        out.unknown_calibration.append(f"{THROUGHPUT_PATH}: accelerators.{name}.gemm has no {dtype} entry")
        out.missing.append(out.unknown_calibration[-1])
    elif g.tflops is not None:
        sustained = k.gemm_sustained_fraction
        out.gemm_flops_per_s = g.tflops * 1e12 * sustained.fraction
        use("kernels.gemm_sustained_fraction", format_exact(sustained.fraction), sustained)
        use(f"{name}.gemm.{dtype}", f"{format_exact(g.tflops)} TFLOP/s", g)
    elif peak is None:
        out.missing.append(
            f"{reference}:accelerator.peak_dense_{base} is unknown, and {name}.gemm.{dtype} is a fraction of it"
        )
        out.unknown_fields[f"accelerator.peak_dense_{base}"] = (
            f"the {dtype} compute rate is a fraction of it ({THROUGHPUT_PATH}: accelerators.{name}.gemm.{dtype})"
        )
    else:
        out.gemm_flops_per_s = g.fraction * peak
        use(f"{name}.gemm.{dtype}", f"{format_exact(g.fraction)} × peak {format_exact(peak / 1e12)} TFLOP/s", g)
    a = acc.attention
    if peak is None:
        if out.gemm_flops_per_s:
            # No registry peak: the fraction applies to the achieved GEMM rate's implied peak is unknowable;
            # the attention kernel then runs at the GEMM rate scaled by the H100's attention/GEMM ratio.
            out.attention_flops_per_s = out.gemm_flops_per_s * a.fraction / 0.8
            why = f"{format_exact(a.fraction)} / 0.8 × the achieved GEMM rate (the registry states no peak)"
            use(f"{name}.attention", why, a, "assumed")
    else:
        out.attention_flops_per_s = a.fraction * peak
        use(f"{name}.attention", f"{format_exact(a.fraction)} × peak", a)
    if hbm is None:
        out.missing.append(f"{reference}:accelerator.memory_bandwidth is unknown")
        out.unknown_fields["accelerator.memory_bandwidth"] = (
            "memory-bound kernels and the optimizer step run at a fraction of it"
        )
    else:
        out.hbm_bytes_per_s = acc.hbm.fraction * hbm
        use(f"{name}.hbm", f"{format_exact(acc.hbm.fraction)} × {format_exact(hbm / 1e12)} TB/s", acc.hbm)
    return out


def what_if(r: Rates, mfu: float, peak: float | None) -> Rates:
    """The rates with every product and attention kernel at `mfu` × the registry's peak: a user's what-if, never
    the default; every output that uses it says so."""
    if peak is None:
        r.missing.append("--mfu needs the registry's peak for the dtype, which is unknown")
        r.gemm_flops_per_s = r.attention_flops_per_s = None
    else:
        r.gemm_flops_per_s = r.attention_flops_per_s = mfu * peak
    r.what_if = (
        f"what-if (--mfu {mfu:g}, given by the user): products and attention at {mfu * 100:g} % of the registry's "
        "peak instead of the calibrated throughput"
    )
    r.used = [u for u in r.used if not u["number"].endswith((".attention",)) and ".gemm." not in u["number"]]
    r.used.append({"number": "--mfu", "value": f"{mfu:g}", "status": "what-if", "why": "(given on the command line)"})
    return r
