"""Topology drawings with matplotlib: a reference drawn as its parts, a cluster drawn by its structure.

SVG output is deterministic (fixed hash salt, no date metadata, text kept as text), so DVC's lock holds.
"""

from __future__ import annotations

import functools
import io
from collections import defaultdict
from collections.abc import Callable
from typing import Any, ParamSpec

import matplotlib
import matplotlib.text
from matplotlib.collections import LineCollection, PatchCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch, Rectangle
from matplotlib.ticker import FuncFormatter, NullFormatter

from . import LAYOUT_CAVEAT, STYLE

# STYLE is applied only while a drawing is made (rc_context), never at import: importing this module changes no
# global matplotlib state (no backend switch, no rcParams), so a notebook or another library keeps its own settings.
# Figures are plain `Figure` objects (no pyplot, no backend, nothing to close).

P = ParamSpec("P")


def _styled(draw: Callable[P, bytes]) -> Callable[P, bytes]:
    @functools.wraps(draw)
    def inside_style(*args: P.args, **kwargs: P.kwargs) -> bytes:
        with matplotlib.rc_context(STYLE):
            return draw(*args, **kwargs)

    return inside_style


def _figure(figsize: tuple[float, float]) -> tuple[Figure, Any]:
    fig = Figure(figsize=figsize)
    return fig, fig.subplots()


def _axis_off(ax: Any) -> None:
    """No axis lines, ticks or labels. The axes are hidden too, not only switched off: a titled axes still lays
    out its y axis's ticks at every draw to place the title clear of an offset label ("1e6") that an axis which is
    off never shows (a third of a heat map's drawing time); a hidden axis is skipped there, the bytes are the same."""
    ax.axis("off")
    ax.xaxis.set_visible(False)
    ax.yaxis.set_visible(False)


# A patch that only gives its outline to a PatchCollection (which paints it with its own colours) is made with
# this face colour: matplotlib's default one ("C0", the colour cycle's first) is looked up in the cycle anew for
# every patch (~0.5 ms each, thousands per rack drawing); the collection's SVG is the same.
OUTLINE_ONLY = "none"


KIND_STYLE = {
    "accelerator": ("#76b900", "GPU"),
    "cpu": ("#1f77b4", "CPU"),
    "nic": ("#ff7f0e", "NIC"),
    "scale_up_switch": ("#2ca02c", "SW"),
}
NETWORK_STYLE = {
    "scale_up": {"color": "#2ca02c", "lw": 1.2, "ls": "-", "label": "scale-up (NVLink / Infinity Fabric / UALoE)"},
    "host": {"color": "#7f7f7f", "lw": 0.6, "ls": "--", "label": "host (PCIe / chip-to-chip)"},
    "scale_out": {"color": "#d62728", "lw": 1.2, "ls": "-", "label": "scale-out backend fabric"},
    "frontend": {"color": "#9467bd", "lw": 1.0, "ls": ":", "label": "frontend / service network"},
}


def _svg(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "fabricref"}, bbox_inches="tight")
    return buf.getvalue()


def _legend(ax: Any, networks: set[str]) -> None:
    handles = [
        Line2D([0], [0], color=s["color"], lw=s["lw"] * 2, ls=s["ls"], label=s["label"])
        for n, s in NETWORK_STYLE.items()
        if n in networks
    ]
    handles += [Rectangle((0, 0), 1, 1, color=c, label=name) for c, name in KIND_STYLE.values()]
    handles.append(Rectangle((0, 0), 1, 1, color="#9467bd", label="fNIC (frontend NIC)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=7)


def _natural(name: str) -> list[Any]:
    """'ct10' after 'ct9': numbers compared as numbers."""
    import re

    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name)]


def part_layout(
    nodes: list[dict[str, Any]],
) -> tuple[dict[str, tuple[float, float, str]], list[tuple[dict[str, Any], float, int]], int]:
    """Where a reference's parts sit: trays as rows (natural order), parts left to right by kind then name.

    Returns part → (x, y, kind), one (tray, y, number of parts) per row, and the widest row's part count;
    the parts drawing and the link-load heat map share it, so a link sits in the same place in both."""
    trays = [n for n in nodes if n["kind"] == "tray"]
    parts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for n in nodes:
        if n["kind"] in KIND_STYLE:
            parts[n["within"]].append(n)
    order = {"accelerator": 1, "scale_up_switch": 2, "cpu": 3, "nic": 4}
    rows = sorted((t for t in trays if parts.get(t["node"])), key=lambda t: _natural(t["node"]))
    pos: dict[str, tuple[float, float, str]] = {}
    boxes = []
    for r, tray in enumerate(rows):
        members = sorted(parts[tray["node"]], key=lambda n: (order[n["kind"]], _natural(n["node"])))
        boxes.append((tray, float(-r), len(members)))
        for i, n in enumerate(members):
            pos[n["node"]] = (float(i), float(-r), n["kind"])
    width = max((w for _, _, w in boxes), default=1)
    return pos, boxes, width


