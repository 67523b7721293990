"""Alpha-beta costs of collectives: pure functions, no topology.

Buffer size S follows nccl-tests' PERFORMANCE.md: all-reduce S is the buffer each rank holds; all-gather S is
the gathered output; reduce-scatter S is the input before scattering; all-to-all S is what each rank sends in
total; broadcast S is the buffer; send S is the message. Bytes on the wire per rank:

  ring all-reduce 2(n-1)/n·S · reduce-scatter (n-1)/n·S · all-gather (n-1)/n·S · all-to-all (n-1)/n·S
  broadcast (ring, pipelined) S · send S

time = latency (steps × per-step latency) + bytes ÷ effective bandwidth + queueing.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..errors import UsageError

OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast", "send")
ALGORITHMS = ("ring", "tree")


@dataclass(frozen=True, kw_only=True)
class Estimate:
    op: str
    algorithm: str
    ranks: int
    bytes: float
    bytes_on_wire_per_rank: float
    steps: int
    latency_seconds: float
    bandwidth_seconds: float
    queueing_seconds: float

    @property
    def seconds(self) -> float:
        return self.latency_seconds + self.bandwidth_seconds + self.queueing_seconds

    @property
    def dominant(self) -> str:
        terms = {
            "latency": self.latency_seconds,
            "bandwidth": self.bandwidth_seconds,
            "queueing": self.queueing_seconds,
        }
        return max(terms, key=lambda k: terms[k])

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "seconds": self.seconds, "dominant": self.dominant}


def wire_factor(op: str, n: int, algorithm: str = "ring") -> float:
    """Bytes each rank sends, as a multiple of S."""
    if n < 1:
        raise UsageError(f"ranks must be at least 1, got {n}")
    if n == 1 and op != "send":
        return 0.0
    if op == "all-reduce":
        return 2 * (n - 1) / n
    if op in ("reduce-scatter", "all-gather", "all-to-all"):
        return (n - 1) / n
    if op in ("broadcast", "send"):
        return 1.0
    raise UsageError(f"unknown collective {op!r}: expected one of {', '.join(OPS)}")


def steps(op: str, n: int, algorithm: str = "ring") -> int:
    """Latency-bearing steps: a ring walks n-1 hops per phase; a tree climbs log2(n) levels up and down."""
    if algorithm not in ALGORITHMS:
        raise UsageError(f"unknown algorithm {algorithm!r}: expected ring or tree")
    if op == "send":
        return 1
    if n <= 1:
        return 0
    if algorithm == "tree":
        depth = math.ceil(math.log2(n))
        return 2 * depth if op == "all-reduce" else depth
    return 2 * (n - 1) if op == "all-reduce" else n - 1


def estimate(
    op: str,
    ranks: int,
    size_bytes: float,
    bandwidth_bytes_per_s: float,
    latency_s: float,
    *,
    algorithm: str = "ring",
    efficiency: float = 1.0,
    queueing_s: float = 0.0,
) -> Estimate:
    """One collective over `ranks` ranks; the bandwidth given is the effective per-rank bandwidth (per direction)."""
    if op not in OPS:
        raise UsageError(f"unknown collective {op!r}: expected one of {', '.join(OPS)}")
    if algorithm == "tree" and op not in ("all-reduce", "broadcast", "reduce-scatter", "all-gather"):
        raise UsageError(f"a tree algorithm is not defined here for {op}; use ring")
    if size_bytes < 0 or not math.isfinite(size_bytes):
        raise UsageError(f"bytes must be a finite non-negative size, got {size_bytes}")
    if bandwidth_bytes_per_s <= 0 or not math.isfinite(bandwidth_bytes_per_s):
        raise UsageError(f"bandwidth must be positive, got {bandwidth_bytes_per_s}")
    if not 0 < efficiency <= 1:
        raise UsageError(f"efficiency must be in (0, 1], got {efficiency}")
    if latency_s < 0 or queueing_s < 0:
        raise UsageError("latency and queueing must be non-negative")
    on_wire = wire_factor(op, ranks, algorithm) * size_bytes
    n_steps = steps(op, ranks, algorithm)
    return Estimate(
        op=op,
        algorithm=algorithm,
        ranks=ranks,
        bytes=size_bytes,
        bytes_on_wire_per_rank=on_wire,
        steps=n_steps,
        latency_seconds=n_steps * latency_s,
        bandwidth_seconds=on_wire / (bandwidth_bytes_per_s * efficiency),
        queueing_seconds=queueing_s,
    )
