"""The collective registry: operations × algorithms × protocols as data, and one cost function per
(operation, algorithm, protocol), which every caller (calculator, workload phases, measured comparison) uses.

Buffer size S follows nccl-tests doc/PERFORMANCE.md (all-reduce: each rank's buffer; all-gather: the gathered
output; reduce-scatter: the input; all-to-all: what each rank sends; broadcast, reduce: the buffer; send: the
message); algbw = S / t, busbw = algbw × the operation's bus factor. Every candidate (algorithm × protocol) that can
run on the `Shape` is costed with the calibration's numbers (or a user's, parametric mode) and the fastest chosen,
as NCCL's tuner picks by its own model:

  time = base latency(algorithm, protocol) + Σ steps × step latency(link class, protocol)
         + bytes per rank per direction ÷ (line rate × link efficiency × protocol factor)

Across several domains of several ranks the intra- and inter-domain legs overlap in chunks: the slowest leg plus
one chunk through every other (the pipeline fill), never their sum. A ring there is NCCL's flat ring (each rank's
NIC carries 1/local of what every rank sends).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from copy import copy
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..core.confidence import of_status, weakest
from ..core.format import format_exact
from ..errors import UsageError

# The calibration's models and the topology view (NetworkX, SciPy) are loaded where they are used, not with the
# cost functions: the measured comparison reads the operation and algorithm names alone.
if TYPE_CHECKING:
    from ..formats.calibration import Calibration, LinkClass, Number
    from .view import Lineage

# Per operation: the bytes each rank sends on a flat ring over n ranks as a multiple of S, which is also the
# nccl-tests bus factor (busbw = algbw × it), and the ring's latency-bearing steps.
OPERATIONS: dict[str, tuple[Callable[[int], float], Callable[[int], int]]] = {
    "all-reduce": (lambda n: 2 * (n - 1) / n, lambda n: 2 * (n - 1)),
    "reduce-scatter": (lambda n: (n - 1) / n, lambda n: n - 1),
    "all-gather": (lambda n: (n - 1) / n, lambda n: n - 1),
    "all-to-all": (lambda n: (n - 1) / n, lambda n: n - 1),
    "broadcast": (lambda n: 1.0, lambda n: n - 1),
    "reduce": (lambda n: 1.0, lambda n: n - 1),
    "send": (lambda n: 1.0, lambda n: 1),
}
OPS = tuple(OPERATIONS)


def operation(op: str) -> tuple[Callable[[int], float], Callable[[int], int]]:
    if op not in OPERATIONS:
        raise UsageError(f"unknown collective {op!r}: expected one of {', '.join(OPS)}")
    return OPERATIONS[op]


def bus_factor(op: str, n: int) -> float:
    if n < 1:
        raise UsageError(f"ranks must be at least 1, got {n}")
    return operation(op)[0](n)


def wire_factor(op: str, n: int) -> float:
    """Bytes each rank sends on a flat ring, as a multiple of S (nothing for a group of one)."""
    return operation(op)[0](n) if n > 1 or op == "send" else 0.0


def ring_steps(op: str, n: int) -> int:
    return operation(op)[1](n) if n > 1 or op == "send" else 0


@dataclass(frozen=True)
class Tier:
    """One network the collective crosses, as one rank sees it."""

    network: str  # scale_up | scale_out (or the name a parametric estimate gives its one network)
    link_class: str
    calib: LinkClass | None
    bytes_per_s: float  # what one rank reaches its peers with on this network, per direction
    extra_hop_latency_s: float = 0.0  # path latency beyond the single hop NCCL's step latency was measured on
    oversubscription: float = 1.0  # fluid share when every rank crosses an oversubscribed tier at once


@dataclass(frozen=True)
class Shape:
    """A group of ranks as the collective sees it, and what that rests on (topology lineage, notes)."""

    ranks: int
    local: int  # ranks of the group in each scale-up domain
    domains: int
    up: Tier | None  # None when each domain holds one rank of the group
    out: Tier | None  # None when the group sits in one domain
    nvls: bool = False  # the scale-up switch reduces in-network (NVLink SHARP)
    collnet: bool = False  # the scale-out fabric reduces in-network (InfiniBand SHARP), declared by the cluster
    one_shot: bool = False  # every rank reaches every other rank of its domain directly (switch or full mesh)
    lineage: frozenset[Lineage] = frozenset()  # each topology figure used, with its status and confidence
    notes: tuple[str, ...] = ()
    technologies: tuple[tuple[str, str], ...] = ()  # network → "technology -> link class"
    collnet_basis: str | None = None  # the cluster's label for its declared InfiniBand SHARP
    topology_id: str = ""

    def __post_init__(self) -> None:
        if self.ranks != self.local * self.domains:
            raise UsageError(f"{self.ranks} ranks do not split into {self.domains} domains of {self.local}")
        if self.local > 1 and self.up is None:
            raise UsageError("a group with several ranks per domain needs the scale-up network")
        if self.domains > 1 and self.out is None:
            raise UsageError("a group across domains needs the scale-out network")

    def without_oversubscription(self) -> Shape:
        if self.out is None or self.out.oversubscription == 1:
            return self
        return replace(self, out=replace(self.out, oversubscription=1.0))


@dataclass
class Leg:
    """The part of a collective on one network."""

    name: str
    network: str
    bytes_per_rank: float
    bandwidth_seconds: float


@dataclass
class Estimate:
    """One collective costed: the algorithm and protocol, the time terms, the legs, the numbers used."""

    op: str
    algorithm: str
    protocol: str
    ranks: int
    bytes: float
    latency_seconds: float
    bandwidth_seconds: float
    bytes_on_wire_per_rank: float
    steps: int
    stages: list[Leg]
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

    def lineage(self) -> set[Lineage]:
        """The calibration numbers used, as lineage records of the `calibration` reference."""
        from .view import Lineage

        return {
            Lineage(reference_id="calibration", field=path, status=n.status, confidence=of_status(n.status))
            for path, n in self.used
        }

    def as_dict(self) -> dict[str, Any]:
        times = ("op", "ranks", "bytes", "algorithm", "protocol", "seconds", "latency_seconds", "bandwidth_seconds")
        rates = ("bytes_on_wire_per_rank", "steps", "algbw_gb_per_s", "busbw_gb_per_s", "dominant", "confidence")
        return {
            **{k: getattr(self, k) for k in times},
            "queueing_seconds": 0.0,
            **{k: getattr(self, k) for k in rates},
            "stages": [vars(s) for s in self.stages],
            "assumptions": self.assumptions,
            "calibration": sorted({f"{path} = {format_exact(n.value)} [{n.status}]" for path, n in self.used}),
            "candidates": self.candidates,
        }


class Numbers:
    """The calibration's numbers for one candidate, collected as used (its confidence is the weakest of those)."""

    def __init__(self, cal: Calibration) -> None:
        self.cal = cal
        self.used: list[tuple[str, Number]] = []

    def protocols(self, algorithm: str) -> list[str]:
        return self.cal.algorithms[algorithm].protocol_factor.protocols()

    def why_not(self, algorithm: str) -> str | None:
        return None if algorithm in self.cal.algorithms else f"the calibration has no entry for {algorithm}"

    def fresh(self) -> Numbers:
        """A copy collecting its own numbers (one per candidate)."""
        new = copy(self)
        new.used = []
        return new

    def num(self, path: str, n: Number | None) -> float:
        if n is None:
            raise KeyError(path)
        self.used.append((path, n))
        return n.value

    def base_s(self, algorithm: str, protocol: str) -> float:
        a = self.cal.algorithms[algorithm]
        return self.num(f"algorithms.{algorithm}.base_latency_us.{protocol}", a.base_latency_us.get(protocol)) * 1e-6

    def factor(self, algorithm: str, protocol: str) -> float:
        return self.num(
            f"algorithms.{algorithm}.protocol_factor.{protocol}",
            self.cal.algorithms[algorithm].protocol_factor.get(protocol),
        )

    def step_s(self, tier: Tier, family: str, protocol: str) -> float:
        assert tier.calib is not None
        per = getattr(tier.calib.step_latency_us, family)
        us = self.num(f"link_classes.{tier.link_class}.step_latency_us.{family}.{protocol}", per.get(protocol))
        return us * 1e-6 + tier.extra_hop_latency_s

    def rate(self, tier: Tier, algorithm: str, protocol: str) -> float:
        """Bytes per second per rank per direction this algorithm and protocol sustain on one tier."""
        assert tier.calib is not None
        eff = self.num(f"link_classes.{tier.link_class}.efficiency", tier.calib.efficiency)
        return tier.bytes_per_s * eff * self.factor(algorithm, protocol) / tier.oversubscription

    def in_network(self, tier: Tier, kind: str) -> tuple[float, float]:
        """(bytes/s per rank per direction, latency s) of NVLS or CollNet on this tier."""
        assert tier.calib is not None
        inn = getattr(tier.calib, kind)
        eff = self.num(f"link_classes.{tier.link_class}.{kind}.efficiency", inn.efficiency)
        lat = self.num(f"link_classes.{tier.link_class}.{kind}.latency_us", inn.latency_us) * 1e-6
        return tier.bytes_per_s * eff / tier.oversubscription, lat + tier.extra_hop_latency_s

    def chunk(self) -> float:
        return self.num("pipeline.chunk_bytes", self.cal.pipeline.chunk_bytes)


