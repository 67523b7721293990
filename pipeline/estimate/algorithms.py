"""Collective algorithms and protocols, costed from the calibration and chosen per message size and hardware.

Pure functions over a `Fabric` (how many ranks, how they split into scale-up domains, the per-rank line rate and
link class of each network): no graph here. Every candidate (algorithm × protocol) available on the fabric is
costed and the fastest is chosen, the way NCCL's tuner picks by its own cost model; `algorithm=` forces one.

  time = base latency(algorithm, protocol) + Σ steps × step latency(link class, protocol)
         + bytes per rank per direction ÷ (line rate × link efficiency × protocol factor)

Hierarchical collectives (a group spanning several domains with several ranks in each) run their intra-domain and
inter-domain stages overlapped in chunks: the bandwidth term is the slowest stage plus one chunk through every
other stage (pipeline fill), never the sum of the stages.

Results follow nccl-tests doc/PERFORMANCE.md: algbw = S / t, busbw = algbw × the operation's bus factor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..core.confidence import of_status, weakest
from ..errors import UsageError
from .calibration import Calibration, LinkClass, Number

OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast", "reduce", "send")
ALGORITHMS = ("ring", "tree", "nvls", "collnet", "one-shot", "recursive-doubling")
# Which algorithms exist for which operation (NCCL: tree, NVLS and CollNet are all-reduce algorithms here).
SUPPORTED = {
    "all-reduce": ALGORITHMS,
    "reduce-scatter": ("ring",),
    "all-gather": ("ring",),
    "all-to-all": ("ring",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "send": ("ring",),
}


def bus_factor(op: str, n: int) -> float:
    """nccl-tests PERFORMANCE.md: busbw = algbw × this factor."""
    if op not in OPS:
        raise UsageError(f"unknown collective {op!r}: expected one of {', '.join(OPS)}")
    if n < 1:
        raise UsageError(f"ranks must be at least 1, got {n}")
    if op == "all-reduce":
        return 2 * (n - 1) / n
    if op in ("reduce-scatter", "all-gather", "all-to-all"):
        return (n - 1) / n
    return 1.0


@dataclass(frozen=True)
class Tier:
    """One network the collective crosses, as one rank sees it."""

    network: str  # scale_up | scale_out
    link_class: str
    calib: LinkClass
    bytes_per_s: float  # line rate per rank per direction (all of the rank's links on this network)
    extra_hop_latency_s: float = 0.0  # path latency beyond the single hop NCCL's step latency was measured on
    oversubscription: float = 1.0  # fluid share when every rank crosses an oversubscribed tier at once


@dataclass(frozen=True)
class Fabric:
    ranks: int
    local: int  # ranks of the group in each scale-up domain
    domains: int
    up: Tier | None  # None when each domain holds one rank of the group
    out: Tier | None  # None when the group sits in one domain
    nvls: bool = False  # the scale-up switch reduces in-network (NVLink SHARP)
    collnet: bool = False  # the scale-out fabric reduces in-network (InfiniBand SHARP), declared by the cluster
    one_shot: bool = False  # every rank reaches every other rank of its domain directly (switch or full mesh)

    def __post_init__(self) -> None:
        if self.ranks != self.local * self.domains:
            raise UsageError(f"{self.ranks} ranks do not split into {self.domains} domains of {self.local}")
        if self.local > 1 and self.up is None:
            raise UsageError("a group with several ranks per domain needs the scale-up network")
        if self.domains > 1 and self.out is None:
            raise UsageError("a group across domains needs the scale-out network")


@dataclass
class Stage:
    name: str
    network: str
    bytes_per_rank: float
    bandwidth_seconds: float


@dataclass
class Cost:
    op: str
    algorithm: str
    protocol: str
    ranks: int
    bytes: float
    latency_seconds: float
    bandwidth_seconds: float
    bytes_on_wire_per_rank: float
    steps: int
    stages: list[Stage]
    assumptions: list[str]
    used: list[tuple[str, Number]] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.latency_seconds + self.bandwidth_seconds

    @property
    def algbw_gb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0

    @property
    def busbw_gb_per_s(self) -> float:
        return self.algbw_gb_per_s * bus_factor(self.op, self.ranks)

    @property
    def dominant(self) -> str:
        return "latency" if self.latency_seconds >= self.bandwidth_seconds else "bandwidth"

    @property
    def confidence(self) -> str:
        return weakest(of_status(n.status) for _, n in self.used)

    def as_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "ranks": self.ranks,
            "bytes": self.bytes,
            "algorithm": self.algorithm,
            "protocol": self.protocol,
            "seconds": self.seconds,
            "latency_seconds": self.latency_seconds,
            "bandwidth_seconds": self.bandwidth_seconds,
            "queueing_seconds": 0.0,
            "bytes_on_wire_per_rank": self.bytes_on_wire_per_rank,
            "steps": self.steps,
            "algbw_gb_per_s": self.algbw_gb_per_s,
            "busbw_gb_per_s": self.busbw_gb_per_s,
            "dominant": self.dominant,
            "confidence": self.confidence,
            "stages": [vars(s) for s in self.stages],
            "assumptions": self.assumptions,
            "calibration": sorted({f"{path} = {n.value:g} [{n.status}]" for path, n in self.used}),
            "candidates": self.candidates,
        }


class _Ctx:
    """Collects the calibration numbers one candidate uses, so its confidence is the weakest of exactly those."""

    def __init__(self, cal: Calibration) -> None:
        self.cal = cal
        self.used: list[tuple[str, Number]] = []

    def num(self, path: str, n: Number | None) -> float:
        if n is None:
            raise KeyError(path)
        self.used.append((path, n))
        return n.value

    def base_s(self, algorithm: str, protocol: str) -> float:
        a = self.cal.algorithms[algorithm]
        return self.num(f"algorithms.{algorithm}.base_latency_us.{protocol}", a.base_latency_us.get(protocol)) * 1e-6

    def step_s(self, tier: Tier, family: str, protocol: str) -> float:
        per = getattr(tier.calib.step_latency_us, family)
        us = self.num(f"link_classes.{tier.link_class}.step_latency_us.{family}.{protocol}", per.get(protocol))
        return us * 1e-6 + tier.extra_hop_latency_s

    def rate(self, tier: Tier, algorithm: str, protocol: str) -> float:
        """Bytes per second per rank per direction this algorithm and protocol sustain on one tier."""
        eff = self.num(f"link_classes.{tier.link_class}.efficiency", tier.calib.efficiency)
        factor = self.num(
            f"algorithms.{algorithm}.protocol_factor.{protocol}",
            self.cal.algorithms[algorithm].protocol_factor.get(protocol),
        )
        return tier.bytes_per_s * eff * factor / tier.oversubscription

    def in_network(self, tier: Tier, kind: str) -> tuple[float, float]:
        """(bytes/s per rank per direction, latency s) of NVLS or CollNet on this tier."""
        inn = getattr(tier.calib, kind)
        eff = self.num(f"link_classes.{tier.link_class}.{kind}.efficiency", inn.efficiency)
        lat = self.num(f"link_classes.{tier.link_class}.{kind}.latency_us", inn.latency_us) * 1e-6
        return tier.bytes_per_s * eff / tier.oversubscription, lat + tier.extra_hop_latency_s


def _pipelined(stages: list[Stage], size: float, chunk: float) -> float:
    """Overlapped stages: the slowest stage plus one chunk's worth of every other stage (the fill)."""
    busy = [s for s in stages if s.bandwidth_seconds > 0]
    if not busy:
        return 0.0
    if len(busy) == 1:
        return busy[0].bandwidth_seconds
    chunks = max(1, math.floor(size / chunk)) if chunk > 0 else 1
    slowest = max(s.bandwidth_seconds for s in busy)
    return slowest + (sum(s.bandwidth_seconds for s in busy) - slowest) / chunks


