"""The plots (views/charts.py): the same bytes every time, drawn under STYLE however matplotlib was set before, and
each busbw panel with the model's choices and the measured points it was given."""

from __future__ import annotations

import matplotlib
import pytest
from fabricref.views.charts import busbw_chart, line_chart

ROWS = [
    {"bytes": 2**k, "model_busbw_gb_per_s": k, "measured_busbw_gb_per_s": k + 1, "algorithm": a, "protocol": "LL"}
    for k, a in ((20, "ring"), (10, "tree"), (30, "ring"))
]
CALLS = [
    ("line chart", line_chart, ("l", [1024.0, 2048.0], {"a": [0.1, 0.2]}, "tokens", "s")),
    ("busbw chart", busbw_chart, ("b", [("one", ROWS), ("two", ROWS[:1])])),
]


@pytest.mark.parametrize(("what", "draw", "args"), CALLS, ids=[c[0] for c in CALLS])
def test_a_plot_is_the_same_bytes_every_time_whatever_the_global_settings(what, draw, args):
    first = draw(*args)
    assert draw(*args) == first, what
    with matplotlib.rc_context({"font.size": 20, "svg.hashsalt": "other", "text.parse_math": True}):
        assert draw(*args) == first, what


def test_each_busbw_panel_shows_its_title_the_choices_and_the_measured_points():
    svg = busbw_chart("all-reduce on t", [("first log", ROWS), ("second log", ROWS[:1])]).decode()
    assert svg.count("model: ring / LL") == 2 and svg.count("model: tree / LL") == 1
    assert "first log" in svg and "second log" in svg and svg.count(">measured</text>") == 2
    assert "4 KiB" in svg and "1 GiB" in svg  # plain size labels on the log2 axis
    sweep = busbw_chart("sweep", [("", [{**r, "busbw_gb_per_s": 1.0} for r in ROWS])], "busbw_gb_per_s", None)
    assert "measured" not in sweep.decode()
