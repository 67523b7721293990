"""The Jinja environment of the explorer's and the report's pages: each package's templates, then the shared ones
(views/templates/), autoescaped, every number printed by the one formatter (core/format.py) through these filters:

    {{ x | quantity("B") }}  '1.26 TB'        {{ x | seconds }}  '5.6 µs'      {{ x | count }}  '18,432'
    {{ x | quantity("Gb/s", "per_direction") }}  '400 Gb/s per direction'
    {{ x | ratio }}  '7:1'                    {{ x | share }}  '38%'

`svg` draws a laid-out `Drawing` as the explorer's page does in the browser (same positions, colours, widths).
"""

from __future__ import annotations

import math
from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined, select_autoescape

from ..core.format import MISSING, format_count, format_percent, format_quantity
from . import loads as heat

NETWORK_COLOUR = {"scale_up": "#6a3d9a", "scale_out": "#1f78b4", "frontend": "#33a02c", "host": "#8c8c8c"}
NETWORK_NAME = {"scale_up": "scale-up", "scale_out": "scale-out", "frontend": "frontend", "host": "host (PCIe / C2C)"}
NETWORK_DASH = {"scale_out": "6 2", "frontend": "2 2", "host": "1 2"}
# A drawn kind's fill and its name in the legend (a pod is a box: no legend entry).
KINDS = {
    "accelerator": ("#2e7d32", "accelerator"),
    "cpu": ("#1565c0", "CPU"),
    "nic": ("#ef6c00", "NIC"),
    "scale_up_switch": ("#6a1b9a", "scale-up switch"),
    "leaf": ("#37474f", "leaf switch"),
    "spine": ("#455a64", "spine switch"),
    "core": ("#263238", "core switch"),
    "frontend_switch": ("#558b2f", "frontend switch"),
    "domain": ("#2e7d32", "scale-up domain"),
    "pod": ("#fafafa", None),
}
IDLE = "#cfd8dc"  # a drawn link the workload leaves idle, on a heat map


def environment(package: str, strict: bool = False) -> Environment:
    """`package`'s templates/ and the shared ones. `strict`: an undefined name fails the render (the report)."""
    env = Environment(
        loader=ChoiceLoader([PackageLoader(package, "templates"), PackageLoader("fabricref.views", "templates")]),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined if strict else Environment().undefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(quantity=format_quantity, seconds=seconds, count=count, ratio=ratio, share=format_percent)
    env.globals.update(svg=svg, legend=legend)
    return env


def seconds(value: Any) -> str:
    return format_quantity(value, "s")


def count(value: Any) -> str:
    return MISSING if value is None else format_count(value)


def ratio(value: Any) -> str:
    """An oversubscription factor: '7:1', '1.5:1'."""
    return MISSING if value is None else f"{format_count(value)}:1"


def _link_width(links: int, network: str) -> float:
    if network == "host":
        return 0.8
    return min(5.0, 0.9 + math.log2(1 + links) * 0.6)


def _short_label(n: Any) -> str:
    tail = n.id.split("/")[-1]
    return tail if n.kind in ("accelerator", "scale_up_switch", "cpu") else ""


def svg(drawing: Any, loads: list[Any] | None = None) -> dict[str, Any]:
    """What `drawing.svg.j2` draws: boxes, links (coloured by network, or by `loads`' share on a heat map) and
    parts, with the attributes the explorer's script computes."""
    nodes = {n.id: n for n in drawing.nodes}
    by_link = {x.id: x for x in loads} if loads is not None else None
    boxes = []
    for n in drawing.nodes:
        if (n.row < 0 or n.kind == "pod") and n.w > 0:
            label = n.label if len(n.label) * 5.6 < n.w - 8 else n.id.split("/")[-1]
            fill = "#fbfbfb" if n.kind == "system" else "#f3f6fa"
            boxes.append({"n": n, "label": label, "fill": fill})
    links = []
    for x in drawing.links:
        a, b = nodes.get(x.source), nodes.get(x.target)
        if a is None or b is None:
            continue
        top, bottom = (a, b) if a.y <= b.y else (b, a)
        same_row = abs(top.y - bottom.y) < 1
        width = _link_width(x.links, x.network)
        line = {
            "l": x,
            "x1": top.x + top.w / 2,
            "y1": top.y + top.h / 2 if same_row else top.y + top.h,
            "x2": bottom.x + bottom.w / 2,
            "y2": bottom.y + bottom.h / 2 if same_row else bottom.y,
            "dash": NETWORK_DASH.get(x.network),
            "width": width,
            "colour": NETWORK_COLOUR.get(x.network, "#607d8b"),
            "opacity": 0.55 if x.network == "host" else 0.75,
            "load": None,
        }
        if by_link is not None:
            load = by_link.get(x.id)
            if load is None:
                line.update(colour=IDLE, opacity=0.5, width=min(1.0, width))
            else:
                line.update(colour=heat.colour(load.share), opacity=0.95, dash=None, load=load)
        links.append(line)
    if by_link is not None:  # hotter links last, so none hides under a cooler one
        links.sort(key=lambda line: line["load"].share if line["load"] is not None else -1.0)
    parts = []
    for n in drawing.nodes:
        if n.row >= 0 and n.kind != "pod":
            fill = KINDS.get(n.kind, ("#607d8b",))[0]
            parts.append(
                {
                    "n": n,
                    "fill": "#ffffff" if n.aggregate else fill,
                    "stroke": fill if n.aggregate else "#ffffff",
                    "stroke_width": 1.6 if n.aggregate else 0.8,
                    "rx": 6 if n.aggregate else 3,
                    "short": "" if n.aggregate else _short_label(n),
                }
            )
    return {"d": drawing, "boxes": boxes, "links": links, "parts": parts}


def _plural(name: str, count: int) -> str:
    """`name` as `count` of them: a switch, 2 switches; a NIC, 2 NICs."""
    return name if count == 1 else name + ("es" if name.endswith(("ch", "sh", "s", "x")) else "s")


def legend(drawing: Any, heat_basis: str | None = None) -> dict[str, Any]:
    """The networks and kinds a drawing shows, its counts line and, on a heat map, what the colour encodes."""
    present = {x.network for x in drawing.links}
    kinds = {n.kind for n in drawing.nodes if n.row >= 0 and not n.aggregate}
    shown = ("accelerator", "scale_up_switch", "nic", "cpu", "leaf", "spine", "core")
    counts = " · ".join(
        f"{format_count(v)} {_plural(KINDS.get(k, (None, None))[1] or k, v)}"
        for k, v in drawing.counts.items()
        if k in shown
    )
    return {
        "networks": [(NETWORK_COLOUR[n], NETWORK_NAME[n], NETWORK_DASH.get(n)) for n in NETWORK_COLOUR if n in present],
        "kinds": [(fill, name) for k, (fill, name) in KINDS.items() if name and k in kinds],
        "counts": counts,
        "heat": heat.LEGEND.get(heat_basis) if heat_basis else None,
    }