class Given(Numbers):
    """The figures a user states (parametric mode): a bandwidth per rank (× `efficiency`), a latency per step, no
    launch latency, one protocol."""

    PROTOCOL = "as given"

    def __init__(self, latency_s: float, efficiency: float = 1.0) -> None:
        self.latency_s, self.efficiency = latency_s, efficiency
        self.used = []

    def protocols(self, algorithm: str) -> list[str]:
        return [self.PROTOCOL]

    def why_not(self, algorithm: str) -> str | None:
        return None if ALGORITHMS[algorithm].parametric else f"{algorithm} needs the calibration: give --topology"

    def base_s(self, algorithm: str, protocol: str) -> float:
        return 0.0

    def factor(self, algorithm: str, protocol: str) -> float:
        return 1.0

    def step_s(self, tier: Tier, family: str, protocol: str) -> float:
        return self.latency_s + tier.extra_hop_latency_s

    def rate(self, tier: Tier, algorithm: str, protocol: str) -> float:
        return tier.bytes_per_s * self.efficiency

    def chunk(self) -> float:
        return 0.0


def _pipelined(stages: list[Leg], size: float, chunk: float) -> float:
    """Overlapped legs: the slowest leg plus one chunk's worth of every other leg (the fill)."""
    busy = [s for s in stages if s.bandwidth_seconds > 0]
    if not busy:
        return 0.0
    chunks = max(1, math.floor(size / chunk)) if chunk > 0 else 1
    slowest = max(s.bandwidth_seconds for s in busy)
    return slowest + (sum(s.bandwidth_seconds for s in busy) - slowest) / chunks


