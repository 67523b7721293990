"""The report's plots: deterministic, and the shortcuts inside a plot (hidden axes skipping their tick layout) give
exactly what matplotlib gives without them."""

from __future__ import annotations

import matplotlib
import pytest
from fabricref.report import STYLE, drawings

CALLS = [
    ("line chart", drawings.line_chart, ("l", [1024.0, 2048.0], {"a": [0.1, 0.2]}, "tokens", "s")),
]


@pytest.mark.parametrize(("what", "draw", "args"), CALLS, ids=[c[0] for c in CALLS])
def test_a_plot_is_the_same_bytes_every_time_and_as_matplotlib_draws_it(what, draw, args):
    fast = draw(*args)
    assert draw(*args) == fast
    with matplotlib.rc_context(STYLE):
        plain = draw.__wrapped__(*args)
    assert plain == fast, what
