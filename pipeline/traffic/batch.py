"""The traffic stage (`python -m fabricref.traffic`, dvc.yaml `traffic`; people: `fabricref traffic`): every
workload on its targets, every sharing pair and the KV curve as independent items, each read from the item cache
when nothing that shapes it moved and otherwise computed (by worker processes when there are several); then the
tables every reader knows, the plot data, the caveats, the metrics and the measured-vs-model comparison.

One DVC stage instead of one per item (issue 16): DVC's own cost per stage (~0.55 s, mostly re-reading and
rewriting dvc.lock) and each process's library imports (~0.9 s) were most of the traffic work. What the per-item
stages bought (a changed workload recomputes only that workload) the item cache keeps: each item's result is
stored in .fabricref-cache/traffic/ under a key of everything that shapes it (pipeline/core/keyed.py). This module
imports none of the estimating code (the routing, networkx, scipy): a run whose items all hit never loads it.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.files import canonical_json
from ..core.keyed import KeyedCache, file_digests, library_versions, package_sha256, sha256_bytes
from ..core.paths import PARAMS_FILE, Layout, workload_paths
from ..core.processes import env_count, usable_cpus
from ..core.schemas import load_yaml
from ..errors import FabricrefError, UsageError
from ..estimate import CAVEAT
from ..estimate.workloads import Workload, find_workload
from .combine import write_outputs
from .parts import traffic_dir
from .payload import decode

KV_TARGETS = ("nvidia-gb200-nvl72", "illustrative-h100-4096")  # the two topologies the KV curve compares
# The libraries whose behaviour shapes the numbers and their bytes (the YAML and schema readers shape the inputs
# as the code sees them).
LIBRARIES = (
    "duckdb",
    "jsonschema",
    "jsonschema_rs",
    "networkx",
    "numpy",
    "pydantic",
    "pydantic_core",
    "PyYAML",
    "ruamel.yaml",
    "scipy",
)
CACHE_FORMAT = 3  # 2: one item per (workload, target) and (pair, target); 3: tables as columns (payload.py)
ENTRY = "pipeline.traffic"  # the stage's entry point: its import closure is the code an item's result depends on
CODE_ROOT = Path(__file__).resolve().parents[2]  # the checkout whose pipeline/ is running
# The input files an estimate reads besides its workload file and params.yaml (checked by tests/test_dvc_deps.py,
# which runs the stage under an audit hook).
TOPOLOGY_INPUTS = ("topology_graphs", "topology_nodes", "topology_edges", "topology_summaries")
FACT_INPUTS = ("reference_models", "fields", "assumptions", "parameters")
JOBS_ENV = "FABRICREF_JOBS"


@dataclass(frozen=True)
class Item:
    """One independent piece of the stage's work, with the key its result is cached under: a workload on one of
    its targets, a sharing pair on one target both name, or the KV curve (which reads two topologies). Per target,
    not per workload: one workload's targets spread over the workers, and a changed workload recomputes only
    its own (workload, target) items."""

    kind: str  # "workload", "sharing" (the pair of `id` and its shares_with) or "kv"
    id: str
    key: dict[str, Any]
    targets: tuple[str, ...]  # the topologies its estimate reads (one, but for the KV curve)

    @property
    def name(self) -> str:
        return f"{self.kind} {self.id} @ {self.targets[0]}" if self.kind != "kv" else "KV-transfer curve"


def _params(lay: Layout) -> dict[str, Any]:
    path = lay.root / PARAMS_FILE
    data = load_yaml(path)[0] if path.is_file() else None
    return data if isinstance(data, dict) else {}


def code_sha256(lay: Layout | None = None) -> str:
    """The SHA-256 of the package's code."""
    return package_sha256()


def items(lay: Layout, workloads: dict[str, Workload], code: str | None = None) -> list[Item]:
    """Every item of the stage with its cache key: everything that shapes its result — the code (the stage's
    import closure, as the `code` stage lists it; `code`: its `code_sha256` when the caller has it), the library
    versions, the bytes of every input file, the params.yaml values it reads, its workload files."""
    params = _params(lay)
    inputs = [lay.registry_dir / "topology" / f"{t}.parquet" for t in TOPOLOGY_INPUTS]
    inputs += [lay.registry_dir / "tables" / f"{t}.parquet" for t in FACT_INPUTS]
    inputs.append(lay.root / "models" / "calibration")
    common = {
        "format": CACHE_FORMAT,
        "code_sha256": code if code is not None else code_sha256(),
        "libraries": library_versions(LIBRARIES),
        "inputs": file_digests(lay.root, inputs),
        "calibration": params.get("calibration"),
    }

    def workload(wid: str) -> dict[str, Any]:
        path = workloads[wid].path
        return {
            "id": wid,
            "file_sha256": sha256_bytes(path.read_bytes()) if path is not None else None,
            "knobs": (params.get("workloads") or {}).get(wid),
        }

    # In this order (workloads sorted, each on its targets in its file's order; then the pairs; then the curve) the
    # rows are combined: the same rows in the same order however the items were computed or read.
    found = []
    for wid, w in workloads.items():
        own = {**common, "item": "workload", "step": params.get("step"), **workload(wid)}
        found += [Item("workload", wid, {**own, "target": t}, (t,)) for t in w.targets]
    for wid, w in workloads.items():
        if w.shares_with:
            other = workloads.get(w.shares_with) or find_workload(lay, w.shares_with)  # unknown: a clear error
            pair = {**common, "item": "sharing", "workloads": [workload(wid), workload(other.id)]}
            found += [Item("sharing", wid, {**pair, "target": t}, (t,)) for t in w.targets if t in other.targets]
    found.append(Item("kv", "kv", {**common, "item": "kv"}, KV_TARGETS))
    return found


