"""Plots with matplotlib (topologies are drawn by drawing.py): deterministic SVG, so DVC's lock holds. The report and
the CLI's `--plot` draw with these, so a busbw curve looks the same wherever it is drawn."""

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

# Applied only while a plot is made (rc_context), never at import: deterministic SVG (fixed hash salt, no date),
# text kept as text. `text.parse_math` off: every title, label and legend is data (a cluster title, a log's file
# name) drawn as it is written; a `$` in one must not reach mathtext's parser, where it fails or renders a formula.
STYLE = {
    "svg.hashsalt": "fabricref",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "text.parse_math": False,
}

P = ParamSpec("P")


def _styled(draw: Callable[P, bytes]) -> Callable[P, bytes]:
    @functools.wraps(draw)
    def inside_style(*args: P.args, **kwargs: P.kwargs) -> bytes:
        with matplotlib.rc_context(STYLE):
            return draw(*args, **kwargs)

    return inside_style


def _svg(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "fabricref"}, bbox_inches="tight")
    return buf.getvalue()


def _plain_log2_x(ax: Any, label: Callable[[float], str]) -> None:
    """A log2 x axis with plain tick labels: the default log labels are mathtext, which STYLE turns off."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: label(v)))
    ax.xaxis.set_minor_formatter(NullFormatter())


@_styled
def line_chart(title: str, x: list[float], series: dict[str, list[float]], xlabel: str, ylabel: str) -> bytes:
    """Lines on log2 × log10 axes (e.g. KV-transfer seconds against prompt tokens), plain tick labels."""
    fig = Figure(figsize=(7, 3.5))
    ax = fig.subplots()
    for name, ys in series.items():
        ax.plot(x, ys, marker="o", label=name)
    _plain_log2_x(ax, lambda v: f"{v:g}")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left", fontsize=10)
    ax.legend(fontsize=7)
    return _svg(fig)


@_styled
def busbw_chart(
    title: str,
    panels: list[tuple[str, list[dict[str, Any]]]],
    model: str = "model_busbw_gb_per_s",
    measured: str | None = "measured_busbw_gb_per_s",
) -> bytes:
    """busbw against the buffer size, one panel per (subtitle, rows): the model's as a line with a marker per
    algorithm / protocol it chose, measured busbw (column `measured`, when given) as crosses."""
    fig = Figure(figsize=(7, 3.4 * len(panels)))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (subtitle, unsorted) in zip(axes, panels, strict=True):
        rows = sorted(unsorted, key=lambda r: r["bytes"])
        sizes = [r["bytes"] for r in rows]
        ax.plot(sizes, [r[model] for r in rows], color="#1f77b4", label="model")
        for label in sorted({f"{r['algorithm']} / {r['protocol']}" for r in rows}):
            pts = [r for r in rows if f"{r['algorithm']} / {r['protocol']}" == label]
            ax.scatter([r["bytes"] for r in pts], [r[model] for r in pts], s=14, label=f"model: {label}")
        if measured:
            ax.scatter(sizes, [r[measured] for r in rows], marker="x", color="black", label="measured")
        _plain_log2_x(ax, lambda v: format_quantity(v / 2**10, "KiB"))  # 512 B, 4 KiB, 1 GiB
        ax.set_ylabel("busbw (GB/s, nccl-tests convention)")
        ax.set_title(subtitle, fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[-1].set_xlabel("buffer size S (bytes)")
    fig.suptitle(title, fontsize=9)
    return _svg(fig)