def _ring(ctx: _Ctx, op: str, f: Fabric, size: float, p: str) -> Cost:
    """Ring inside one domain or across domains; hierarchical and pipelined when both hold several ranks."""
    n, local, outer = f.ranks, f.local, f.domains
    base = ctx.base_s("ring", p)
    notes: list[str] = []
    if op == "send":
        tier = f.out or f.up
        assert tier is not None
        st = Stage("point-to-point", tier.network, size, size / ctx.rate(tier, "ring", p))
        return _cost(op, "ring", p, f, size, base + ctx.step_s(tier, "ring", p), [st], 1, ctx, notes)
    if outer == 1 or local == 1:
        tier = f.up if outer == 1 else f.out
        assert tier is not None
        wire = _flat_wire(op, n) * size
        steps = _flat_steps(op, n)
        st = Stage(f"{op} ring over {tier.network}", tier.network, wire, wire / ctx.rate(tier, "ring", p))
        return _cost(op, "ring", p, f, size, base + steps * ctx.step_s(tier, "ring", p), [st], steps, ctx, notes)
    assert f.up is not None and f.out is not None
    up_rate, out_rate = ctx.rate(f.up, "ring", p), ctx.rate(f.out, "ring", p)
    if op == "all-reduce":
        up_b = 2 * (local - 1) / local * size
        out_b = 2 * (outer - 1) / outer * size / local
        steps_up, steps_out = 2 * (local - 1), 2 * (outer - 1)
        what = (
            f"reduce-scatter and all-gather inside each {local}-rank domain (sharing the scale-up links), "
            f"all-reduce of S/{local} across {outer} domains on every rank's own NIC"
        )
    elif op in ("reduce-scatter", "all-gather"):
        up_b = (local - 1) / local * size
        out_b = (outer - 1) / outer * size / local
        steps_up, steps_out = local - 1, outer - 1
        what = f"{op} inside each {local}-rank domain and of S/{local} across {outer} domains"
    elif op == "all-to-all":
        up_b = (local - 1) / n * size
        out_b = (n - local) / n * size
        steps_up, steps_out = local - 1, outer - 1
        what = "the in-domain share over scale-up while the rest crosses scale-out"
    else:  # broadcast, reduce: a chain across domains feeding a chain inside each
        up_b, out_b = size, size
        steps_up, steps_out = local - 1, outer - 1
        what = f"{op} chained across {outer} domains and inside each"
    stages = [
        Stage("intra-domain", "scale_up", up_b, up_b / up_rate),
        Stage("inter-domain", "scale_out", out_b, out_b / out_rate),
    ]
    notes.append(f"hierarchical, pipelined: {what}; the stages overlap in chunks (slowest stage + pipeline fill)")
    chunk = ctx.num("pipeline.chunk_bytes", ctx.cal.pipeline.chunk_bytes)
    latency = base + steps_up * ctx.step_s(f.up, "ring", p) + steps_out * ctx.step_s(f.out, "ring", p)
    cost = _cost(op, "ring", p, f, size, latency, stages, steps_up + steps_out, ctx, notes)
    cost.bandwidth_seconds = _pipelined(stages, size, chunk)
    return cost


