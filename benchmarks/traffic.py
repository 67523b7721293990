"""Time and peak memory of laying every shipped workload onto the installed wiring, and a 131,072-GPU case.

Run from the repository root after `dvc repro` (it reads the compiled registry):  python benchmarks/traffic.py
Each case runs in a fresh process so that its peak resident memory is its own. A case builds the topology from
the registry (`topology.stage.build`, as the topology stage does), then lays the workload onto it through the
traffic library's one entry (`estimate.traffic.estimate`: decomposed once, placed, every group of every phase
routed at once over the wiring, costed). Every shipped workload runs on the 24,576-GPU Meta-style cluster, whether
or not it lists it as a target; the 131,072-GPU cluster is the benchmark's own (benchmarks/models/, added to a
scratch copy of the checkout's models, as benchmarks/explore.py does). Targets: ≤ 5 s per workload on the
Meta-style cluster, and at 131,072 GPUs routing ≤ 1.5× the topology build and ≤ 2 GB peak.
"""

from __future__ import annotations

import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # after ROOT: benchmarks/pipeline.py must not shadow the package

META = "meta-style-h100-24576"
BIG = "illustrative-h100-131072"
BIG_WORKLOAD = "tp8-dp16384"
BIG_WORKLOAD_TEXT = f"""id: {BIG_WORKLOAD}
title: 70B dense model, TP 8 x DP 16384 (benchmark only)
kind: training
model: {{params: 70.0e9, layers: 80, hidden: 8192, kv_heads: 8, head_dim: 128, dtype: bf16}}
training: {{tp: 8, pp: 1, dp: 16384, micro_batch: 1, microbatches: 4, seq_len: 4096, grad_dtype: bf16, zero: 1}}
targets: [{BIG}]
"""


def scratch_checkout(dest: Path) -> Path:
    """The checkout's models, schemas, params and compiled tables in `dest`, with the benchmark's cluster and
    workload added (the topologies are built by each case, not read from registry/topology)."""
    for name in ("models", "schemas", "params.yaml", "registry/tables"):
        src, out = ROOT / name, dest / name
        out.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, out)
    bench = ROOT / "benchmarks" / "models"
    shutil.copy2(bench / "clusters" / f"{BIG}.yaml", dest / "models" / "clusters" / f"{BIG}.yaml")
    shutil.copy2(bench / "revisions" / "clusters" / f"{BIG}.json", dest / "models" / "revisions" / "clusters")
    (dest / "models" / "workloads" / f"{BIG_WORKLOAD}.yaml").write_text(BIG_WORKLOAD_TEXT)
    return dest


def _cases(root: Path) -> list[tuple[str, str, str]]:
    from fabricref.core.paths import Layout, workload_paths

    shipped = [p.stem for p in workload_paths(Layout(ROOT))]
    return [*((str(root), META, w) for w in shipped), (str(root), BIG, BIG_WORKLOAD)]


def _one(case: tuple[str, str, str], queue: Any) -> None:
    from fabricref.core.paths import Layout
    from fabricref.estimate.calibration import load_calibration
    from fabricref.estimate.traffic import estimate
    from fabricref.estimate.view import View, technology
    from fabricref.estimate.workloads import find_workload
    from fabricref.topology import stage as topology
    from fabricref.topology.facts import defaults
    from fabricref.topology.summary import summarize

    root, target, workload_id = case
    lay = Layout(Path(root))
    workload = find_workload(lay, workload_id)
    start, cpu0 = time.perf_counter(), time.process_time()  # CPU seconds: what a loaded machine does not inflate
    g = topology.build(lay, target)
    view = View(g, defaults(lay).latency_ns["endpoint"], summarize(g))
    view.calibration = load_calibration(lay.root)
    view.scale_up_technology = technology(lay, view.reference)
    built, cpu1 = time.perf_counter() - start, time.process_time()
    result = estimate(lay, target, workload, 0, view)
    routed, cpu2 = time.perf_counter() - start - built, time.process_time()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    util = max((p.max_link_utilization or 0.0 for p in result.phases), default=0.0)
    queue.put(
        (
            target,
            workload_id,
            len(view.accelerators),
            round(built, 2),
            round(routed, 2),
            round(peak),
            round(result.known_communication_seconds, 4),
            round(util, 2),
            round(cpu1 - cpu0, 2),
            round(cpu2 - cpu1, 2),
        )
    )


def main() -> None:
    from topology import run_isolated  # benchmarks/topology.py: one fresh process per case

    print(
        f"{'topology':<26} {'workload':<30} {'GPUs':>7} {'build s':>8} {'route s':>8} {'peak MiB':>9} "
        f"{'comm s':>9} {'max util':>8} {'build cpu':>9} {'route cpu':>9}"
    )
    with tempfile.TemporaryDirectory(prefix="fabricref-traffic-bench-") as tmp:
        root = scratch_checkout(Path(tmp))
        for case in _cases(root):
            r = run_isolated(_one, case)
            print(
                f"{r[0]:<26} {r[1]:<30} {r[2]:>7,} {r[3]:>8} {r[4]:>8} {r[5]:>9,} {r[6]:>9} {r[7]:>8} {r[8]:>9} "
                f"{r[9]:>9}"
            )
            if r[0] == BIG:
                print(
                    f"131,072 GPUs: routing / build = {r[4] / r[3]:.2f} wall, {r[9] / r[8]:.2f} CPU (target ≤ 1.5), "
                    f"peak {r[5]:,} MiB (≤ 2,048)"
                )


if __name__ == "__main__":
    main()
