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


def compare_svg(title: str, rows: list[dict[str, Any]]) -> bytes:
    """One panel per measured log: measured busbw (crosses) and the model's (line) at the same sizes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "fabricref", "svg.fonttype": "none", "font.family": "DejaVu Sans"})
    ids = sorted({r["measurement_id"] for r in rows})
    fig, axes = plt.subplots(len(ids), 1, figsize=(7, 2.6 * len(ids)), squeeze=False)
    for ax, mid in zip(axes[:, 0], ids, strict=True):
        mine = sorted((r for r in rows if r["measurement_id"] == mid), key=lambda r: r["bytes"])
        sizes = [r["bytes"] for r in mine]
        ax.plot(sizes, [r["model_busbw_gb_per_s"] for r in mine], marker="o", ms=3, label="model")
        ax.scatter(sizes, [r["measured_busbw_gb_per_s"] for r in mine], marker="x", color="black", label="measured")
        chosen = sorted({f"{r['algorithm']} / {r['protocol']}" for r in mine})
        ax.set_title(f"{mid}: {mine[0]['op']}, {mine[0]['ranks']} ranks; model {', '.join(chosen)}", fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_ylabel("busbw GB/s")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[-1, 0].set_xlabel("buffer size S (bytes)")
    fig.suptitle(title, fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "fabricref"}, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