def _flat_wire(op: str, n: int) -> float:
    if n <= 1:
        return 0.0
    return {"all-reduce": 2 * (n - 1) / n, "reduce-scatter": (n - 1) / n, "all-gather": (n - 1) / n}.get(
        op, (n - 1) / n if op == "all-to-all" else 1.0
    )


def _flat_steps(op: str, n: int) -> int:
    if n <= 1:
        return 0
    return 2 * (n - 1) if op == "all-reduce" else n - 1


def _tree(ctx: _Ctx, op: str, f: Fabric, size: float, p: str) -> Cost:
    """NCCL's double binary tree across domains with a chain inside each: every rank sends and receives S twice
    (reduce up, broadcast down); each rank's NIC carries its 1/local share across domains."""
    stages: list[Stage] = []
    latency = ctx.base_s("tree", p)
    steps = 0
    if f.local > 1:
        assert f.up is not None
        stages.append(Stage("chain inside the domain", "scale_up", 2 * size, 2 * size / ctx.rate(f.up, "tree", p)))
        latency += 2 * (f.local - 1) * ctx.step_s(f.up, "tree", p)
        steps += 2 * (f.local - 1)
    if f.domains > 1:
        assert f.out is not None
        b = 2 * size / f.local
        stages.append(Stage("double binary tree across domains", "scale_out", b, b / ctx.rate(f.out, "tree", p)))
        depth = math.ceil(math.log2(f.domains))
        latency += 2 * depth * ctx.step_s(f.out, "tree", p)
        steps += 2 * depth
    chunk = ctx.num("pipeline.chunk_bytes", ctx.cal.pipeline.chunk_bytes) if len(stages) > 1 else 0
    cost = _cost(op, "tree", p, f, size, latency, stages, steps, ctx, ["NCCL double binary tree (reduce, broadcast)"])
    cost.bandwidth_seconds = _pipelined(stages, size, chunk)
    return cost


