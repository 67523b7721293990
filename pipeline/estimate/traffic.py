"""A workload laid onto an installed topology: its phases, failure scenarios, step estimate and sharing (the one
entry to the traffic library for the traffic stage, the API, the CLI and the explorer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property, partial
from typing import Any

from ..core import confidence
from ..core.facts import Facts, load_facts
from ..core.graphs import Topologies
from ..core.paths import Layout
from ..errors import UsageError
from . import ha, loads
from . import step as step_model
from .calibration import load_calibration
from .choices import StepChoices, load_step_choices
from .cost import Phase, phases
from .decompose import BACKWARD, decompose
from .loads import RoutedPhase
from .placement import rank_accelerators
from .summaries import revealing, sizing_summary
from .view import View, view_for
from .workloads import Workload


@dataclass(kw_only=True)
class Result:
    topology_id: str
    workload: Workload
    phases: list[Phase]
    revealing: dict[str, Any]
    sizing: dict[str, Any]
    failures: list[dict[str, Any]]
    routed: dict[str, RoutedPhase]  # each backend phase's flows over the wiring, by phase name

    @property
    def communication_seconds(self) -> float | None:
        """The sum over the phases; None when a phase's time is unknown (a partial sum is not a total)."""
        times = [p.total_seconds for p in self.phases]
        return None if None in times else sum(t for t in times if t is not None)

    @property
    def known_communication_seconds(self) -> float:
        """The sum over the phases whose time is known (what another workload sees of this one's traffic)."""
        return sum(t for t in (p.total_seconds for p in self.phases) if t is not None)

    @property
    def confidence(self) -> str:
        return confidence.weakest(p.confidence for p in self.phases)


def estimate(lay: Layout, topology_id: str, workload: Workload, offset: int = 0, view: View | None = None) -> Result:
    """Choosing a workload lays traffic onto the installed wiring; the wiring itself is not changed."""
    view = view or view_for(lay, topology_id)
    result_phases, routed = phases(view, workload, view.calibration or load_calibration(lay.root), offset)
    failures: list[dict[str, Any]] = []
    # The failure scenarios follow the data-parallel group (the traffic that crosses the fabric).
    dp = next((c for c in decompose(workload).communications if c.overlaps == BACKWARD), None)
    if view.summary["nodes_by_kind"].get("leaf") and dp is not None:
        accs = rank_accelerators(view.g, workload, offset, view.order)
        peers = [accs[r] for r in dp.group]
        far = max(peers[1:], key=lambda b: view.tier(peers[0], b), default=None)
        if far is not None:
            failures = ha.scenarios(view, peers[0], far)
    return Result(
        topology_id=topology_id,
        workload=workload,
        phases=result_phases,
        revealing=revealing(view, workload, offset),
        sizing=sizing_summary(workload),
        failures=failures,
        routed=routed,
    )


def step_estimate(
    lay: Layout, topology_id: str, workload: Workload, mfu: float | None = None, view: View | None = None
) -> dict[str, Any]:
    """Memory fit and step time of a workload on a topology (`step_of` its phases)."""
    view = view or view_for(lay, topology_id)
    return step_of(lay, view, workload, estimate(lay, topology_id, workload, 0, view), mfu)


def step_of(
    lay: Layout, view: View, workload: Workload, result: Result, mfu: float | None = None, views: Views | None = None
) -> dict[str, Any]:
    """The step estimate of a workload already laid onto a topology, with params.yaml's `step.memory_headroom` and
    the throughput calibration (`mfu`: a labelled what-if replacing the GEMM rates); `views`: what its run read."""
    return (views or Views(lay)).step(view, workload, result, mfu)


def sharing(
    lay: Layout, topology_id: str, first: Workload, second: Workload, view: View | None = None
) -> tuple[Result, Result, list[tuple]]:
    """Two workloads side by side (the second placed after the first): the queueing each adds to the other's phases,
    on the links both use."""
    view = view or view_for(lay, topology_id)
    both = set(rank_accelerators(view.g, first, order=view.order).values()) & set(
        rank_accelerators(view.g, second, first.accelerators, view.order).values()
    )
    if both:
        raise UsageError(
            f"{first.id} and {second.id} cannot run side by side on {topology_id}: their placements share "
            f"{len(both)} accelerators (e.g. {min(both)}); declare placements that do not overlap"
        )
    a = estimate(lay, topology_id, first, 0, view)
    b = estimate(lay, topology_id, second, first.accelerators, view)
    rows = []
    for me, other in ((a, b), (b, a)):
        step = other.known_communication_seconds or 1.0
        busy = [(r.load, r.count) for r in other.routed.values()]
        for p in me.phases:
            r = me.routed.get(p.phase)
            if r is None:  # client traffic rides the separate frontend network
                share, added = 0.0, 0.0
                why = "the frontend network is separate from the backend fabric: this phase is protected"
            else:
                added, share = loads.added_queueing(view.wiring, r.stages, r.load, busy, step)
                why = (
                    f"no physical link shared with {other.workload.id}: this phase is protected"
                    if share == 0.0
                    else f"shares links with {other.workload.id}, which keeps the busiest shared one busy "
                    f"{share:.0%} of its step: queueing added on those links only (fluid share)"
                )
            row = (topology_id, me.workload.id, other.workload.id, p.phase, p.network, share, added * p.count)
            rows.append((*row, share == 0.0, why))
    return a, b, rows


class Views:
    """Each topology's view built once per process, from the topology stage's tables."""

    def __init__(self, lay: Layout) -> None:
        self.lay = lay
        self._topologies: Topologies | None = None
        self._views: dict[str, View] = {}
        # A reference's facts and accelerator fields, read once (each view and each step estimate on it reads them).
        self.facts: Callable[[str], Facts] = cache(partial(load_facts, lay))
        self.accelerator = cache(lambda reference: step_model.accelerator(self.facts(reference)))

    @cached_property
    def choices(self) -> StepChoices:
        """params.yaml's `step` (read once, and only by the stages that estimate steps)."""
        return load_step_choices(self.lay.root)

    def __call__(self, topology_id: str) -> View:
        if topology_id not in self._views:
            if self._topologies is None:
                self._topologies = Topologies(self.lay)
            self._views[topology_id] = view_for(self.lay, topology_id, self._topologies, self.facts)
        return self._views[topology_id]

    def step(self, view: View, workload: Workload, result: Result, mfu: float | None = None) -> dict[str, Any]:
        """`step_of`, with the accelerator's fields and params.yaml's choices read once per process."""
        acc = self.accelerator(view.reference)
        rates = step_model.rates_for(acc, workload.model.dtype, self.lay.root, mfu)
        return step_model.estimate(workload, result.phases, acc, rates, self.choices.memory_headroom)

    def close(self) -> None:
        if self._topologies is not None:
            self._topologies.close()
