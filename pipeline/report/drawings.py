"""The report's plots with matplotlib (topologies are drawn by views/): deterministic SVG, so DVC's lock holds."""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from typing import Any, ParamSpec

import matplotlib
import matplotlib.text
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from ..core.format import format_quantity
from . import STYLE

# STYLE only while a drawing is made: importing this changes no global matplotlib state. Plain `Figure`s: no pyplot.

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


def _svg(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "fabricref"}, bbox_inches="tight")
    return buf.getvalue()


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


@_styled
def busbw_chart(log: dict[str, Any]) -> bytes:
    """One measured log: measured busbw (crosses) and the model's (line, a marker per algorithm / protocol)."""
    fig, ax = _figure(figsize=(7, 3.4))
    rows = log["rows"]
    sizes = [r["bytes"] for r in rows]
    ax.plot(sizes, [r["model_busbw_gb_per_s"] for r in rows], color="#1f77b4", label="model")
    for label in sorted({f"{r['algorithm']} / {r['protocol']}" for r in rows}):
        pts = [r for r in rows if f"{r['algorithm']} / {r['protocol']}" == label]
        ax.scatter([r["bytes"] for r in pts], [r["model_busbw_gb_per_s"] for r in pts], s=14, label=f"model: {label}")
    ax.scatter(sizes, [r["measured_busbw_gb_per_s"] for r in rows], marker="x", color="black", label="measured")
    ax.set_xscale("log", base=2)
    # Plain tick labels: the log axis's own are mathtext, which STYLE turns off (text is drawn as written).
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_quantity(v / 2**10, "KiB")))  # 512 B, 4 KiB
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("buffer size S (bytes)")
    ax.set_ylabel("busbw (GB/s, nccl-tests convention)")
    ax.set_title(
        f"{log['op']} on {log['topology_id']}, {log['ranks']} ranks: {log['file_name']} (sha256 {log['sha256'][:12]})",
        fontsize=8,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return _svg(fig)