def _estimate(
    op: str, algorithm: str, protocol: str, f: Shape, size: float, latency: float, stages: list[Leg], steps: int,
    ctx: Numbers, notes: list[str], pipelined: bool = False,
) -> Estimate:  # fmt: skip
    """The estimate of legs run one after the other, or `pipelined` (overlapped in chunks, `_pipelined`)."""
    if pipelined:
        bandwidth = _pipelined(stages, size, ctx.chunk() if len(stages) > 1 else 0)
    else:
        bandwidth = sum(s.bandwidth_seconds for s in stages)
    wire = sum(s.bytes_per_rank for s in stages)
    return Estimate(op, algorithm, protocol, f.ranks, size, latency, bandwidth, wire, steps, stages, notes, [*ctx.used])


def _ring(ctx: Numbers, op: str, f: Shape, size: float, p: str) -> Estimate:
    """Ring inside one domain or across domains; with several ranks in each of several domains, NCCL's flat ring,
    its two legs pipelined."""
    n, local, outer = f.ranks, f.local, f.domains
    base = ctx.base_s("ring", p)
    if op == "send" or outer == 1 or local == 1:
        # A send takes the fabric when it has one; a ring the one network its group spans.
        tier = (f.out or f.up) if op == "send" else (f.up if outer == 1 else f.out)
        assert tier is not None
        wire = wire_factor(op, n) * size
        steps = ring_steps(op, n)
        name = "point-to-point" if op == "send" else f"{op} ring over {tier.network}"
        st = Leg(name, tier.network, wire, wire / ctx.rate(tier, "ring", p))
        return _estimate(op, "ring", p, f, size, base + steps * ctx.step_s(tier, "ring", p), [st], steps, ctx, [])
    assert f.up is not None and f.out is not None
    up_rate, out_rate = ctx.rate(f.up, "ring", p), ctx.rate(f.out, "ring", p)
    if op in ("all-reduce", "reduce-scatter", "all-gather"):
        # NCCL's flat ring: every rank sends wire_factor(n)·S per direction over all channels; in each channel one
        # of a domain's `local` ranks sends across domains, so each rank's NIC carries 1/local of it and its
        # scale-up links the rest. Steps as NCCL's tuning model counts them (nsteps, nInterSteps).
        wire = wire_factor(op, n) * size
        up_b, out_b = wire * (local - 1) / local, wire / local
        steps = ring_steps(op, n)
        steps_out = 2 * outer if op == "all-reduce" else outer - 1
        steps_up = steps - steps_out
        what = (
            f"a flat ring over all {n} ranks: {wire_factor(op, n):.3g}·S per rank, 1/{local} of it on each rank's "
            f"NIC across {outer} domains"
        )
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
        Leg("intra-domain", "scale_up", up_b, up_b / up_rate),
        Leg("inter-domain", "scale_out", out_b, out_b / out_rate),
    ]
    note = f"across domains, pipelined: {what}; the legs overlap in chunks (slowest leg + pipeline fill)"
    latency = base + steps_up * ctx.step_s(f.up, "ring", p) + steps_out * ctx.step_s(f.out, "ring", p)
    return _estimate(op, "ring", p, f, size, latency, stages, steps_up + steps_out, ctx, [note], pipelined=True)


