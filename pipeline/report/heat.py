"""Link-load heat maps (issue 12): what a workload puts on each physical link, drawn on the topology drawing.

The numbers are the traffic stage's `traffic_links` rows (one per physical link and phase). A link's colour is
its utilisation (offered load ÷ capacity, in the busier direction: a fraction of the per-direction capacity),
the highest over the workload's phases. A reference is drawn link by link on the same layout as its parts
drawing; a cluster (tens of thousands of links) is drawn as a grid of link tiers × pods, each cell coloured by
the busiest link of that tier in that pod. Hotter links are drawn last, so none hides under a cooler one.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.collections import LineCollection, PatchCollection
from matplotlib.colors import Normalize, to_hex
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from . import LAYOUT_CAVEAT
from .cells import Cell
from .drawings import KIND_STYLE, OUTLINE_ONLY, _axis_off, _styled, part_layout

CMAP = colormaps["YlOrRd"]
UNLOADED = "#d9d9d9"  # a drawn link that this workload does not use
COLORBAR_LABEL = "link utilisation (fraction of capacity per direction)"
SCOPE = "utilisation = offered load ÷ capacity, per direction: the busier direction, in the workload's busiest phase"
# The collections whose members follow the data, in drawing order (coolest first): tests read them by id.
LINKS_GID = "link-load"
CELLS_GID = "tier-pod-load"
# Link tiers bottom-up, as the traffic stage names them (traffic_links.tier: ASCII identifiers); an unknown tier
# goes on top. Drawn with their display names (typography is for reading).
TIER_ORDER = (
    "accelerator-accelerator (direct)",
    "accelerator-scale-up switch",
    "accelerator-NIC (host)",
    "NIC-leaf",
    "leaf-spine",
    "spine-core",
)
TIER_LABELS = {
    "accelerator-accelerator (direct)": "accelerator–accelerator (direct)",
    "accelerator-scale-up switch": "accelerator–scale-up switch",
    "accelerator-NIC (host)": "accelerator–NIC (host)",
    "NIC-leaf": "NIC–leaf",
    "leaf-spine": "leaf–spine",
    "spine-core": "spine–core",
}
MAX_PODS = 32  # columns drawn; more pods are summarised in one last column


def scale_max(utilisations: Sequence[float]) -> float:
    """Top of the colour scale: full capacity (1.0), or the highest utilisation when a link is oversubscribed."""
    return max([1.0, *utilisations])


def colour(utilisation: float, vmax: float) -> str:
    """The colour a utilisation is drawn in, as '#rrggbb' (what the SVG carries)."""
    return to_hex(CMAP(Normalize(0.0, vmax)(utilisation)))


def colours(utilisations: Sequence[float], vmax: float) -> list[str]:
    """`colour` of each, in one colour-map lookup: the same arithmetic element by element, so the same colours,
    without a normaliser and a map call per link (a rack's hundreds of links took a tenth of its heat map)."""
    if not utilisations:
        return []
    return [to_hex(rgba) for rgba in CMAP(_shade(utilisations, vmax))]


def _shade(utilisations: Sequence[float], vmax: float) -> Any:
    """Each utilisation's place on the colour scale, 0 to 1 (above 1: beyond the top colour)."""
    return Normalize(0.0, vmax)(np.asarray(utilisations, dtype=float))


def _figure(width: float, height: float, left: float) -> tuple[Figure, Any]:
    """A figure laid out by hand in inches (no tight bounding box: that draws every figure twice): the drawing
    from `left` to 1.6 in short of the right edge, a colour bar in that margin, a caption line at the bottom."""
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((left / width, 0.6 / height, (width - left - 1.6) / width, (height - 1.05) / height))
    _axis_off(ax)
    return fig, ax


def _colorbar(fig: Figure, vmax: float) -> None:
    width, height = fig.get_size_inches()
    cax = fig.add_axes(((width - 1.35) / width, 0.6 / height, 0.12 / width, (height - 1.05) / height))
    bar = fig.colorbar(ScalarMappable(Normalize(0.0, vmax), CMAP), cax=cax)
    bar.set_label(COLORBAR_LABEL, fontsize=7)
    bar.ax.tick_params(labelsize=7)


def _svg(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "fabricref"})
    return buf.getvalue()


