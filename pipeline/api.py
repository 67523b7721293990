"""The Python API for notebooks and scripts: `import fabricref`, then registry / topology / estimate / audit.

Each function finds its checkout as the CLI does (the working directory or an ancestor, or $FABRICREF_ROOT; or
`root=` given explicitly) and reads what `dvc repro` (or `dvc pull`) left under registry/. Nothing here writes.
Heavy imports happen inside the functions, so `import fabricref` stays cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core.paths import Layout, layout

if TYPE_CHECKING:
    import duckdb
    import networkx as nx

__all__ = ["audit", "checkout", "estimate_workload", "graph", "plan_record", "plan_serve", "plan_train", "registry"]


def _lay(root: str | Path | None) -> Layout:
    return layout(Path(root) if root is not None else None)


def checkout(root: str | Path | None = None) -> Path:
    """The checkout the other functions read: `root`, else $FABRICREF_ROOT, else found from the cwd."""
    return _lay(root).root


def registry(root: str | Path | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only DuckDB connection to the registry (tables and views as `fabricref query` sees them).

    Close it when done (or use it in a `with` block); read-only so a notebook cannot alter the pipeline's output.
    """
    import duckdb

    from .core.registry import ensure_database

    return duckdb.connect(str(ensure_database(_lay(root))), read_only=True)


def graph(topology_id: str, root: str | Path | None = None) -> nx.Graph:
    """The networkx graph of a reference or cluster as the topology stage left it in registry/topology/ (the graph
    the traffic stage uses), with the attributes the exports carry: bandwidth_gbps per direction, links,
    latency_ns, field, status, confidence on edges; kind, role, tier ... on nodes."""
    from .core.graphs import load_topology
    from .core.paths import check_slug

    return load_topology(_lay(root), check_slug(topology_id, "topology id")).graph


def _topology_id(topology: str | nx.Graph) -> str:
    if isinstance(topology, str):
        return topology
    tid = getattr(topology, "graph", {}).get("topology_id")
    if not isinstance(tid, str):
        raise TypeError("topology: expected a topology id or a graph from fabricref.graph()")
    return tid


def phase_records(result: Any) -> list[dict[str, Any]]:
    """The phases of a traffic estimate as plain records (the rows `fabricref estimate workload --json` prints):
    seconds in seconds, bytes in bytes, bandwidth in Gb/s per direction."""
    return [
        {
            "phase": p.phase,
            "collective": p.collective,
            "algorithm": p.algorithm,
            "group_size": p.group_size,
            "concurrent_groups": p.concurrent_groups,
            "count": p.count,
            "bytes_per_rank": p.bytes_per_rank,
            "bytes_on_wire_per_rank": p.bytes_on_wire_per_rank,
            "network": p.network,
            "tier": p.tier,
            "hops": p.hops,
            "bottleneck_gbps": p.bottleneck_gbps,
            "effective_gbps": p.effective_gbps,
            "latency_seconds": p.term("latency_s"),
            "bandwidth_seconds": p.term("bandwidth_s"),
            "queueing_seconds": p.term("queueing_s"),
            "seconds": p.seconds,
            "total_seconds": p.total_seconds,
            "dominant": p.dominant,
            "confidence": p.confidence,
            "lineage": p.lineage_records(),
            "description": p.description,
            "notes": p.notes,
            "unknown_reason": p.unknown or None,
            "max_link_utilization": p.max_link_utilization,
            "hot_links": list(p.hot_links),
            "bytes_on_wire_per_rank_by_network": p.bytes_on_wire_by_network,
        }
        for p in result.phases
    ]


def estimate_workload(topology: str | nx.Graph, workload: str, root: str | Path | None = None) -> list[dict[str, Any]]:
    """The per-phase communication records of a workload (models/workloads/<id>.yaml) laid onto a topology's
    installed wiring, as `fabricref estimate workload` computes them. `topology` is an id or a graph returned
    by `topology()`; the estimate always uses the installed wiring, so an edited graph is not honoured."""
    from .estimate.traffic import estimate
    from .estimate.workloads import find_workload

    lay = _lay(root)
    return phase_records(estimate(lay, _topology_id(topology), find_workload(lay, workload)))


def audit(reference_id: str, field: str, root: str | Path | None = None) -> dict[str, Any]:
    """The provenance tree of one field: value, unit, status, and each citation down to the snapshot bytes,
    re-hashed (`verified`); a derived field carries the audits of its inputs under `inputs`."""
    from .inspect.audit import audit as _audit

    return _audit(_lay(root), reference_id, field)


def validate(root: str | Path | None = None, only: str | None = None) -> list[dict[str, Any]]:
    """Every published result of models/validation/ against the model (`fabricref validate`): one record per
    result with its use (calibration / check / held-out), published value, model value, ratio and whether it is
    within its tolerance, and the calibration numbers the estimate used with their status. `only` keeps the
    files or results whose id contains it."""
    from .estimate import validation

    rows = validation.run(_lay(root), only=only)
    return [dict(zip(validation.COLUMNS, r.as_tuple(), strict=True)) for r in rows]


# --- The planner (issue 28) ---------------------------------------------------------------------------------------
# Searches run in memory and write nothing (the CLI writes plans/<id>.parquet and, with --save, a workload): the
# explorer calls these per request. Options and their errors are the CLI's (an error names the --option).


def plan_train(
    model: str,
    cluster: str,
    root: str | Path | None = None,
    *,
    engine: Any = None,
    progress: Any = None,
    **options: Any,
) -> Any:
    """Every legal training layout of `model` (a workload id or a model-definition file) on `cluster`, searched:
    a `PlanResult` with one row per layout (inputs, step time, memory, fit, dominant cost, confidence), the top K
    by `objective` routed per link, and the Pareto front of step time vs memory headroom. `options`: gpus (a tuple),
    global_batch, seq, objective (step | tokens-per-second | gpu-hours), top, max_layouts, tp, pp, cp, ep, zero,
    recompute, schedule (tuples), memory_headroom, prune. `engine`: `fabricref.plan.engines.engine("ray")` for Ray
    (default in-process)."""
    from .plan.train import plan_training

    return plan_training(_lay(root), model, cluster, engine=engine, progress=progress, **options)


def plan_serve(model: str, cluster: str, root: str | Path | None = None, **options: Any) -> Any:
    """Every serving layout of `model` on `cluster` for a demand: `options` requests_per_second, prompt, output,
    ttft_p50 and tpot (seconds), modes, tp, top, memory_headroom. Ranked by accelerators, then request latency."""
    from .plan.serve import plan_serving

    return plan_serving(_lay(root), model, cluster, **options)


def plan_record(result: Any) -> dict[str, Any]:
    """A `PlanResult` as JSON-ready data: request, counts, top K (with hot links), Pareto front, notes."""
    from .plan.search import as_dict

    return as_dict(result)
