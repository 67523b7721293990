"""The traffic stage's tables: columns and sort order, where each stage of the traffic work writes its part, and
`combine`, which writes each table from its parts sorted on its key (so the bytes do not depend on which part was
written when) into registry/traffic/<table>.parquet, and metrics/ from the workloads' metrics."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.files import atomic_write_bytes, canonical_json
from ..core.paths import Layout, workload_paths
from ..core.registry import Tables, columns, concat_tables, remove_stale, table_writer, write_schema, write_table
from ..core.schemas import load_yaml
from ..errors import FabricrefError

TRAFFIC_COLUMNS = columns(
    "topology_id workload_id phase description collective algorithm group_size:INTEGER concurrent_groups:INTEGER "
    "count:BIGINT bytes_per_rank:DOUBLE bytes_on_wire_per_rank:DOUBLE network tier hops:INTEGER "
    "bottleneck_gbps:DOUBLE effective_gbps:DOUBLE latency_s:DOUBLE bandwidth_s:DOUBLE queueing_s:DOUBLE "
    "seconds:DOUBLE total_seconds:DOUBLE dominant confidence lineage notes",
    # The records a phase rests on, as structured data (never a string to parse back).
    lineage="STRUCT(reference_id VARCHAR, field VARCHAR, status VARCHAR, confidence VARCHAR)[]",
)
# One row per physical link and phase (both directions of the link in one row).
LINK_COLUMNS = columns(
    "topology_id workload_id phase source target network tier bytes_forward:DOUBLE bytes_reverse:DOUBLE "
    "capacity_gbps:DOUBLE utilization:DOUBLE flows:INTEGER"
)
LINK_KEYS = ("source", "target", "network", "tier", "bytes_forward", "bytes_reverse", "capacity_gbps")
# `teaching`: a teaching example's label (its workload file's `teaching`), else null.
WORKLOAD_COLUMNS = columns(
    "topology_id workload_id accelerators:INTEGER accelerators_per_progress:INTEGER fits_in_one_domain:BOOLEAN "
    "communication_seconds:DOUBLE dominant_phase confidence sizing memory_per_rank_bytes:DOUBLE "
    "accelerator_memory_bytes:DOUBLE fits headroom_bytes:DOUBLE compute_seconds:DOUBLE "
    "exposed_communication_seconds:DOUBLE exposed_communication_at_least_seconds:DOUBLE step_seconds:DOUBLE "
    "ttft_seconds:DOUBLE tpot_seconds:DOUBLE step_missing step_assumptions caveat teaching"
)
FAILURE_COLUMNS = columns(
    "topology_id workload_id failure route_survives:BOOLEAN bandwidth_before_gbps:DOUBLE "
    "bandwidth_after_gbps:DOUBLE explanation not_established"
)
SHARING_COLUMNS = columns(
    "topology_id workload_id other_workload phase network other_utilization:DOUBLE added_queueing_s:DOUBLE "
    "protected:BOOLEAN explanation"
)


# registry/traffic/<table>.parquet: (columns, sort key); each key names one row.
TABLES: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    "traffic": (TRAFFIC_COLUMNS, ["topology_id", "workload_id", "phase"]),
    "traffic_links": (LINK_COLUMNS, ["topology_id", "workload_id", "phase", "source", "target"]),
    "traffic_workloads": (WORKLOAD_COLUMNS, ["topology_id", "workload_id"]),
    "traffic_failures": (FAILURE_COLUMNS, ["topology_id", "workload_id", "failure"]),
    "traffic_sharing": (SHARING_COLUMNS, ["topology_id", "workload_id", "other_workload", "phase"]),
}
WORKLOAD_TABLES = ("traffic", "traffic_links", "traffic_workloads", "traffic_failures")


def traffic_dir(lay: Layout) -> Path:
    return lay.registry_dir / "traffic"


def workload_dir(lay: Layout, workload_id: str) -> Path:
    """A workload's part: its rows of WORKLOAD_TABLES (the workload's own DVC stage writes it)."""
    return traffic_dir(lay) / "workloads" / workload_id


def sharing_path(lay: Layout, workload_id: str) -> Path:
    """A sharing pair's part: the rows of traffic_sharing for `workload_id` and its `shares_with`."""
    return traffic_dir(lay) / "sharing" / f"{workload_id}.parquet"


# A workload's metrics in its part ({target: numbers}); metrics/ is the `traffic` stage's output, not the workload
# stage's, because DVC removes a stage's outputs before running it: a workload stage that fails (`dvc exp run -S`
# with a refused knob) removes only its part, and the combining stage never starts.
PART_METRICS = "metrics.json"


def metrics_dir(lay: Layout) -> Path:
    return lay.root / "metrics"