def _nvls(ctx: _Ctx, op: str, f: Fabric, size: float, p: str) -> Cost:
    """NVLink SHARP: the switch reduces. Per rank S to the switch and S/n back, then S/n out and S multicast in:
    S(local+1)/local per direction; across domains the rank's NIC all-reduces its S/local share (NVLS tree)."""
    assert f.up is not None
    rate, lat = ctx.in_network(f.up, "nvls")
    ctx.base_s("nvls", p)
    ctx.num(f"algorithms.nvls.protocol_factor.{p}", ctx.cal.algorithms["nvls"].protocol_factor.get(p))
    up_b = size * (f.local + 1) / f.local
    stages = [Stage("in-switch reduction (NVLS)", "scale_up", up_b, up_b / rate)]
    latency, steps = lat, 1
    notes = ["NVLink SHARP (NVLS): the scale-up switch reduces in-network"]
    if f.domains > 1:
        assert f.out is not None
        out_rate, out_lat = ctx.in_network(f.out, "nvls")
        out_b = 2 * (f.domains - 1) / f.domains * size / f.local
        stages.append(Stage("tree across domains (NVLS tree)", "scale_out", out_b, out_b / out_rate))
        depth = math.ceil(math.log2(f.domains))
        latency += 2 * depth * out_lat
        steps += 2 * depth
        notes.append(f"NVLS tree: each rank's NIC all-reduces its S/{f.local} share across {f.domains} domains")
    chunk = ctx.num("pipeline.chunk_bytes", ctx.cal.pipeline.chunk_bytes) if len(stages) > 1 else 0
    cost = _cost(op, "nvls", p, f, size, latency, stages, steps, ctx, notes)
    cost.bandwidth_seconds = _pipelined(stages, size, chunk)
    return cost


def _collnet(ctx: _Ctx, op: str, f: Fabric, size: float, p: str) -> Cost:
    """InfiniBand SHARP (CollNet): reduce-scatter inside the domain, each rank's NIC sends its S/local share to the
    fabric once and receives the reduced share once, all-gather inside."""
    assert f.out is not None
    rate, lat = ctx.in_network(f.out, "collnet")
    ctx.base_s("collnet", p)
    ctx.num(f"algorithms.collnet.protocol_factor.{p}", ctx.cal.algorithms["collnet"].protocol_factor.get(p))
    stages = [Stage("in-fabric reduction (SHARP)", "scale_out", size / f.local, size / f.local / rate)]
    latency, steps = lat, 1
    if f.local > 1:
        assert f.up is not None
        up_b = 2 * (f.local - 1) / f.local * size
        stages.insert(0, Stage("intra-domain", "scale_up", up_b, up_b / ctx.rate(f.up, "ring", p)))
        latency += 2 * (f.local - 1) * ctx.step_s(f.up, "ring", p)
        steps += 2 * (f.local - 1)
    chunk = ctx.num("pipeline.chunk_bytes", ctx.cal.pipeline.chunk_bytes) if len(stages) > 1 else 0
    cost = _cost(op, "collnet", p, f, size, latency, stages, steps, ctx, ["CollNet: InfiniBand SHARP in-network"])
    cost.bandwidth_seconds = _pipelined(stages, size, chunk)
    return cost


def _one_shot(ctx: _Ctx, op: str, f: Fabric, size: float, p: str) -> Cost:
    """One-shot all-reduce: every rank pushes its whole buffer to every peer at once and reduces locally; one step."""
    assert f.up is not None
    wire = (f.ranks - 1) * size
    st = Stage("push to every peer", "scale_up", wire, wire / ctx.rate(f.up, "one-shot", p))
    latency = ctx.base_s("one-shot", p) + ctx.step_s(f.up, "ring", p)
    return _cost(op, "one-shot", p, f, size, latency, [st], 1, ctx, ["one-shot: one step, (n-1)·S per rank"])


def _recursive_doubling(ctx: _Ctx, op: str, f: Fabric, size: float, p: str) -> Cost:
    """log2(n) exchange rounds of the whole buffer: few steps, much data — for small messages."""
    stages: list[Stage] = []
    latency = ctx.base_s("recursive-doubling", p)
    rounds_up = int(math.log2(f.local))
    rounds_out = int(math.log2(f.domains))
    if rounds_up:
        assert f.up is not None
        b = rounds_up * size
        stages.append(
            Stage("exchange rounds inside the domain", "scale_up", b, b / ctx.rate(f.up, "recursive-doubling", p))
        )
        latency += rounds_up * ctx.step_s(f.up, "ring", p)
    if rounds_out:
        assert f.out is not None
        b = rounds_out * size
        rate = ctx.rate(f.out, "recursive-doubling", p)
        stages.append(Stage("exchange rounds across domains", "scale_out", b, b / rate))
        latency += rounds_out * ctx.step_s(f.out, "ring", p)
    cost = _cost(op, "recursive-doubling", p, f, size, latency, stages, rounds_up + rounds_out, ctx, [])
    cost.bandwidth_seconds = sum(s.bandwidth_seconds for s in stages)  # rounds depend on each other: no overlap
    return cost


