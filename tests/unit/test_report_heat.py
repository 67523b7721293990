"""Link-load heat maps (issue 12): one per topology × workload with traffic, colours following the utilisation."""

from __future__ import annotations

import re

from fabricref.report import heat


def _members(svg: str, gid: str, paint: str) -> list[str]:
    """The `paint` colours (stroke / fill) of the paths inside the SVG group `gid`, in drawing order."""
    start = svg.index(f'<g id="{gid}">')
    body = svg[start : svg.index("</g>", start)]
    return re.findall(rf"{paint}: (#[0-9a-f]{{6}})", body)


def _part(node: str, kind: str, within: str) -> dict[str, object]:
    return {"node": node, "kind": kind, "within": within, "label": node, "role": None}


def test_link_by_link_hottest_link_in_the_top_colour_idle_links_grey():
    nodes = [{"node": "tray", "kind": "tray", "within": None, "label": "tray", "role": None}]
    nodes += [_part(f"gpu{i}", "accelerator", "tray") for i in range(3)] + [_part("sw", "scale_up_switch", "tray")]
    edges = [{"source": f"gpu{i}", "target": "sw", "network": "scale_up"} for i in range(3)]
    load = {("gpu0", "sw"): 0.25, ("gpu2", "sw"): 0.75}  # gpu1 idle
    svg = heat.draw_link_load("t", nodes, edges, load).decode()
    # Coolest first; the scale tops at full capacity (1.0) when nothing is oversubscribed.
    assert _members(svg, heat.LINKS_GID, "stroke") == [heat.colour(0.25, 1.0), heat.colour(0.75, 1.0)]
    assert heat.colour(0.75, 1.0) != heat.colour(0.25, 1.0) != heat.UNLOADED
    assert "1 idle (grey)" in svg and "capacity per direction" in svg
    # An oversubscribed link (offered 1.5× capacity) becomes the top of the scale.
    svg = heat.draw_link_load("t", nodes, edges, {**load, ("gpu1", "sw"): 1.5}).decode()
    assert _members(svg, heat.LINKS_GID, "stroke")[-1] == heat.colour(1.0, 1.0) == heat.colour(1.5, 1.5)


def test_tier_pod_grid_cell_colour_is_its_busiest_link():
    cells = [
        heat.Cell("NIC-leaf", 0, 0.4, 16),
        heat.Cell("NIC-leaf", 1, 0.9, 16),
        heat.Cell("leaf-spine", 1, 0.2, 4),
    ]
    svg = heat.draw_tier_pod_load("c", cells, pods=3).decode()
    assert _members(svg, heat.CELLS_GID, "fill") == [heat.colour(u, 1.0) for u in (0.2, 0.4, 0.9)]
    assert "0.90" in svg and "16 links" in svg and "pod 2" in svg  # pod 2 drawn, empty (grey)