def _tree(ctx: Numbers, op: str, f: Shape, size: float, p: str) -> Estimate:
    """NCCL's double binary tree across domains, a chain inside each: every rank sends and receives S twice (reduce,
    broadcast); each rank's NIC carries its 1/local share across domains."""
    stages: list[Leg] = []
    latency = ctx.base_s("tree", p)
    steps = 0
    if f.local > 1:
        assert f.up is not None
        stages.append(Leg("chain inside the domain", "scale_up", 2 * size, 2 * size / ctx.rate(f.up, "tree", p)))
        latency += 2 * (f.local - 1) * ctx.step_s(f.up, "tree", p)
        steps += 2 * (f.local - 1)
    if f.domains > 1:
        assert f.out is not None
        b = 2 * size / f.local
        stages.append(Leg("double binary tree across domains", "scale_out", b, b / ctx.rate(f.out, "tree", p)))
        depth = math.ceil(math.log2(f.domains))
        latency += 2 * depth * ctx.step_s(f.out, "tree", p)
        steps += 2 * depth
    notes = ["NCCL double binary tree (reduce, broadcast)"]
    return _estimate(op, "tree", p, f, size, latency, stages, steps, ctx, notes, pipelined=True)


def _nvls(ctx: Numbers, op: str, f: Shape, size: float, p: str) -> Estimate:
    """NVLink SHARP: the switch reduces, S(local+1)/local per rank per direction; across domains the rank's NIC
    all-reduces its S/local share (NVLS tree)."""
    assert f.up is not None
    rate, lat = ctx.in_network(f.up, "nvls")
    ctx.base_s("nvls", p)
    ctx.factor("nvls", p)
    up_b = size * (f.local + 1) / f.local
    if f.domains > 1:
        # Across domains the in-switch phase keeps the single-domain NVLS busbw, not its algbw: NCCL's tuning model
        # (src/graph/tuning.cc) sets one per-channel NVLS figure whatever the node count and turns it into algbw with
        # the whole communicator's nRanks / nsteps (busbw flat from one node to two: nccl issue 1221, 430 GB/s).
        up_b *= bus_factor(op, f.ranks) / bus_factor(op, f.local)
    stages = [Leg("in-switch reduction (NVLS)", "scale_up", up_b, up_b / rate)]
    latency, steps = lat, 1
    notes = ["NVLink SHARP (NVLS): the scale-up switch reduces in-network"]
    if f.domains > 1:
        assert f.out is not None
        out_rate, out_lat = ctx.in_network(f.out, "nvls")
        # Each rank's NIC sends and receives its S/local share once at two domains (the double binary trees are
        # one exchange); above two, interior nodes forward to a parent and two children: NCCL's tuning model gives
        # the NVLS tree twice the network bandwidth at two nodes as above two (bwInter x 2 for nNodes <= 2).
        out_b = size / f.local * (1 if f.domains <= 2 else 2)
        stages.append(Leg("tree across domains (NVLS tree)", "scale_out", out_b, out_b / out_rate))
        depth = math.ceil(math.log2(f.domains))
        latency += 2 * depth * out_lat
        steps += 2 * depth
        notes.append(f"NVLS tree: each rank's NIC all-reduces its S/{f.local} share across {f.domains} domains")
    return _estimate(op, "nvls", p, f, size, latency, stages, steps, ctx, notes, pipelined=True)