def _cost(
    op: str,
    algorithm: str,
    protocol: str,
    f: Fabric,
    size: float,
    latency: float,
    stages: list[Stage],
    steps: int,
    ctx: _Ctx,
    notes: list[str],
) -> Cost:
    return Cost(
        op,
        algorithm,
        protocol,
        f.ranks,
        size,
        latency,
        sum(s.bandwidth_seconds for s in stages),
        sum(s.bytes_per_rank for s in stages),
        steps,
        stages,
        notes,
        list(ctx.used),
    )


_BUILDERS = {
    "ring": _ring,
    "tree": _tree,
    "nvls": _nvls,
    "collnet": _collnet,
    "one-shot": _one_shot,
    "recursive-doubling": _recursive_doubling,
}


def available(op: str, f: Fabric, cal: Calibration) -> dict[str, str | None]:
    """Every algorithm for this operation, with None when it can run here or the reason it cannot."""
    out: dict[str, str | None] = {}
    for a in ALGORITHMS:
        reason: str | None = None
        if a not in SUPPORTED[op]:
            reason = f"{a} is not an algorithm for {op} here (ring is)"
        elif a not in cal.algorithms:
            reason = f"the calibration has no entry for {a}"
        elif f.ranks < 2:
            reason = "a single rank needs no algorithm"
        elif a == "nvls" and not (f.nvls and f.local > 1):
            reason = "the scale-up switch does not reduce in-network (no NVLS on this link class or no switch)"
        elif a == "nvls" and f.domains > 1 and (f.out is None or f.out.calib.nvls is None):
            reason = "NVLS tree needs a scale-out link class with NVLS figures"
        elif a == "collnet" and not (f.collnet and f.domains > 1):
            reason = "the cluster does not declare in-network reduction (InfiniBand SHARP) on its scale-out fabric"
        elif a == "collnet" and (f.out is None or f.out.calib.collnet is None):
            reason = "the scale-out link class has no CollNet figures"
        elif a == "one-shot" and not (f.one_shot and f.domains == 1):
            reason = "one-shot needs every rank to reach every other directly inside one scale-up domain"
        elif a == "recursive-doubling" and not (_pow2(f.local) and _pow2(f.domains)):
            reason = "recursive doubling needs a power-of-two number of ranks per domain and of domains"
        out[a] = reason
    return out


def _auto(algorithm: str, f: Fabric) -> bool:
    """Whether the library would pick this algorithm by itself. NCCL has no recursive doubling across nodes
    (its small-message choices there are ring / tree with LL), and a maintainer-reported 2-node small all-reduce
    takes ~46-48 us (nccl issue 1244), far above what recursive doubling would promise: it runs only when forced."""
    return not (algorithm == "recursive-doubling" and f.domains > 1)


def _pow2(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


def estimate(
    cal: Calibration, op: str, f: Fabric, size: float, algorithm: str | None = None, protocol: str | None = None
) -> Cost:
    """The fastest (algorithm, protocol) available, or the forced algorithm with its fastest protocol."""
    if op not in OPS:
        raise UsageError(f"unknown collective {op!r}: expected one of {', '.join(OPS)}")
    if size < 0 or not math.isfinite(size):
        raise UsageError(f"bytes must be a finite non-negative size, got {size}")
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise UsageError(f"unknown algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}")
    if f.ranks < 2:
        return Cost(op, "none", "none", f.ranks, size, 0.0, 0.0, 0.0, 0, [], ["a single rank: nothing to move"])
    reasons = available(op, f, cal)
    if algorithm is not None and reasons[algorithm]:
        raise UsageError(f"--algorithm {algorithm} cannot run here: {reasons[algorithm]}")
    names = [algorithm] if algorithm else [a for a, r in reasons.items() if r is None and _auto(a, f)]
    candidates: list[Cost] = []
    for a in names:
        protos = cal.algorithms[a].protocol_factor.protocols()
        for p in [protocol] if protocol else protos:
            if p not in protos:
                raise UsageError(f"protocol {p} is not calibrated for {a}: expected one of {', '.join(protos)}")
            candidates.append(_BUILDERS[a](_Ctx(cal), op, f, size, p))
    best = min(candidates, key=lambda c: (c.seconds, ALGORITHMS.index(c.algorithm), c.protocol))
    best.candidates = [
        {"algorithm": c.algorithm, "protocol": c.protocol, "seconds": c.seconds}
        for c in sorted(candidates, key=lambda c: (c.seconds, c.algorithm, c.protocol))
    ]
    how = "forced by --algorithm" if algorithm else "the fastest of the available algorithms and protocols"
    best.assumptions.insert(
        0,
        f"assumed: {best.algorithm} / {best.protocol} is what the library runs for this size ({how}; "
        "NCCL / RCCL choose by their own tuning model, which this mirrors but does not run)",
    )
    return best
