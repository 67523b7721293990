"""Time and peak memory of traffic estimates on the shipped clusters and on a 131,072-GPU three-tier cluster.

Run from the repository root after `dvc repro`:  python benchmarks/traffic.py
Each case runs in a fresh process so that its peak resident memory is its own. Collectives are costed from
the topology's structure (one representative group per phase), never by enumerating pairs of ranks.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

CASES = [
    ("illustrative-h100-4096", "llama70b-train-tp8-dp512"),
    ("meta-style-h100-24576", "llama70b-train-tp8-dp512"),
    ("meta-style-h100-24576", "llama70b-serve-disaggregated"),
    ("bench-131072", "tp8-dp16384 (generated)"),
]


def _one(case: tuple[str, str], queue: Any) -> None:
    from pipeline.core.paths import Layout
    from pipeline.topology import stage as topology
    from pipeline.topology.build import build_cluster
    from pipeline.topology.facts import defaults, load_facts
    from pipeline.traffic.stage import estimate
    from pipeline.traffic.view import View
    from pipeline.traffic.workloads import Workload, find_workload

    lay = Layout(ROOT)
    start = time.perf_counter()
    target, workload_id = case
    if target == "bench-131072":
        from topology import SIZES  # the benchmark cluster of benchmarks/topology.py

        from pipeline.topology.clusters import Cluster, Fabric

        gpus, servers, ld, lu, lpp, spp, su, cpp, radix = SIZES[-1]
        fabric = Fabric(3, True, ld, lu, lpp, spp, su, None, cpp, radix, "bench")
        cluster = Cluster(target, target, "illustrative", "", "nvidia-dgx-h100", servers, None, fabric, 32, None)
        g = build_cluster(cluster, load_facts(lay, "nvidia-dgx-h100"), defaults(lay))
        workload = Workload(
            "tp8-dp16384",
            "bench",
            "training",
            {"params": 70e9, "layers": 80, "hidden": 8192, "kv_heads": 8, "head_dim": 128, "dtype": "bf16"},
            {"tp": 8, "pp": 1, "dp": gpus // 8, "micro_batch": 1, "microbatches": 4, "seq_len": 4096},
            None,
            (target,),
            None,
            None,
        )
    else:
        g = topology.build(lay, target)
        workload = find_workload(lay, workload_id)
    built = time.perf_counter() - start
    view = View(g, defaults(lay).latency_ns["endpoint"])
    result = estimate(lay, target, workload, 0, view)
    total = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(
        (
            target,
            workload.id,
            len(view.accelerators),
            round(built, 2),
            round(total - built, 2),
            round(peak),
            round(result.communication_seconds, 4),
        )
    )


def main() -> None:
    from topology import run_isolated  # benchmarks/topology.py: one fresh process per case

    print(
        f"{'topology':<24} {'workload':<30} {'GPUs':>7} {'build s':>8} {'estimate s':>10} {'peak MiB':>9} {'comm s':>8}"
    )
    for case in CASES:
        row = run_isolated(_one, case)
        print(f"{row[0]:<24} {row[1]:<30} {row[2]:>7,} {row[3]:>8} {row[4]:>10} {row[5]:>9,} {row[6]:>8}")


if __name__ == "__main__":
    main()
