"""The busbw-versus-size curve of a sweep (and of measured rows beside it), as a deterministic SVG."""

from __future__ import annotations

import io
from typing import Any


def sweep_svg(title: str, model: list[dict[str, Any]], measured: list[dict[str, Any]] | None = None) -> bytes:
    """busbw (GB/s) against the buffer size on a log2 axis, one marker per chosen algorithm / protocol."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "fabricref", "svg.fonttype": "none", "font.family": "DejaVu Sans"})
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r["bytes"] for r in model], [r["busbw_gb_per_s"] for r in model], color="#1f77b4", label="model")
    for label in sorted({f"{r['algorithm']} / {r['protocol']}" for r in model}):
        pts = [r for r in model if f"{r['algorithm']} / {r['protocol']}" == label]
        ax.scatter([r["bytes"] for r in pts], [r["busbw_gb_per_s"] for r in pts], s=12, label=f"model: {label}")
    if measured:
        ax.scatter(
            [r["bytes"] for r in measured],
            [r["busbw_gb_per_s"] for r in measured],
            marker="x",
            color="black",
            label="measured",
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("buffer size S (bytes)")
    ax.set_ylabel("busbw (GB/s, nccl-tests convention)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "fabricref"}, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
