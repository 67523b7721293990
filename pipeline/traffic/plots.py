"""Plot data for `dvc plots show`: time per phase split into overhead / bandwidth / queueing, utilization of
the busiest physical links, and local versus cross-domain KV transfer times across prompt lengths."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_bytes
from . import sizing
from .cost import send
from .view import View

PROMPTS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
KV_MODEL = {"layers": 80, "kv_heads": 8, "head_dim": 128, "dtype": "bf16"}  # the 70B model of the workloads


def _csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    atomic_write_bytes(path, buf.getvalue().encode())


def write(out: Path, traffic: list[tuple], links: list[tuple], views: dict[str, View]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in traffic:
        case = f"{r[1]} @ {r[0]} : {r[2]}"
        count = r[8]
        for term, value in (("overhead", r[16]), ("bandwidth", r[17]), ("queueing", r[18])):
            rows.append([f"{case} [{term}]", round(value * count, 9)])
    _csv(out / "phase_times.csv", ["phase_term", "seconds"], rows)
    util = sorted(
        ([f"{r[1]} @ {r[0]} : {r[2]} : {r[3]} – {r[4]}", round(r[10], 6)] for r in links if r[10] is not None),
        key=lambda x: (-x[1], x[0]),
    )[:25]
    _csv(out / "link_utilization.csv", ["link", "utilization"], util)
    kv_rows = []
    local, cross = views.get("nvidia-gb200-nvl72"), views.get("illustrative-h100-4096")
    if local is not None and cross is not None:
        for tokens in PROMPTS:
            per_rank = sizing.kv_cache(**KV_MODEL, tokens=tokens)["bytes"] / 8  # type: ignore[operator]
            a = send(local, "kv", local.accelerators[0], local.accelerators[8], per_rank, concurrent=8)
            b = send(cross, "kv", cross.accelerators[0], cross.accelerators[8], per_rank, concurrent=8)
            kv_rows.append([tokens, round(a.seconds, 9), round(b.seconds, 9)])
    _csv(
        out / "kv_transfer.csv", ["prompt_tokens", "local_nvl72_seconds", "cross_fabric_8gpu_servers_seconds"], kv_rows
    )
