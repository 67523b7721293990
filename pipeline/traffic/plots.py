"""Plot data for `dvc plots show`: time per phase split into overhead / bandwidth / queueing, how long the
busiest link of each class is busy, and local versus cross-domain KV transfer times across prompt lengths."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.files import atomic_write_bytes

if TYPE_CHECKING:
    from ..core.registry import Tables
    from ..estimate.view import View

PROMPTS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
KV_MODEL = {"layers": 80, "kv_heads": 8, "head_dim": 128, "dtype": "bf16"}  # the 70B model of the workloads


def _csv_bytes(header: list[str], rows: list[list[Any]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, *rows])
    return buf.getvalue().encode()


TERMS = (("overhead", "latency_s"), ("bandwidth", "bandwidth_s"), ("queueing", "queueing_s"))


def write_phases(out: Path, tables: Tables) -> None:
    """phase_times.csv (long form: one row per phase and term, stacked in the plot) and busiest_link_classes.csv,
    from the combined traffic tables as written."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in tables.rows("SELECT * FROM traffic ORDER BY workload_id, topology_id, phase"):
        case = f"{r['workload_id']} @ {r['topology_id']} : {r['phase']}"
        for term, column in TERMS:
            rows.append([case, term, round(r[column] * r["count"], 9)])
    atomic_write_bytes(out / "phase_times.csv", _csv_bytes(["phase", "term", "seconds"], rows))
    atomic_write_bytes(out / "busiest_link_classes.csv", _csv_bytes(*_busiest_link_classes(tables)))


def _busiest_link_classes(tables: Tables) -> tuple[list[str], list[list[Any]]]:
    """Per workload, target and link class (tier), its busiest link: the time it is busy per step or request at
    line rate (its bytes each way over every phase, times the phase's count), and that time as a share of the
    workload's communication time, as the heat maps measure a link. Not utilisation: a max-min fair share
    saturates every bottleneck by construction, so most links sit at 1.0 and a ranking by it says nothing."""
    _, found = tables.tuples(
        """
        SELECT e.workload_id || ' @ ' || e.topology_id || ' : ' || e.tier AS link_class,
               max(greatest(e.bytes_forward, e.bytes_reverse) * 8 / (e.capacity_gbps * 1e9)) AS busy,
               w.communication_seconds AS comm
        FROM traffic_link_steps e JOIN traffic_workloads w USING (workload_id, topology_id)
        WHERE e.capacity_gbps > 0
        GROUP BY ALL ORDER BY link_class
        """
    )
    rows = [[name, round(busy, 9), round(busy / comm, 6) if comm else None] for name, busy, comm in found]
    return ["link_class", "busy_seconds", "share_of_communication"], rows


def kv_csv(views: dict[str, View]) -> bytes:
    """kv_transfer.csv: the 70B model's KV cache per decode rank, sent inside an NVL72 domain and across the
    fabric between 8-GPU servers, for each prompt length."""
    from ..estimate import sizing
    from ..estimate.cost import send

    local, cross = views["nvidia-gb200-nvl72"], views["illustrative-h100-4096"]
    kv_rows = []
    for tokens in PROMPTS:
        per_rank = sizing.kv_cache(**KV_MODEL, tokens=tokens)["bytes"] / 8  # type: ignore[operator]
        a = send(local, "kv", local.accelerators[0], local.accelerators[8], per_rank, concurrent=8)
        b = send(cross, "kv", cross.accelerators[0], cross.accelerators[8], per_rank, concurrent=8)
        kv_rows.append([tokens, round(a.seconds, 9), round(b.seconds, 9)])
    return _csv_bytes(["prompt_tokens", "local_nvl72_seconds", "cross_fabric_8gpu_servers_seconds"], kv_rows)