@_styled
def draw_link_load(
    title: str,
    nodes: list[dict[str, Any]],
    edges: list[dict[str, Any]],
    load: dict[tuple[str, str], float],
) -> bytes:
    """A reference's parts (as in its parts drawing, without labels) with every link coloured by `load`
    ((source, target) sorted → utilisation); links the workload leaves idle are drawn thin and grey."""
    pos, boxes, width = part_layout(nodes)
    height = len(boxes)
    fig, ax = _figure(min(3 + width * 0.55, 16) + 1.6, max(3.2, 1.4 + 0.55 * height), 0.2)
    ax.add_collection(
        PatchCollection(
            [Rectangle((-0.6, y - 0.32), w + 0.2, 0.64, facecolor=OUTLINE_ONLY) for _, y, w in boxes],
            facecolors="#f7f7f7",
            edgecolors="#999999",
            linewidths=0.6,
            zorder=0,
        )
    )
    parts = sorted(pos.items(), key=lambda kv: kv[0])
    ax.add_collection(
        PatchCollection(
            [Rectangle((x - 0.4, y - 0.22), 0.8, 0.44, facecolor=OUTLINE_ONLY) for _, (x, y, _) in parts],
            facecolors=[KIND_STYLE[kind][0] for _, (_, _, kind) in parts],
            edgecolors="black",
            linewidths=0.4,
            alpha=0.35,
            zorder=2,
        )
    )
    idle, hot = [], []
    for e in edges:
        a, b = pos.get(e["source"]), pos.get(e["target"])
        if a is None or b is None:
            continue
        key = (min(e["source"], e["target"]), max(e["source"], e["target"]))
        seg = [(a[0], a[1]), (b[0], b[1])]
        if a[1] == b[1]:  # both ends in one row: bowed above it, or every such link would lie on the others
            seg.insert(1, ((a[0] + b[0]) / 2, a[1] + 0.12 + 0.04 * abs(a[0] - b[0])))
        if key in load:
            hot.append((load[key], key, seg))
        else:
            idle.append(seg)
    hot.sort(key=lambda h: (h[0], h[1]))
    vmax = scale_max([u for u, _, _ in hot])
    ax.add_collection(LineCollection(idle, colors=UNLOADED, linewidths=0.5, zorder=1))
    links = LineCollection(
        [seg for _, _, seg in hot], colors=colours([u for u, _, _ in hot], vmax), linewidths=1.6, zorder=3
    )
    links.set_gid(LINKS_GID)
    ax.add_collection(links)
    drawn = {k for _, k, _ in hot}
    missing = len(set(load) - drawn)
    ax.set_xlim(-1.0, width + 0.5)
    ax.set_ylim(-height + 0.3, 0.7)
    ax.set_title(f"{title} — link load", fontsize=10, loc="left")
    _colorbar(fig, vmax)
    note = f"{SCOPE}.\n{len(hot)} loaded link(s) drawn, {len(idle)} idle (grey)"
    if missing:
        note += f"; {missing} loaded link(s) outside the parts drawing (e.g. to switches outside the system)"
    fig.text(0.01, 0.05 / fig.get_size_inches()[1], f"{note}.\n{LAYOUT_CAVEAT}", fontsize=6.5, color="#555555")
    return _svg(fig)


def _tier_rank(tier: str) -> int:
    return TIER_ORDER.index(tier) if tier in TIER_ORDER else len(TIER_ORDER)


@_styled
def draw_tier_pod_load(title: str, cells: list[Cell], pods: int) -> bytes:
    """A cluster's link load aggregated per tier (rows, bottom-up) and pod (columns): a cell's colour is its
    busiest link's utilisation, its text that peak and how many links of the tier in that pod carry load."""
    tiers = sorted({c.tier for c in cells}, key=lambda t: (_tier_rank(t), t))
    columns = min(pods, MAX_PODS)
    merged: dict[tuple[str, int], Cell] = {}
    for c in cells:  # pods beyond the drawn columns fold into the last column (labelled as such)
        col = min(c.pod if c.pod is not None else 0, columns - 1)
        old = merged.get((c.tier, col))
        merged[(c.tier, col)] = Cell(
            c.tier, col, max(c.peak, old.peak) if old else c.peak, c.links + (old.links if old else 0)
        )
    vmax = scale_max([c.peak for c in cells])
    fig, ax = _figure(min(4.0 + 1.1 * columns, 18), max(3.2, 1.6 + 0.6 * len(tiers)), 2.2)
    ordered = sorted(merged.values(), key=lambda c: (c.peak, _tier_rank(c.tier), c.tier, c.pod))
    patches = []
    shades = _shade([c.peak for c in ordered], vmax)
    for c, shade in zip(ordered, shades, strict=True):
        y = tiers.index(c.tier)
        patches.append(Rectangle((c.pod - 0.45, y - 0.4), 0.9, 0.8, facecolor=OUTLINE_ONLY))
        ink = "white" if shade > 0.6 else "black"
        ax.text(c.pod, y, f"{c.peak:.2f}\n{c.links:,} links", ha="center", va="center", fontsize=6.5, color=ink)
    empty = [
        Rectangle((p - 0.45, y - 0.4), 0.9, 0.8, facecolor=OUTLINE_ONLY)
        for y, t in enumerate(tiers)
        for p in range(columns)
        if (t, p) not in merged
    ]
    ax.add_collection(PatchCollection(empty, facecolors=UNLOADED, edgecolors="white", zorder=0))
    grid = PatchCollection(patches, facecolors=colours([c.peak for c in ordered], vmax), edgecolors="white", zorder=1)
    grid.set_gid(CELLS_GID)
    ax.add_collection(grid)
    for y, t in enumerate(tiers):  # plain text, not axis ticks (tick layout is most of a small figure's cost)
        ax.text(-0.55, y, TIER_LABELS.get(t, t), ha="right", va="center", fontsize=7)
    labels = [f"pod {p}" for p in range(columns)]
    if pods > columns:
        labels[-1] = f"pods {columns - 1}–{pods - 1}"
    for p, label in enumerate(labels):
        ax.text(p, -0.5, label, ha="center", va="top", fontsize=7)
    ax.set_xlim(-0.6, columns - 0.4)
    ax.set_ylim(-0.8, len(tiers) - 0.4)
    ax.set_title(f"{title} — link load per tier and pod", fontsize=10, loc="left")
    _colorbar(fig, vmax)
    fig.text(
        0.01,
        0.05 / fig.get_size_inches()[1],
        f"{SCOPE}.\nCell: the busiest link of that tier in that pod, and how many links there carry load; "
        "grey: no load. Links above the pods (spine–core) are placed in their spine's pod.",
        fontsize=6.5,
        color="#555555",
    )
    return _svg(fig)