def _collnet(ctx: Numbers, op: str, f: Shape, size: float, p: str) -> Estimate:
    """InfiniBand SHARP (CollNet): reduce-scatter inside the domain, each NIC's S/local share to the fabric and back
    once, all-gather inside."""
    assert f.out is not None
    rate, lat = ctx.in_network(f.out, "collnet")
    ctx.base_s("collnet", p)
    ctx.factor("collnet", p)
    stages = [Leg("in-fabric reduction (SHARP)", "scale_out", size / f.local, size / f.local / rate)]
    latency, steps = lat, 1
    if f.local > 1:
        assert f.up is not None
        up_b = 2 * (f.local - 1) / f.local * size
        stages.insert(0, Leg("intra-domain", "scale_up", up_b, up_b / ctx.rate(f.up, "ring", p)))
        latency += 2 * (f.local - 1) * ctx.step_s(f.up, "ring", p)
        steps += 2 * (f.local - 1)
    notes = ["CollNet: InfiniBand SHARP in-network"]
    return _estimate(op, "collnet", p, f, size, latency, stages, steps, ctx, notes, pipelined=True)


def _one_shot(ctx: Numbers, op: str, f: Shape, size: float, p: str) -> Estimate:
    """One-shot all-reduce: every rank pushes its whole buffer to every peer at once and reduces locally; one step."""
    assert f.up is not None
    wire = (f.ranks - 1) * size
    st = Leg("push to every peer", "scale_up", wire, wire / ctx.rate(f.up, "one-shot", p))
    latency = ctx.base_s("one-shot", p) + ctx.step_s(f.up, "ring", p)
    return _estimate(op, "one-shot", p, f, size, latency, [st], 1, ctx, ["one-shot: one step, (n-1)·S per rank"])


def _rounds(ctx: Numbers, algorithm: str, f: Shape, p: str, rounds: Callable[[int], tuple[int, float]]) -> tuple:
    """Dependent exchange rounds inside each domain, then across (no overlap); `rounds(n)`: how many rounds n ranks
    take and the bytes a rank sends in all."""
    stages: list[Leg] = []
    latency = ctx.base_s(algorithm, p)
    steps = 0
    for tier, ranks, where in ((f.up, f.local, "inside the domain"), (f.out, f.domains, "across domains")):
        k, b = rounds(ranks)
        if k:
            assert tier is not None
            stages.append(Leg(f"exchange rounds {where}", tier.network, b, b / ctx.rate(tier, algorithm, p)))
            latency += k * ctx.step_s(tier, "ring", p)
            steps += k
    return stages, latency, steps


