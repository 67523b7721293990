"""One parallel layout evaluated from a cluster summary, without the graph: what the planner asks of the traffic
library (`estimate/`) for each of the tens of thousands of layouts it searches. Only the planner uses it.

* `group_cost`: the analytical per-tier cost of one collective over a group whose shape (ranks per domain,
  domains, tier, the fabric seen there) was placed once on the installed wiring (`calculator.place`) — the
  library's time `cost.library` gives a phase before it is routed, computed from the placed shape alone so that
  layouts sharing a shape share one placement (symmetry) and a Ray worker needs no graph;
* `training`: `step.training` for a layout (schedule, uneven stages, recompute, ZeRO, context parallelism and
  overlap are the step model's), with the step model's pure functions memoized while a search evaluates.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..estimate import flops, memory
from ..estimate import step as step_model
from ..estimate.collectives import Shape
from ..estimate.cost import Cost, bytes_by_network, timed, unrouted_terms
from ..estimate.routing import GBPS_TO_BYTES
from ..estimate.view import TIER_NAMES


@dataclass(frozen=True)
class GroupShape:
    """A group placed once on the installed wiring (`calculator.place`): the collective's shape there, the tier
    separating its ranks and the hops of its path. Layouts whose groups have the same shape share it (one cost per
    shape and tier)."""

    shape: Shape
    tier: int  # 0 scale-up domain, 1 one leaf, 2 leaf-spine, 3 spine-core
    hops: int
    send: bool = False  # a two-rank shape for point-to-point messages

    @property
    def ranks(self) -> int:
        return self.shape.ranks

    @property
    def domains(self) -> int:
        return self.shape.domains


def group_cost(calibration: Any, placed: GroupShape, op: str, size: float, concurrent: int = 2) -> Cost:
    """The analytical per-tier cost of `op` over a placed group, as `cost.library` times a phase before routing:
    the algorithm and protocol the library chooses with the fabric's oversubscription shared by every group of
    the phase (a lone send shares nothing), the same algorithm on the fabric alone for the time terms, and the
    difference as queueing."""
    shape, real, free = timed(calibration, op, placed.shape, size, concurrent)
    by_net = bytes_by_network(real)
    network = "scale_up" if shape.domains == 1 else ("scale_out" if shape.local == 1 else "scale_up+scale_out")
    slowest = max(real.stages, key=lambda x: x.bandwidth_seconds, default=None)
    tier = shape.out if shape.domains > 1 else shape.up
    line = tier.bytes_per_s / GBPS_TO_BYTES if tier is not None else None
    effective = (
        slowest.bytes_per_rank / slowest.bandwidth_seconds / GBPS_TO_BYTES
        if slowest and slowest.bandwidth_seconds > 0
        else None
    )
    algorithm = "point-to-point" if op == "send" else real.algorithm
    return Cost(
        algorithm=f"{algorithm} / {real.protocol}",
        network=network,
        tier=TIER_NAMES[placed.tier],
        hops=placed.hops,
        bottleneck_gbps=line,
        effective_gbps=effective,
        notes="analytical per-tier cost (the group's shape on the installed wiring; not routed per link)",
        bytes_on_wire_by_network=dict(sorted(by_net.items())),
        **unrouted_terms(shape, real, free),
    )


def training(
    w: Any, phases: list[Any], acc: step_model.Accelerator, rates: Any, memory_headroom: float = 0.0
) -> dict[str, Any]:
    """`step.training` of `w` (its context parallelism included), the step model's pure functions answered from
    the search caches."""
    with _memoized():
        return step_model.training(w, phases, acc, rates, memory_headroom)


def flops_shape(model: Any) -> Any:
    """The model's operation-count shape (`flops.from_workload`), computed once per model object."""
    key = id(model)
    found = _SHAPES.get(key)
    if found is None or found[0] is not model:
        found = _SHAPES[key] = (model, flops.from_workload(model))
    return found[1]


_SHAPES: dict[int, tuple[Any, Any]] = {}


# --- Memoized pure functions for a search ---------------------------------------------------------------------
# `step.training` computes the model state and the per-layer activations of every pipeline rank, and the layer's
# operations, afresh: ranks holding the same number of layers repeat the same arithmetic, and the layouts of a
# search repeat the same arguments thousands of times (half of each evaluation's time). While a search evaluates,
# those three pure functions answer from a cache keyed by their arguments (copies of the results, so no caller can
# alter a cached one). Nothing else changes: the values are the functions' own.
_CACHES: dict[str, dict[Any, Any]] = {"state": {}, "activations": {}, "layer": {}}
_ORIGINAL = {
    "state": memory.training_state,
    "activations": memory.layer_activation_bytes,
    "layer": flops.layer,
}
_CACHE_LIMIT = 20_000


def _cached(kind: str, copy: Any) -> Any:
    original, cache = _ORIGINAL[kind], _CACHES[kind]

    def call(*args: Any, **kwargs: Any) -> Any:
        key = (args, tuple(sorted(kwargs.items())))
        found = cache.get(key)
        if found is None:
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            found = cache[key] = original(*args, **kwargs)
        return copy(found)

    return call


_STATE = _cached("state", dict)
_ACTIVATIONS = _cached("activations", lambda r: {**r, "parts": dict(r["parts"])} if "parts" in r else dict(r))
_LAYER = _cached("layer", lambda r: flops.LayerWork(list(r.forward), list(r.backward), list(r.recompute)))


def forget() -> None:
    """Empty the search caches (a benchmark timing a cold search)."""
    for cache in _CACHES.values():
        cache.clear()


@contextlib.contextmanager
def _memoized() -> Iterator[None]:
    """`memory.training_state`, `memory.layer_activation_bytes` and `flops.layer` answered from the caches while
    the block runs (a search evaluates in one thread; another thread calling them meanwhile gets the same values)."""
    memory.training_state, memory.layer_activation_bytes, flops.layer = _STATE, _ACTIVATIONS, _LAYER
    try:
        yield
    finally:
        memory.training_state = _ORIGINAL["state"]
        memory.layer_activation_bytes = _ORIGINAL["activations"]
        flops.layer = _ORIGINAL["layer"]
