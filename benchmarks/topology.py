"""Build time and peak memory of three-tier clusters of DGX H100-class servers at 4,096 / 32,768 / 131,072 GPUs.

Run from the repository root after `dvc repro` (it reads the compiled registry):
    python benchmarks/topology.py
Each size is built in a fresh process so that its peak resident memory is its own.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (accelerators, servers, leaf down/up, leaves per pod, spines per pod, spine up, cores per plane, radix)
SIZES = [
    (4_096, 512, 32, 32, 16, 16, 32, 4, 64),
    (32_768, 4_096, 32, 32, 32, 32, 32, 16, 64),
    (131_072, 16_384, 64, 64, 64, 64, 64, 16, 128),
]


def _one(size: tuple[int, ...], queue: mp.Queue) -> None:
    from fabricref.core.paths import Layout
    from fabricref.topology.build import build_cluster
    from fabricref.topology.clusters import Cluster, Fabric
    from fabricref.topology.facts import defaults, load_facts
    from fabricref.topology.summary import summarize

    gpus, servers, ld, lu, lpp, spp, su, cpp, radix = size
    lay = Layout(ROOT)
    facts = load_facts(lay, "nvidia-dgx-h100")
    cluster = Cluster(
        id=f"bench-{gpus}",
        title=f"benchmark {gpus}",
        kind="illustrative",
        summary="",
        building_block="nvidia-dgx-h100",
        blocks=servers,
        blocks_per_rack=None,
        frontend_blocks_per_switch=32,
        path=None,
        fabric=Fabric(
            tiers=3,
            rail_optimized=True,
            leaf_down=ld,
            leaf_up=lu,
            leaves_per_pod=lpp,
            spines_per_pod=spp,
            spine_up=su,
            spine_oversubscription=None,
            cores_per_plane=cpp,
            radix=radix,
            protocol="bench",
        ),
    )
    start = time.perf_counter()
    g = build_cluster(cluster, facts, defaults(lay))
    built = time.perf_counter() - start
    summary = summarize(g)
    summarized = time.perf_counter() - start - built
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(
        {
            "accelerators": gpus,
            "nodes": g.number_of_nodes(),
            "edges": g.number_of_edges(),
            "build_s": round(built, 2),
            "summary_s": round(summarized, 2),
            "peak_rss_mib": round(peak_mib),
            "bisection_tbps": summary["bisection_bandwidth_gbps"] / 1000,
        }
    )


def run_isolated(target, args: tuple) -> object:
    """Run target(args, queue) in a fresh spawned process, so its peak resident memory is its own."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(args, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def main() -> None:
    header = ("accelerators", "nodes", "edges", "build s", "summary s", "peak MiB", "bisection Tb/s")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (12, 9, 9, 8, 9, 9, 15), strict=True)))
    results = []
    for size in SIZES:
        r = run_isolated(_one, size)
        results.append(r)
        print(
            f"{r['accelerators']:>12,} {r['nodes']:>9,} {r['edges']:>9,} {r['build_s']:>8} {r['summary_s']:>9} "
            f"{r['peak_rss_mib']:>9,} {r['bisection_tbps']:>15,.1f}"
        )
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