# Up to this many parts each carries its short name (GPU, NIC, ...); a rack-scale system's hundreds of parts are
# told apart by colour and the legend (hundreds of 5.5 pt labels were most of the report's drawing time).
LABELLED_PARTS = 120


@_styled
def draw_reference(title: str, nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> bytes:
    """Trays as rows of their parts; links styled by network; NIC stubs point at the networks they join.
    Boxes, parts and links are one collection each (not one artist per part)."""
    pos, boxes, width = part_layout(nodes)
    height = len(boxes)
    by_node = {n["node"]: n for n in nodes}
    fig, ax = _figure(figsize=(min(3 + width * 0.55, 16), 1.2 + 0.55 * height))
    ax.add_collection(
        PatchCollection(
            [
                FancyBboxPatch((-0.6, y - 0.32), w + 0.2, 0.64, boxstyle="round,pad=0.02", facecolor=OUTLINE_ONLY)
                for _, y, w in boxes
            ],
            facecolors="#f7f7f7",
            edgecolors="#999999",
            linewidths=0.6,
        )
    )
    for tray, y, _ in boxes:
        ax.text(-0.75, y, tray["label"] or tray["node"], ha="right", va="center", fontsize=7)
    patches, colours = [], []
    for name, (x, y, kind) in pos.items():
        color, short = KIND_STYLE[kind]
        if kind == "nic" and by_node[name].get("role") == "frontend":
            color, short = "#9467bd", "fNIC"
        patches.append(Rectangle((x - 0.4, y - 0.22), 0.8, 0.44, facecolor=OUTLINE_ONLY))
        colours.append(color)
        if len(pos) <= LABELLED_PARTS:
            ax.text(x, y, short, ha="center", va="center", fontsize=5.5, color="white")
    ax.add_collection(PatchCollection(patches, facecolors=colours, edgecolors="black", linewidths=0.4, zorder=2))
    segments: dict[str, list[list[tuple[float, float]]]] = defaultdict(list)
    for e in edges:
        a, b = pos.get(e["source"]), pos.get(e["target"])
        if a is not None and b is not None:
            segments[e["network"]].append([a[:2], b[:2]])
    networks = set(segments)
    for network, segs in sorted(segments.items()):
        s = NETWORK_STYLE[network]
        alpha = 0.35 if network == "scale_up" and len(segs) > 200 else 0.8
        ax.add_collection(
            LineCollection(segs, colors=s["color"], linewidths=s["lw"], linestyles=s["ls"], alpha=alpha, zorder=0)
        )
    networks |= {"scale_out", "frontend"}
    ax.set_title(f"{title} — parts and links", fontsize=10, loc="left")
    ax.set_xlim(-4.5, width + 0.5)
    ax.set_ylim(-height + 0.3, 0.7)
    _axis_off(ax)
    _legend(ax, networks)
    fig.text(
        0.01,
        0.0,
        LAYOUT_CAVEAT + " NICs attach to the scale-out (backend) and frontend networks outside the system.",
        fontsize=6.5,
        color="#555555",
    )
    return _svg(fig)


def _add_box(ax: Any, box: FancyBboxPatch) -> None:
    """A patch added as add_patch does (clipped to the axes) but without updating the data limits: the cluster
    drawing sets its limits itself, and measuring each rounded box's Bézier outline for them was a sixth of it."""
    ax.add_artist(box)


@_styled
def draw_cluster(title: str, summary: dict[str, Any], pods: int, rails: int) -> bytes:
    """Tiers as rows of grouped boxes (never one dot per part), oversubscription labelled between tiers."""
    kinds = summary["nodes_by_kind"]
    over = summary.get("oversubscription", {})
    domains, size = summary["scale_up_domains"], summary["scale_up_domain_size"]
    fig, ax = _figure(figsize=(11, 5.2))
    shown = min(pods, 8)
    tiers = [("core", kinds.get("core", 0), 3), ("spine", kinds.get("spine", 0), 2), ("leaf", kinds.get("leaf", 0), 1)]
    colors = {"core": "#d62728", "spine": "#e377c2", "leaf": "#ff9896", "blocks": "#76b900"}
    for name, count, y in tiers:
        if not count:
            continue
        if name == "core":
            _add_box(
                ax,
                FancyBboxPatch(
                    (0, y - 0.25), shown * 1.2 - 0.2, 0.5, boxstyle="round,pad=0.02", fc=colors[name], alpha=0.8
                ),
            )
            ax.text(shown * 0.6 - 0.1, y, f"core: {count} switches", ha="center", va="center", color="white")
            continue
        for p in range(shown):
            _add_box(
                ax,
                FancyBboxPatch((p * 1.2, y - 0.25), 1.0, 0.5, boxstyle="round,pad=0.02", fc=colors[name], alpha=0.85),
            )
            ax.text(p * 1.2 + 0.5, y, f"{count // pods} {name}s", ha="center", va="center", fontsize=7)
    per_pod_domains = domains // pods
    for p in range(shown):
        _add_box(
            ax, FancyBboxPatch((p * 1.2, -0.35), 1.0, 0.7, boxstyle="round,pad=0.02", fc=colors["blocks"], alpha=0.85)
        )
        ax.text(
            p * 1.2 + 0.5,
            0,
            f"pod {p}\n{per_pod_domains} domains\n× {size} GPUs",
            ha="center",
            va="center",
            fontsize=6.5,
        )
        for y0, y1 in ((0.35, 0.75), (1.25, 1.75), (2.25, 2.75)):
            if y1 > 2 and not kinds.get("core") and y0 > 2:
                continue
            ax.plot([p * 1.2 + 0.5] * 2, [y0, y1], color="#d62728", lw=1.5)
    if pods > shown:
        ax.text(shown * 1.2 + 0.1, 0, f"… {pods - shown} more pods", va="center", fontsize=8)
    right = shown * 1.2 + 0.6
    ax.text(right, 1.5, f"leaf → spine  {over.get('leaf', 1):g}:1", fontsize=8, va="center")
    if kinds.get("core"):
        ax.text(right, 2.5, f"spine → core  {over.get('spine', 1):g}:1", fontsize=8, va="center")
    ax.text(
        right,
        0.5,
        f"{rails} rail(s) per building block; {summary['accelerators']:,} GPUs;\n"
        f"bisection {summary['bisection_bandwidth_gbps'] / 1000:,.1f} Tb/s per direction",
        fontsize=8,
        va="center",
    )
    fe = kinds.get("frontend_switch", 0)
    _add_box(ax, FancyBboxPatch((right, -0.9), 3.2, 0.5, boxstyle="round,pad=0.02", fc="#9467bd", alpha=0.6))
    ax.text(
        right + 1.6,
        -0.65,
        f"frontend / service network: {fe} switches (separate)",
        ha="center",
        va="center",
        fontsize=7,
    )
    ax.set_xlim(-0.2, right + 3.6)
    ax.set_ylim(-1.1, 3.5)
    _axis_off(ax)
    ax.set_title(f"{title} — structure by tier", loc="left", fontsize=10)
    fig.text(0.01, 0.01, LAYOUT_CAVEAT, fontsize=6.5, color="#555555")
    return _svg(fig)


@_styled
def bar_chart(title: str, labels: list[str], series: dict[str, list[float]], xlabel: str) -> bytes:
    """Horizontal stacked bars (e.g. overhead / bandwidth / queueing seconds per workload)."""
    fig, ax = _figure(figsize=(9, 0.35 * len(labels) + 1.2))
    left = [0.0] * len(labels)
    palette = ["#1f77b4", "#2ca02c", "#d62728", "#ff7f0e", "#9467bd"]
    for (name, values), color in zip(series.items(), palette, strict=False):
        ax.barh(labels, values, left=left, label=name, color=color)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_xlabel(xlabel)
    ax.set_title(title, loc="left", fontsize=10)
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=7)
    return _svg(fig)


@_styled
def line_chart(title: str, x: list[float], series: dict[str, list[float]], xlabel: str, ylabel: str) -> bytes:
    fig, ax = _figure(figsize=(7, 3.5))
    for name, ys in series.items():
        ax.plot(x, ys, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    # Plain tick labels ("1024", "0.001"): the default log labels are mathtext, whose parser costs about a second
    # of the report stage to set up for this one chart.
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left", fontsize=10)
    ax.legend(fontsize=7)
    return _svg(fig)
