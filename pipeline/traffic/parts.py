"""Where the traffic stage's parts live and what their tables hold: the columns, the per-item paths, who shares
a cluster with whom.

Kept free of the estimating code (numpy, networkx, the routing) so that the `combine` step, which only
concatenates the parts, starts in a fraction of the time a workload stage needs (issue 16)."""

from __future__ import annotations

from pathlib import Path

from ..core.paths import Layout
from ..core.schemas import load_yaml

TRAFFIC_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("workload_id", "VARCHAR"),
    ("phase", "VARCHAR"),
    ("description", "VARCHAR"),
    ("collective", "VARCHAR"),
    ("algorithm", "VARCHAR"),
    ("group_size", "INTEGER"),
    ("concurrent_groups", "INTEGER"),
    ("count", "BIGINT"),
    ("bytes_per_rank", "DOUBLE"),
    ("bytes_on_wire_per_rank", "DOUBLE"),
    ("network", "VARCHAR"),
    ("tier", "VARCHAR"),
    ("hops", "INTEGER"),
    ("bottleneck_gbps", "DOUBLE"),
    ("effective_gbps", "DOUBLE"),
    ("latency_s", "DOUBLE"),
    ("bandwidth_s", "DOUBLE"),
    ("queueing_s", "DOUBLE"),
    ("seconds", "DOUBLE"),
    ("total_seconds", "DOUBLE"),
    ("dominant", "VARCHAR"),
    ("confidence", "VARCHAR"),
    # The records a phase rests on, as structured data (never a string to parse back).
    ("lineage", "STRUCT(reference_id VARCHAR, field VARCHAR, status VARCHAR, confidence VARCHAR)[]"),
    ("notes", "VARCHAR"),
]
# One row per physical link and phase (both directions of the link in one row).
LINK_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("workload_id", "VARCHAR"),
    ("phase", "VARCHAR"),
    ("source", "VARCHAR"),
    ("target", "VARCHAR"),
    ("network", "VARCHAR"),
    ("tier", "VARCHAR"),
    ("bytes_forward", "DOUBLE"),
    ("bytes_reverse", "DOUBLE"),
    ("capacity_gbps", "DOUBLE"),
    ("utilization", "DOUBLE"),
    ("flows", "INTEGER"),
]
LINK_KEYS = ("source", "target", "network", "tier", "bytes_forward", "bytes_reverse", "capacity_gbps")
WORKLOAD_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("workload_id", "VARCHAR"),
    ("accelerators", "INTEGER"),
    ("accelerators_per_progress", "INTEGER"),
    ("fits_in_one_domain", "BOOLEAN"),
    ("communication_seconds", "DOUBLE"),
    ("dominant_phase", "VARCHAR"),
    ("confidence", "VARCHAR"),
    ("sizing", "VARCHAR"),
    ("memory_per_rank_bytes", "DOUBLE"),
    ("accelerator_memory_bytes", "DOUBLE"),
    ("fits", "VARCHAR"),
    ("headroom_bytes", "DOUBLE"),
    ("compute_seconds", "DOUBLE"),
    ("exposed_communication_seconds", "DOUBLE"),
    ("exposed_communication_at_least_seconds", "DOUBLE"),
    ("step_seconds", "DOUBLE"),
    ("ttft_seconds", "DOUBLE"),
    ("tpot_seconds", "DOUBLE"),
    ("step_missing", "VARCHAR"),
    ("step_assumptions", "VARCHAR"),
    ("caveat", "VARCHAR"),
]
FAILURE_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("workload_id", "VARCHAR"),
    ("failure", "VARCHAR"),
    ("route_survives", "BOOLEAN"),
    ("bandwidth_before_gbps", "DOUBLE"),
    ("bandwidth_after_gbps", "DOUBLE"),
    ("explanation", "VARCHAR"),
    ("not_established", "VARCHAR"),
]
SHARING_COLUMNS = [
    ("topology_id", "VARCHAR"),
    ("workload_id", "VARCHAR"),
    ("other_workload", "VARCHAR"),
    ("phase", "VARCHAR"),
    ("network", "VARCHAR"),
    ("other_utilization", "DOUBLE"),
    ("added_queueing_s", "DOUBLE"),
    ("protected", "BOOLEAN"),
    ("explanation", "VARCHAR"),
]


# The per-item layout DVC runs (dvc.yaml): one stage per workload writes WORKLOAD_TABLES under
# registry/traffic/workloads/<id>/ and its metrics under metrics/<id>/; one per sharing pair writes
# registry/traffic/sharing/<id>.parquet; `combine` concatenates them into the tables every reader knows
# (registry/traffic/<table>.parquet, same names and columns) and the plot data; `kv` writes the KV-transfer curve.
# A changed workload reruns its own stage and the combine.
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
    return traffic_dir(lay) / "workloads" / workload_id


def sharing_file(lay: Layout, workload_id: str) -> Path:
    return traffic_dir(lay) / "sharing" / f"{workload_id}.parquet"


def workload_paths(lay: Layout) -> list[Path]:
    return sorted((lay.root / "models" / "workloads").glob("*.yaml"))


def sharing_pairs(lay: Layout) -> list[tuple[str, str]]:
    """(workload, the workload it shares the cluster with), for every workload file that declares `shares_with`
    (read from the files alone: the knobs in params.yaml do not change who shares with whom)."""
    pairs = []
    for path in workload_paths(lay):
        data = load_yaml(path)[0]
        other = data.get("shares_with") if isinstance(data, dict) else None
        if other:
            pairs.append((path.stem, str(other)))
    return pairs
