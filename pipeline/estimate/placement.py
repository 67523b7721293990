"""Placement: every rank of a workload on one accelerator, by the workload's `placement` or else the cluster's:

* fill-domains (default): scale-up domains in topology order, each by accelerator index (local index i beside NIC
  i in every domain: rails stay aligned);
* spread: the same inside each domain, on every k-th domain (k = available ÷ needed), so rings cross leaves and pods;
* explicit: ranges of ranks on consecutive accelerators in topology order from a named (or indexed) one.

Every tensor-parallel group must lie inside one scale-up domain.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any, get_args

import networkx as nx

from ..errors import UsageError
from ..formats.workload import PlacementStrategy, check_serving_degrees
from .decompose import Decomposition, check_degrees
from .routing import node_domain, ordered_accelerators
from .view import View
from .workloads import Workload


class PlacementError(UsageError):
    """A workload cannot be laid onto the topology as declared (exit code 2: the request is wrong)."""


def rank_accelerators(g: nx.Graph, w: Any, offset: int = 0, order: list[str] | None = None) -> dict[int, str]:
    """The accelerator of every rank `w` uses, by its placement strategy. `offset` (a co-running job) moves
    fill-domains and spread past the first `offset` accelerators (explicit ranges ignore it); `order`: g's
    `ordered_accelerators` when the caller holds them."""
    tid = g.graph.get("topology_id", "?")
    where = f"{w.path}" if w.path else f"workload {w.id}"
    ranks = w.used_ranks
    span = max(ranks) + 1
    order = ordered_accelerators(g) if order is None else order
    declared = w.placement
    # The workload's declared strategy, else the cluster's default, else fill-domains.
    strategy = declared.strategy if declared is not None else g.graph.get("placement") or "fill-domains"
    key = "$.placement" if declared is not None else f"topology {tid}'s default placement"
    if strategy == "fill-domains":
        if offset < 0 or offset + span > len(order):
            raise PlacementError(
                f"workload {w.id} needs {span} accelerators from index {offset}; topology {tid} has {len(order)}"
            )
        return {r: order[offset + r] for r in ranks}
    if strategy == "spread":
        return {r: a for r, a in zip(ranks, _spread(g, order, span, offset, f"{where}: at {key}"), strict=True)}
    if strategy != "explicit":
        raise PlacementError(
            f"{where}: at {key}: unknown strategy {strategy!r}; expected one of {get_args(PlacementStrategy)}"
        )
    index = {a: i for i, a in enumerate(order)}
    out: dict[int, str] = {}
    range_of: dict[int, int] = {}  # rank -> the index of the range that placed it, to name colliding ranges
    for k, rng in enumerate(declared.ranges):
        at = f"{where}: at $.placement.ranges[{k}]"
        first = rng.accelerator if isinstance(rng.accelerator, int) else index.get(rng.accelerator)
        if first is None:
            raise PlacementError(f"{at}.accelerator: {rng.accelerator!r} is not an accelerator of topology {tid}")
        if first + rng.ranks > len(order):
            raise PlacementError(
                f"{at}: {rng.ranks} ranks from accelerator {first} (topology order) run past the {len(order)} "
                f"accelerators of topology {tid}"
            )
        for j in range(rng.ranks):
            out[rng.first_rank + j] = order[first + j]
            range_of[rng.first_rank + j] = k
    # Loading the workload checked that the ranges place each of its ranks exactly once (workloads.py).
    seen: dict[str, int] = {}
    for r in ranks:
        if out[r] in seen:
            a, b = range_of[seen[out[r]]], range_of[r]
            raise PlacementError(
                f"{where}: at $.placement.ranges[{a}] and $.placement.ranges[{b}]: ranks {seen[out[r]]} and {r} "
                f"are both on accelerator {out[r]}; expected ranges on distinct accelerators"
            )
        seen[out[r]] = r
    return {r: out[r] for r in ranks}


def _spread(g: nx.Graph, order: list[str], span: int, offset: int, where: str) -> list[str]:
    """Every k-th scale-up domain (k = domains available ÷ domains needed), each filled by accelerator index."""
    tid = g.graph.get("topology_id", "?")
    nodes = g._node  # the accelerators in `order` only, not a walk over every node
    domains = [list(members) for _, members in groupby(order, key=lambda a: node_domain(a, nodes[a]))]
    sizes = {len(d) for d in domains}
    if len(sizes) != 1:
        raise PlacementError(f"{where}: spread needs scale-up domains of one size; topology {tid} has {sorted(sizes)}")
    size = sizes.pop()
    start = -(-offset // size)  # the first domain wholly past `offset`
    need = -(-span // size)
    available = len(domains) - start
    if need > available:
        raise PlacementError(
            f"{where}: spread needs {need} scale-up domains of {size} from domain {start}; topology {tid} has "
            f"{len(domains)}"
        )
    stride = available // need
    flat = [a for k in range(need) for a in domains[start + k * stride]]
    return flat[:span]


def place(view: View, d: Decomposition, w: Workload, offset: int = 0) -> dict[int, str]:
    """The accelerator of each rank the workload uses; a workload too large, degrees that do not divide what they
    split, or a tensor-parallel group beyond or across scale-up domains is refused with what to change."""
    # The scale-up rule first: on a lone 8-GPU server TP 16 is too large for its domain, not only for the server.
    tied = [c for c in d.communications if c.one_domain is not None]
    for comm in tied:
        if len(comm.group) > view.domain_size:
            raise UsageError(
                f"{comm.one_domain}: tensor parallel degree {len(comm.group)} exceeds the scale-up domain of "
                f"{view.reference} ({view.domain_size} accelerators); tensor parallelism must stay inside one "
                "scale-up domain"
            )
    if offset + d.ranks > len(view.accelerators):
        raise UsageError(
            f"workload {d.workload_id} needs {offset + d.ranks} accelerators; topology {view.g.graph['topology_id']} "
            f"has {len(view.accelerators)}"
        )
    accelerators = rank_accelerators(view.g, w, offset, view.order)
    if w.training is not None:
        check_degrees(w.model, w.training, f"workload {w.id}")
    if w.inference is not None:
        check_serving_degrees(w.model, w.inference, f"workload {w.id}")
    for comm in tied:
        for i, group in enumerate(comm.parts[0].groups):
            spans: dict[str, list[str]] = {}
            for r in group:
                spans.setdefault(view.domain(accelerators[r]), []).append(accelerators[r])
            if len(spans) > 1:
                where = "; ".join(f"domain {k}: {', '.join(v)}" for k, v in spans.items())
                raise PlacementError(
                    f"workload {w.id} on {view.g.graph.get('topology_id', '?')}: TP group {i} (ranks {group[0]}–"
                    f"{group[-1]}) straddles {len(spans)} scale-up domains ({where}); tensor parallelism must stay "
                    "inside one scale-up domain: choose a TP degree that divides the domain size"
                )
    return accelerators