def _recursive_doubling(ctx: Numbers, op: str, f: Shape, size: float, p: str) -> Estimate:
    """log2(n) exchange rounds of the whole buffer: few steps, much data — for small messages."""

    def rounds(n: int) -> tuple[int, float]:
        k = int(math.log2(n))
        return k, k * size

    stages, latency, steps = _rounds(ctx, "recursive-doubling", f, p, rounds)
    return _estimate(op, "recursive-doubling", p, f, size, latency, stages, steps, ctx, [])


def _bruck(ctx: Numbers, op: str, f: Shape, size: float, p: str) -> Estimate:
    """Bruck's all-to-all: in round k of ceil(log2 n) every rank forwards the blocks (S/n each) whose index has bit
    k set."""

    def rounds(n: int) -> tuple[int, float]:
        return math.ceil(math.log2(n)), sum(j.bit_count() for j in range(1, n)) * size / n

    stages, latency, steps = _rounds(ctx, "bruck", f, p, rounds)
    notes = ["Bruck: ceil(log2 n) rounds, each forwarding the blocks whose index has that round's bit set"]
    return _estimate(op, "bruck", p, f, size, latency, stages, steps, ctx, notes)


def _pow2(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


@dataclass(frozen=True)
class Algorithm:
    """One algorithm: its operations, cost function, why it cannot run on a shape, whether the library picks it by
    itself (else only when forced), and whether a bandwidth and a latency alone cost it (parametric mode)."""

    name: str
    ops: tuple[str, ...]
    cost: Callable[[Numbers, str, Shape, float, str], Estimate]
    why_not: Callable[[Shape], str | None] = lambda f: None
    auto: Callable[[Shape], bool] = lambda f: True
    parametric: bool = False


ALGORITHMS = {
    a.name: a
    for a in (
        Algorithm("ring", OPS, _ring, parametric=True),
        Algorithm("tree", ("all-reduce",), _tree, parametric=True),
        Algorithm(
            "nvls",
            ("all-reduce",),
            _nvls,
            lambda f: (
                "the scale-up switch does not reduce in-network (no NVLS on this link class or no switch)"
                if not (f.nvls and f.local > 1)
                else "NVLS tree needs a scale-out link class with NVLS figures"
                if f.domains > 1 and (f.out is None or f.out.calib is None or f.out.calib.nvls is None)
                else None
            ),
        ),
        Algorithm(
            "collnet",
            ("all-reduce",),
            _collnet,
            lambda f: (
                "the cluster does not declare in-network reduction (InfiniBand SHARP) on its scale-out fabric"
                if not (f.collnet and f.domains > 1)
                else "the scale-out link class has no CollNet figures"
                if f.out is None or f.out.calib is None or f.out.calib.collnet is None
                else None
            ),
        ),
        Algorithm(
            "one-shot",
            ("all-reduce",),
            _one_shot,
            lambda f: (
                None
                if f.one_shot and f.domains == 1
                else "one-shot needs every rank to reach every other directly inside one scale-up domain"
            ),
        ),
        # NCCL has no recursive doubling across nodes (its small-message choices there are ring / tree with LL),
        # and a maintainer-reported 2-node small all-reduce takes ~46-48 us (nccl issue 1244), far above what
        # recursive doubling would promise: across domains it runs only when forced.
        Algorithm(
            "recursive-doubling",
            ("all-reduce",),
            _recursive_doubling,
            lambda f: (
                None
                if _pow2(f.local) and _pow2(f.domains)
                else "recursive doubling needs a power-of-two number of ranks per domain and of domains"
            ),
            lambda f: f.domains == 1,
            parametric=True,
        ),
        # NCCL runs all-to-all as point-to-point sends; Bruck's algorithm is MPI's for small messages: forced only.
        Algorithm("bruck", ("all-to-all",), _bruck, auto=lambda f: False, parametric=True),
    )
}


def shown_algorithm(op: str, algorithm: str) -> str:
    """The algorithm a result names: a send runs on NCCL's point-to-point channels, timed with the ring's figures."""
    return "point-to-point" if op == "send" else algorithm


def available(op: str, f: Shape, ctx: Numbers) -> dict[str, str | None]:
    """Every algorithm, with None when it can run this operation here or the reason it cannot."""
    out: dict[str, str | None] = {}
    for a in ALGORITHMS.values():
        if op not in a.ops:
            runs = [x for x, y in ALGORITHMS.items() if op in y.ops]
            verb = "is" if len(runs) == 1 else "are"
            out[a.name] = f"{a.name} is not an algorithm for {op} here ({', '.join(runs)} {verb})"
        elif f.ranks < 2:
            out[a.name] = "a single rank needs no algorithm"
        else:
            out[a.name] = ctx.why_not(a.name) or a.why_not(f)
    return out


def estimate(
    ctx: Numbers | Calibration,
    op: str,
    f: Shape,
    size: float,
    algorithm: str | None = None,
    protocol: str | None = None,
) -> Estimate:
    """The fastest (algorithm, protocol) available, or the forced algorithm with its fastest protocol."""
    numbers = ctx if isinstance(ctx, Numbers) else Numbers(ctx)
    operation(op)
    if size < 0 or not math.isfinite(size):
        raise UsageError(f"bytes must be a finite non-negative size, got {size}")
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise UsageError(f"unknown algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}")
    if f.ranks < 2 and op != "send":
        return Estimate(op, "none", "none", f.ranks, size, 0.0, 0.0, 0.0, 0, [], ["a single rank: nothing to move"])
    reasons = available(op, f, numbers)
    if algorithm is not None and reasons[algorithm]:
        raise UsageError(f"--algorithm {algorithm} cannot run here: {reasons[algorithm]}")
    names = [algorithm] if algorithm else [a for a, r in reasons.items() if r is None and ALGORITHMS[a].auto(f)]
    order = list(ALGORITHMS)
    candidates: list[Estimate] = []
    for a in names:
        protos = numbers.protocols(a)
        for p in [protocol] if protocol else protos:
            if p not in protos:
                raise UsageError(f"protocol {p} is not calibrated for {a}: expected one of {', '.join(protos)}")
            candidates.append(ALGORITHMS[a].cost(numbers.fresh(), op, f, size, p))
    best = min(candidates, key=lambda c: (c.seconds, order.index(c.algorithm), c.protocol))
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


def parametric(
    op: str,
    ranks: int,
    size: float,
    bytes_per_s: float,
    latency_s: float,
    *,
    algorithm: str = "ring",
    efficiency: float = 1.0,
) -> Estimate:
    """One collective over `ranks` ranks, one per node of a flat network, at the bandwidth (per direction) and
    per-step latency given (`estimate` checks the operation and the size)."""
    if ranks < 1:
        raise UsageError(f"ranks must be at least 1, got {ranks}")
    if bytes_per_s <= 0 or not math.isfinite(bytes_per_s):
        raise UsageError(f"bandwidth must be positive, got {bytes_per_s}")
    if not 0 < efficiency <= 1:
        raise UsageError(f"efficiency must be in (0, 1], got {efficiency}")
    if latency_s < 0 or not math.isfinite(latency_s):
        raise UsageError("latency must be a finite non-negative time")
    if algorithm in ALGORITHMS and not ALGORITHMS[algorithm].parametric:
        costs = ", ".join(a for a, x in ALGORITHMS.items() if x.parametric)
        raise UsageError(
            f"--algorithm {algorithm} needs the calibration and the wiring: give --topology (the parametric mode "
            f"costs {costs})"
        )
    n = max(ranks, 2) if op == "send" else ranks
    tier = Tier("given", "as given", None, bytes_per_s)
    est = estimate(Given(latency_s, efficiency), op, Shape(n, 1, n, None, tier), size, algorithm)
    est.assumptions = []
    return est
