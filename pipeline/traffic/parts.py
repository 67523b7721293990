"""What the traffic stage's tables hold (their columns and sort order), where they live, and who shares a cluster
with whom.

Kept free of the estimating code (numpy, networkx, the routing): writing the tables from cached results needs
none of it (issue 16)."""

from __future__ import annotations

from pathlib import Path

from ..core.paths import Layout

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


# registry/traffic/<table>.parquet: each workload's item gives its rows of WORKLOAD_TABLES, each sharing pair's
# its rows of traffic_sharing (pipeline/traffic/stage.py).
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
