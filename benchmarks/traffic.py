"""Time and peak memory of routing every shipped workload over the installed wiring, and a 131,072-GPU case.

Run from the repository root after `dvc repro` (or `fabricref compile`):  python benchmarks/traffic.py
Each case runs in a fresh process so that its peak resident memory is its own. Every group of every phase is
routed at once over the topology graph (sparse links × flows incidence, ECMP per leaf pair, in-domain paths per
wiring signature); targets: ≤ 5 s per workload on the 24,576-GPU Meta-style cluster, and at 131,072 GPUs
≤ 1.5× the topology build time and ≤ 2 GB peak.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # after ROOT: benchmarks/pipeline.py must not shadow the package

META = "meta-style-h100-24576"
BENCH = "bench-131072"
BENCH_WORKLOAD = """id: tp8-dp16384
title: 70B dense model, TP 8 x DP 16384 (benchmark only)
kind: training
model: {params: 70.0e9, layers: 80, hidden: 8192, kv_heads: 8, head_dim: 128, dtype: bf16}
training: {tp: 8, pp: 1, dp: 16384, micro_batch: 1, microbatches: 4, seq_len: 4096}
targets: [bench-131072]
"""


def _cases() -> list[tuple[str, str]]:
    from fabricref.core.paths import Layout
    from fabricref.estimate.workloads import load_workload, workload_paths

    lay = Layout(ROOT)
    # Every shipped workload on the Meta-style cluster, whether or not the workload lists it as a target.
    cases = [(META, w.id) for w in map(load_workload, workload_paths(lay))]
    return [*cases, (BENCH, "tp8-dp16384")]


def _one(case: tuple[str, str], queue: Any) -> None:
    from fabricref.core.paths import Layout
    from fabricref.estimate.loads import workload_phases
    from fabricref.estimate.routing import Fabric
    from fabricref.estimate.workloads import find_workload, load_workload
    from fabricref.topology import stage as topology
    from fabricref.topology.facts import defaults

    lay = Layout(ROOT)
    target, workload_id = case
    start = time.perf_counter()
    cpu0 = time.process_time()  # CPU seconds: what a shared, loaded machine does not inflate
    if target == BENCH:
        from fabricref.topology.build import build_cluster
        from fabricref.topology.clusters import Cluster
        from fabricref.topology.clusters import Fabric as FabricSpec
        from fabricref.topology.facts import load_facts
        from topology import SIZES  # the benchmark cluster of benchmarks/topology.py

        _gpus, servers, ld, lu, lpp, spp, su, cpp, radix = SIZES[-1]
        spec = FabricSpec(3, True, ld, lu, lpp, spp, su, None, cpp, radix, "bench")
        cluster = Cluster(target, target, "illustrative", "", "nvidia-dgx-h100", servers, None, spec, 32, None)
        g = build_cluster(cluster, load_facts(lay, "nvidia-dgx-h100"), defaults(lay))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{workload_id}.yaml"
            path.write_text(BENCH_WORKLOAD)
            workload = load_workload(path)
    else:
        g = topology.build(lay, target)
        workload = find_workload(lay, workload_id)
    built = time.perf_counter() - start
    cpu1 = time.process_time()
    fabric = Fabric(g)
    _, phases = workload_phases(fabric, workload, defaults(lay).latency_ns["endpoint"] * 1e-9)
    routed = time.perf_counter() - start - built
    cpu_built, cpu_routed = cpu1 - cpu0, time.process_time() - cpu1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    comm = sum(p.load.seconds * p.count for p in phases)
    util = max((float(p.load.utilization.max()) for p in phases), default=0.0)
    queue.put(
        (
            target,
            workload_id,
            sum(1 for _, d in g.nodes(data=True) if d.get("kind") == "accelerator"),
            round(built, 2),
            round(routed, 2),
            round(peak),
            round(comm, 4),
            round(util, 2),
            round(cpu_built, 2),
            round(cpu_routed, 2),
        )
    )


def main() -> None:
    from topology import run_isolated  # benchmarks/topology.py: one fresh process per case

    print(
        f"{'topology':<24} {'workload':<30} {'GPUs':>7} {'build s':>8} {'route s':>8} {'peak MiB':>9} "
        f"{'comm s':>9} {'max util':>8} {'build cpu':>9} {'route cpu':>9}"
    )
    for case in _cases():
        r = run_isolated(_one, case)
        print(
            f"{r[0]:<24} {r[1]:<30} {r[2]:>7,} {r[3]:>8} {r[4]:>8} {r[5]:>9,} {r[6]:>9} {r[7]:>8} {r[8]:>9} {r[9]:>9}"
        )
        if r[0] == BENCH:
            print(
                f"131,072 GPUs: routing / build = {r[4] / r[3]:.2f} wall, {r[9] / r[8]:.2f} CPU (target ≤ 1.5), "
                f"peak {r[5]:,} MiB (≤ 2,048)"
            )


if __name__ == "__main__":
    main()
