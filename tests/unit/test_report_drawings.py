"""The report's drawings: deterministic, and the shortcuts inside a drawing (hidden axes skipping their tick layout,
boxes added without data limits, colours looked up at once) give exactly what matplotlib gives without them."""

from __future__ import annotations

import matplotlib
import pytest
from fabricref.report import STYLE, drawings, heat
from fabricref.report.cells import Cell


def _part(node: str, kind: str, within: str, role: str | None = None) -> dict[str, object]:
    return {"node": node, "kind": kind, "within": within, "label": node, "role": role}


NODES = [{"node": f"t{t}", "kind": "tray", "within": None, "label": f"tray {t}", "role": None} for t in (1, 2)]
NODES += [_part(f"gpu{t}{i}", "accelerator", f"t{t}") for t in (1, 2) for i in range(4)]
NODES += [_part(f"nic{t}", "nic", f"t{t}", "scale_out") for t in (1, 2)] + [_part("sw", "scale_up_switch", "t1")]
EDGES = [{"source": f"gpu{t}{i}", "target": "sw", "network": "scale_up"} for t in (1, 2) for i in range(4)]
EDGES += [{"source": f"gpu{t}0", "target": f"nic{t}", "network": "host"} for t in (1, 2)]
CELLS = [Cell("NIC-leaf", 0, 0.4, 16), Cell("leaf-spine", 1, 0.9, 4), Cell("spine-core", None, 1.3, 2)]
SUMMARY = {
    "nodes_by_kind": {"core": 16, "spine": 80, "leaf": 80, "frontend_switch": 4},
    "oversubscription": {"leaf": 1, "spine": 2},
    "scale_up_domains": 320,
    "scale_up_domain_size": 8,
    "accelerators": 2560,
    "bisection_bandwidth_gbps": 512000,
}
CALLS = [
    ("reference parts", drawings.draw_reference, ("r", NODES, EDGES)),
    ("link load", heat.draw_link_load, ("l", NODES, EDGES, {("gpu10", "sw"): 0.5, ("gpu20", "nic2"): 1.2})),
    ("tier-pod load", heat.draw_tier_pod_load, ("c", CELLS, 3)),
    ("cluster structure", drawings.draw_cluster, ("c", SUMMARY, 10, 8)),
    ("bar chart", drawings.bar_chart, ("b", ["x", "y"], {"overhead": [1.0, 2.0], "bandwidth": [0.5, 0.25]}, "s")),
]


@pytest.mark.parametrize(("what", "draw", "args"), CALLS, ids=[c[0] for c in CALLS])
def test_the_shortcuts_inside_a_drawing_give_matplotlibs_own_bytes(monkeypatch, what, draw, args):
    fast = draw(*args)
    assert draw(*args) == fast
    # Without the shortcuts: axes merely switched off, boxes added with their data limits.
    monkeypatch.setattr(drawings, "_axis_off", lambda ax: ax.axis("off"))
    monkeypatch.setattr(heat, "_axis_off", lambda ax: ax.axis("off"))
    monkeypatch.setattr(drawings, "_add_box", lambda ax, box: ax.add_patch(box))
    with matplotlib.rc_context(STYLE):
        plain = draw.__wrapped__(*args)
    assert plain == fast, what


def test_colours_in_one_lookup_are_each_utilisations_own_colour():
    # Edges of the scale and of its 256 bins, beyond the top (oversubscribed), and uneven values.
    values = [0.0, 1e-9, 0.5, 1 / 3, 0.999999, 1.0, 1.5, 2.0, 255 / 256, 1 / 256, 0.123456789, 0.87654321]
    for vmax in (1.0, 1.5, 2.0):
        assert heat.colours(values, vmax) == [heat.colour(u, vmax) for u in values]
    assert heat.colours([], 1.0) == []