def jobs_wanted(jobs: int | None, items: int) -> int:
    """Worker processes: `jobs` if given, else $FABRICREF_JOBS, else one per usable CPU; never more than items."""
    if jobs is None:
        jobs = env_count(JOBS_ENV, "a whole number of worker processes ≥ 1")
    if jobs is None:
        jobs = usable_cpus()
    if jobs < 1:
        raise UsageError(f"{jobs} worker processes: expected at least 1")
    return max(1, min(jobs, items))


@dataclass
class Run:
    """What a run did: the metrics it wrote, and how many items it computed or read from the cache."""

    metrics: dict[str, Any]
    computed: list[str]
    cached: list[str]
    jobs: int


def run(lay: Layout, jobs: int | None = None, use_cache: bool = True) -> Run:
    """The traffic stage: every workload on its targets, every sharing pair and the KV curve (each read from the
    item cache when nothing that shapes it moved), then the tables every reader knows (registry/traffic/), the
    plot data, the caveats, metrics/<workload>/<target>.json, and the measured logs beside the model
    (registry/comparison/)."""
    from . import comparison

    workloads = {path.stem: find_workload(lay, path.stem) for path in workload_paths(lay)}
    found = items(lay, workloads, code_sha256(lay if use_cache else None))
    cache = KeyedCache(lay.cache_dir / "traffic")
    results: dict[int, bytes] = {}
    if use_cache:
        for i, item in enumerate(found):
            payload = cache.read(item.key)
            if payload is not None:
                results[i] = payload
    todo = [i for i in range(len(found)) if i not in results]
    n = jobs_wanted(jobs, len(todo)) if todo else 1
    if todo:  # the estimating code (numpy, networkx, scipy) is loaded only now
        from .stage import compute_all

        computed = compute_all(lay, workloads, [found[i] for i in todo], n)
    else:
        computed = []
    # The keys were read before the items were computed, the inputs and the code again while computing: an edit
    # in between (say during a long `dvc repro`) would store results of the edited inputs under the key of the old
    # ones, read back as hits once the edit is reverted. So a result is stored only if its key, read again now
    # (the workload files loaded again too), is still the one it was computed under.
    stable: set[int] = set()
    if use_cache and todo:
        try:
            again = {path.stem: find_workload(lay, path.stem) for path in workload_paths(lay)}
            now = items(lay, again, code_sha256(lay)) if again == workloads else []
        except FabricrefError:  # an input broken meanwhile: this run's results are not stored
            now = []
        stable = {i for i in todo if i < len(now) and now[i].key == found[i].key}
    for i, payload in zip(todo, computed, strict=True):
        results[i] = payload
        if use_cache and i in stable:
            cache.write(found[i].key, payload)
    if use_cache:
        cache.prune()

    parts: dict[str, list[list[Any]]] = {}  # table → each item's columns
    metrics: dict[str, Any] = {"caveat": CAVEAT}
    shown: dict[str, dict[str, Any]] = {}
    kv = b""
    for i, item in enumerate(found):  # in item order (workloads sorted, then pairs): the same rows however run
        if item.kind == "kv":
            kv = results[i]
            continue
        data = decode(results[i])
        for name, columns in data.tables.items():
            parts.setdefault(name, []).append(columns)
        if item.kind == "workload":
            shown.setdefault(item.id, {}).update(data.extra["metrics"])
            for target, numbers in data.extra["metrics"].items():
                metrics[f"{item.id}@{target}"] = numbers
    # The measured logs beside the model (registry/comparison/) read nothing the tables hold: written in a thread
    # while the tables are (DuckDB writes without the GIL).
    with ThreadPoolExecutor(1) as pool:
        compared = pool.submit(comparison.run, lay)
        write_outputs(lay, parts, kv, _metric_files(lay, shown))
        _remove_stale_metrics(lay, shown)
        compared.result()
    for legacy in ("workloads", "sharing"):  # the per-item parts the stages before this one wrote
        shutil.rmtree(traffic_dir(lay) / legacy, ignore_errors=True)
    return Run(
        metrics=metrics,
        computed=[found[i].name for i in todo],
        cached=[item.name for i, item in enumerate(found) if i not in todo],
        jobs=n if todo else 0,
    )


def _metric_files(lay: Layout, shown: dict[str, dict[str, Any]]) -> dict[Path, bytes]:
    """metrics/<workload>/<target>.json for every workload and target (written with the stage's other files)."""
    root = lay.root / "metrics"
    return {
        root / wid / f"{target}.json": canonical_json(numbers)
        for wid, by_target in shown.items()
        for target, numbers in by_target.items()
    }


def _remove_stale_metrics(lay: Layout, shown: dict[str, dict[str, Any]]) -> None:
    """A workload or target no longer there loses its file (the stage owns metrics/)."""
    root = lay.root / "metrics"
    for stale in sorted(root.glob("*/*.json")):
        if stale.stem not in shown.get(stale.parent.name, {}):
            stale.unlink()
    for directory in sorted(root.glob("*")):
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()


def summary(done: Run) -> str:
    """One line: what was estimated, which items were computed (named when few) and how many came from the cache."""
    pairs = len(done.metrics) - 1
    named = f" ({', '.join(done.computed)})" if 0 < len(done.computed) <= 3 else ""
    workers = f" by {done.jobs} worker processes" if done.jobs > 1 else ""
    return (
        f"estimated {pairs} workload × topology pairs into registry/traffic/ and metrics/; items computed: "
        f"{len(done.computed)}{named}{workers}, read from .fabricref-cache/traffic/: {len(done.cached)}; "
        "measured logs beside the model into registry/comparison/"
    )
