"""The winners routed over the installed wiring, per physical link, as `fabricref estimate workload` routes a
workload: every group of every backend phase placed and routed at once (shortest paths, ECMP, max-min fair
shares, queueing where a link is over capacity), timed the way the collective library runs it.

Only the top K get this (it takes seconds on a big cluster, where the analytical per-tier cost takes
microseconds); every other row keeps the analytical cost and says so in its `costing` column. A phase the traffic
library does not know yet (the CP ring's K/V exchange) keeps its analytical cost in a routed layout too, and a
layout the router refuses keeps its analytical evaluation with the reason.
"""

from __future__ import annotations

from typing import Any

from ..errors import FabricrefError
from ..estimate.cost import phases as cost_phases
from ..estimate.view import View
from .evaluate import ANALYTICAL, ROUTED, Evaluation, TrainEvaluator
from .space import Layout


def route(view: View, ev: TrainEvaluator, layout: Layout) -> tuple[Evaluation, str]:
    """The layout evaluated on routed phases, and a note ("" when every phase was routed as it is)."""
    w = ev.workload(layout)
    analytical, largest = ev.phases(layout, w)
    notes = []
    try:
        routed = cost_phases(view, w, view.calibration)[0]
    except FabricrefError as exc:
        e = ev.finish(layout, w, analytical, largest, ANALYTICAL, detail=True)
        return e, f"not routed: {exc}"
    names = {p.phase for p in routed}
    rest = [p for p in analytical if p.phase not in names]
    if rest:
        notes.append(f"{', '.join(p.phase for p in rest)}: analytical per-tier cost (the router has no such phase)")
    return ev.finish(layout, w, [*routed, *rest], largest, ROUTED, detail=True), "; ".join(notes)


def hot_links(e: Evaluation, top: int = 5) -> list[dict[str, Any]]:
    """The busiest physical links over every routed phase of a layout (utilisation, then name: deterministic)."""
    links = [{**link, "phase": p["phase"]} for p in e.phases for link in p.get("hot_links", [])]
    links.sort(key=lambda x: (-x["utilization"], x["source"], x["target"], x["phase"]))
    return links[:top]


def hot_links_of(phases: list[Any], top: int = 5) -> str:
    """The busiest links over routed phases, as the table's JSON text."""
    import json

    links = [{**link, "phase": p.phase} for p in phases for link in p.hot_links]
    links.sort(key=lambda x: (-x["utilization"], x["source"], x["target"], x["phase"]))
    return json.dumps(links[:top], sort_keys=True)
