"""A workload's load on each drawn link over one step or request, for the explorer and the report: the bytes its
edges carry and the time it is busy at line rate, as a share of the busiest drawn link. Not utilisation: a max-min
fair share saturates every bottleneck by construction, so utilisation says nothing about where the load is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.format import format_percent, format_quantity

LEGEND = {
    "time": "time a link is busy per step or request at its line rate, as a share of the busiest drawn link "
    "(not utilisation: fair sharing saturates every bottleneck by construction)",
    "bytes": "bytes a link carries per step or request (both directions), as a share of the busiest drawn link",
}
# Light yellow to dark red (the explorer's scripts use the same stops).
STOPS = ((255, 237, 160), (254, 178, 76), (240, 59, 32), (128, 0, 38))


def colour(share: float) -> str:
    """The colour of a share from 0 to 1, as 'rgb(r,g,b)'."""
    t = max(0.0, min(1.0, share)) * (len(STOPS) - 1)
    i = min(len(STOPS) - 2, int(t))
    f = t - i
    r, g, b = (round(a + (z - a) * f) for a, z in zip(STOPS[i], STOPS[i + 1], strict=True))
    return f"rgb({r},{g},{b})"


def link_loads(
    rows: Iterable[tuple[str, str, float, float]],
    edge_map: dict[tuple[str, str], tuple[str, bool]],
    drawing: Any,
    heat: str,
    communication_seconds: float | None = None,
) -> list[Any]:
    """The loads of the drawing's links, sorted by id. `rows`: (source, target, bytes forward, bytes reverse) per
    graph edge; `edge_map`: a graph edge (ends sorted) → (its drawn link, whether it runs against it)."""
    from ..formats.drawing import LinkLoad

    totals: dict[str, list[float]] = {}
    for source, target, fwd, rev in rows:
        found = edge_map.get((source, target))
        if found is None:
            continue
        link, against = found
        t = totals.setdefault(link, [0.0, 0.0])
        if against:
            fwd, rev = rev, fwd
        t[0] += fwd
        t[1] += rev
    gbps = {x.id: x.gbps for x in drawing.links}
    comm = communication_seconds or 0.0
    found_rows = []
    for link, (fwd, rev) in totals.items():
        cap = gbps.get(link)
        busy = max(fwd, rev) * 8 / (cap * 1e9) if cap else 0.0
        found_rows.append((link, fwd + rev, busy))
    top = max((r[2] if heat == "time" else r[1] for r in found_rows), default=0.0) or 1.0
    return [
        LinkLoad(
            id=link,
            bytes=nbytes,
            busy_seconds=busy,
            share=min(1.0, (busy if heat == "time" else nbytes) / top),
            shown={
                "bytes": format_quantity(nbytes, "B"),
                "busy": format_quantity(busy, "s"),
                "of_communication": format_percent(busy / comm) if comm > 0 else "—",
            },
        )
        for link, nbytes, busy in sorted(found_rows)
    ]
