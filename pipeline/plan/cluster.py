"""The cluster as a search sees it: a small, picklable summary instead of the graph.

A layout's collectives run over groups that are arithmetic progressions of ranks (TP innermost, then CP and DP,
then PP stages: `estimate/decompose.py`). Each distinct group — (first rank, stride, size) under the cluster's
placement — is placed on the installed wiring once (`calculator.place`: ranks per domain, domains, tier, line
rates, link classes, the lineage of every figure) and kept as a `layout_eval.Shape`. Every layout with that group
then costs its collectives from the shape alone (symmetry), and a Ray worker receives the shapes, never the graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ..core import confidence as rule
from ..errors import UsageError
from ..estimate import step as step_model
from ..estimate.calculator import place
from ..estimate.placement import rank_accelerators
from ..estimate.view import View
from .layout_eval import GroupShape, group_cost

# (first rank, stride, ranks, GPUs of the job): the GPUs matter only where the placement spreads a job over the
# cluster (the `spread` strategy), but are always part of the key so a shape is never reused under the wrong one.
GroupKey = tuple[int, int, int, int]


def group_key(group: tuple[int, ...], gpus: int) -> GroupKey:
    """A representative group as (first, stride, ranks, gpus); only arithmetic progressions are expected."""
    n = len(group)
    stride = group[1] - group[0] if n > 1 else 1
    if n > 2 and group[-1] != group[0] + stride * (n - 1):
        raise UsageError(f"internal: the group {group[:4]}… is not an arithmetic progression of ranks")
    return group[0], stride, n, gpus


@dataclass
class ClusterSummary:
    """Everything an evaluation reads of a cluster: ids, size, domain, the accelerator's registry fields and its
    calibrated compute rates for the model's dtype (`step.rates_for`), the collective calibration, the memory
    headroom (params.yaml `step.memory_headroom`) and the placed group shapes."""

    id: str
    reference: str
    accelerators: int
    domain_size: int
    accelerator: step_model.Accelerator
    calibration: Any
    rates: Any  # estimate/throughput.Rates
    memory_headroom: float
    placement: str
    shapes: dict[GroupKey, GroupShape] = field(default_factory=dict)

    def shape(self, key: GroupKey) -> GroupShape:
        try:
            return self.shapes[key]
        except KeyError:
            raise UsageError(f"internal: group {key} was not placed before the search (cluster {self.id})") from None

    def cost(self, op: str, key: GroupKey, size: float, concurrent: int) -> Any:
        return group_cost(self.calibration, self.shape(key), op, size, concurrent)

    @property
    def compute_confidence(self) -> str:
        """The weakest of the accelerator's registry fields and of the throughput calibration numbers used (a
        number fitted on one published result, or a user's what-if, counts as assumed)."""
        fields = [f.confidence for f in self.accelerator.fields.values() if f.value is not None]
        used = [u["status"] if u["status"] in ("published", "measured") else "assumed" for u in self.rates.used]
        return rule.weakest([*fields, *used])


def summary(view: View, accelerator: step_model.Accelerator, rates: Any, memory_headroom: float) -> ClusterSummary:
    tid = view.g.graph["topology_id"]
    return ClusterSummary(
        id=tid,
        reference=view.reference,
        accelerators=len(view.accelerators),
        domain_size=view.domain_size,
        accelerator=accelerator,
        calibration=view.calibration,
        rates=rates,
        memory_headroom=memory_headroom,
        placement=view.g.graph.get("placement") or "fill-domains",
    )


def _rank_map(view: View, gpus: int) -> dict[int, str]:
    """The accelerator of each rank of a `gpus`-rank job under the cluster's default placement."""
    job = SimpleNamespace(
        id=f"plan-{gpus}",
        path=None,
        placement=None,
        training=SimpleNamespace(tp=gpus, pp=1, dp=1),
        inference=None,
        used_ranks=list(range(gpus)),
    )
    return rank_accelerators(view.g, job, order=view.order)


def place_shapes(view: View, summary: ClusterSummary, keys: set[GroupKey], sends: set[GroupKey]) -> dict[GroupKey, str]:
    """Place every group not yet placed (sends as two-rank shapes: first and first + stride). Returns the groups
    the collective model cannot cost, with why (a group spread unevenly over scale-up domains)."""
    maps: dict[int, dict[int, str]] = {}
    refused: dict[GroupKey, str] = {}
    for key in sorted(keys | sends):
        if key in summary.shapes:
            continue
        first, stride, n, gpus = key
        if gpus not in maps:
            maps[gpus] = _rank_map(view, gpus)
        ranks = maps[gpus]
        members = [ranks[first + stride * i] for i in range(n)]
        try:
            placed = place(
                view, summary.calibration, n, accelerators=members, technology=view.scale_up_technology, uneven=True
            )
        except UsageError as exc:
            refused[key] = f"a {n}-rank group (ranks {first}, {first + stride}, …): {exc}"
            continue
        a = members[0]
        tier = max(view.tier(a, b) for b in members)
        others = [b for b in members if b != a]
        hops = view.path([a] * len(others), others).hops if others else 0
        summary.shapes[key] = GroupShape(placed, tier, hops, send=key in sends)
    return refused