def write_workload(
    lay: Layout, workload_id: str, tables: dict[str, list[tuple]], metrics: dict[str, dict[str, float | int]]
) -> None:
    """A workload's part: one Parquet file per table and its metrics per target, what was there before removed
    first (a target the workload no longer names must not linger)."""
    out = workload_dir(lay, workload_id)
    for stale in sorted(out.glob("*")) if out.is_dir() else []:
        stale.unlink()
    with table_writer(out, {name: TABLES[name] for name in WORKLOAD_TABLES}) as add:
        for name in WORKLOAD_TABLES:
            add(name, tables[name])
    atomic_write_bytes(out / PART_METRICS, canonical_json(dict(sorted(metrics.items()))))


def write_metrics(lay: Layout, workload_ids: list[str]) -> int:
    """metrics/<workload>/<target>.json from the workloads' parts (`dvc metrics show` prints one row per file, one
    column per key); any other file there is removed. Returns how many files it wrote."""
    root = metrics_dir(lay)
    wanted: dict[Path, bytes] = {}
    for wid in workload_ids:
        numbers = json.loads((workload_dir(lay, wid) / PART_METRICS).read_text(encoding="utf-8"))
        wanted |= {root / wid / f"{target}.json": canonical_json(n) for target, n in sorted(numbers.items())}
    for stale in sorted(root.rglob("*"), reverse=True) if root.is_dir() else []:
        if stale.is_file() and stale not in wanted:
            stale.unlink()
        elif stale.is_dir() and not any(stale.iterdir()):
            stale.rmdir()
    for path, data in wanted.items():
        atomic_write_bytes(path, data)
    return len(wanted)


def write_sharing(lay: Layout, workload_id: str, rows: list[tuple]) -> Path:
    path = sharing_path(lay, workload_id)
    columns, order = TABLES["traffic_sharing"]
    return write_table(path.parent, path.stem, columns, order, rows)


def _shares_with(path: Path) -> str | None:
    """The workload file's `shares_with` (read as written: the combine step needs no knob)."""
    data = load_yaml(path)[0]
    return data.get("shares_with") if isinstance(data, dict) else None


def parts(lay: Layout) -> dict[str, list[Path]]:
    """Every table's parts, for the shipped workloads (models/workloads/) in id order: a workload no longer there is
    left out, a missing part is an error naming what writes it."""
    found: dict[str, list[Path]] = {name: [] for name in [*TABLES, PART_METRICS]}
    for path in workload_paths(lay):
        wid = path.stem
        for name in WORKLOAD_TABLES:
            found[name].append(workload_dir(lay, wid) / f"{name}.parquet")
        found[PART_METRICS].append(workload_dir(lay, wid) / PART_METRICS)
        if _shares_with(path):
            found["traffic_sharing"].append(sharing_path(lay, wid))
    missing = sorted(lay.relative(p) for ps in found.values() for p in ps if not p.is_file())
    if missing:
        raise FabricrefError(
            f"{', '.join(missing)} missing: each workload's stage writes its part (`dvc repro`); a workload needs "
            "its knobs under `workloads.<id>` in params.yaml to have a stage"
        )
    return found


def combine(lay: Layout) -> dict[str, int]:
    """The tables every reader knows from the parts, then schema.json (their columns: the views file's dep, unmoved
    by a changed number), the caveats and the plot data of the phases and links. Returns the rows per table."""
    out = traffic_dir(lay)
    counts = {}
    found = parts(lay)
    for name in TABLES:
        columns, order = TABLES[name]
        counts[name] = concat_tables(out, name, columns, order, found[name])
    remove_stale(out, TABLES)
    write_metrics(lay, [p.parent.name for p in found[PART_METRICS]])
    write_schema(out)
    from . import plots

    with Tables({n: out / f"{n}.parquet" for n in TABLES}) as tables:
        atomic_write_bytes(out / "caveats.json", canonical_json({"caveats": caveats(tables)}))
        plots.write_phases(out / "plots", tables)
    return counts


def caveats(tables: Tables) -> list[str]:
    """The caveats beside the traffic numbers, for every page of the report: a file of their own, so the pages
    that show no traffic number do not rerun when a number moves (the words do not)."""
    found: list[str] = []
    for table, column in (("traffic_workloads", "caveat"), ("traffic_failures", "not_established")):
        found += [r[0] for r in tables.tuples(f"SELECT DISTINCT {column} FROM {table} ORDER BY 1 NULLS LAST")[1]]
    return [c for c in dict.fromkeys(found) if c]


def run_combine(lay: Layout) -> str:
    """`python -m fabricref.traffic combine` (the DVC stage `traffic`): the tables every reader knows."""
    counts = combine(lay)
    return (
        f"combined {counts['traffic_workloads']} workload × topology pairs into {lay.relative(traffic_dir(lay))}/ "
        "and metrics/"
    )
