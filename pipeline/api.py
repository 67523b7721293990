"""The Python API for notebooks, scripts and the CLI: `import fabricref`, then registry / topology / estimate / audit.

Each function finds its checkout as the CLI does (the working directory or an ancestor, or $FABRICREF_ROOT; or
`root=` given explicitly) and reads what `dvc repro` (or `dvc pull`) left under registry/. Nothing here writes.
Functions take ids and knobs (numbers in base units: bytes, bytes per second, seconds) and return plain records.
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
Knobs = dict[str, Any] | None  # a workload's knobs set otherwise: `{"prefill_tp": 4, "decode_tp": 4}`


def _lay(root: str | Path | None) -> Layout:
    return layout(Path(root) if root is not None else None)


def checkout(root: str | Path | None = None) -> Path:
    """The checkout the other functions read: `root`, else $FABRICREF_ROOT, else found from the cwd."""
    return _lay(root).root


def registry(root: str | Path | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to the registry as `fabricref query` sees it, each table's SHA-256 checked first: an
    in-memory database over the Parquet files with file access off (COPY TO, ATTACH refused), so it writes nothing.
    Settings (threads, memory_limit) stay the caller's; close it when done (or use it in a `with` block)."""
    from .core.registry import open_tables

    tables = open_tables(_lay(root))
    tables.lock_down(lock_configuration=False)
    return tables.con


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


def stale_topology(root: str | Path | None = None) -> list[str]:
    """The `topology` knobs params.yaml sets otherwise than the built wiring (registry/topology/) was built with:
    every estimate reads the built wiring, so it uses the old values until `dvc repro`."""
    from .topology.facts import stale_defaults

    return stale_defaults(_lay(root))


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


def _workload(lay: Layout, workload_id: str, knobs: Knobs) -> Any:
    from .estimate.workloads import find_workload, with_knobs

    return with_knobs(find_workload(lay, workload_id), knobs)


def estimate_workload(
    topology: str | nx.Graph, workload: str, root: str | Path | None = None, knobs: Knobs = None
) -> list[dict[str, Any]]:
    """The per-phase communication records of a workload (models/workloads/<id>.yaml, with `knobs` set otherwise)
    laid onto a topology's installed wiring, as `fabricref estimate workload` computes them. `topology` is an id
    or a graph returned by `graph()`; the estimate always uses the installed wiring, so an edited graph is not
    honoured."""
    from .estimate.traffic import estimate

    lay = _lay(root)
    return phase_records(estimate(lay, _topology_id(topology), _workload(lay, workload, knobs)))


def workload_report(
    topology_id: str, workload_id: str, root: str | Path | None = None, knobs: Knobs = None
) -> dict[str, Any]:
    """A workload on a topology: its phases, how many accelerators must talk to make progress, its memory and
    whether it fits, the failure scenarios, the communication total and its confidence."""
    from .estimate import CAVEAT
    from .estimate.step import fit_verdict
    from .estimate.traffic import estimate, step_of
    from .estimate.view import view_for

    lay = _lay(root)
    view = view_for(lay, topology_id)
    w = _workload(lay, workload_id, knobs)
    r = estimate(lay, topology_id, w, 0, view)
    st = step_of(lay, view, w, r)
    return {
        "topology_id": topology_id,
        "workload_id": workload_id,
        "phases": phase_records(r),
        "revealing": r.revealing,
        "sizing": r.sizing,
        "failures": r.failures,
        "communication_seconds": r.communication_seconds,
        "confidence": r.confidence,
        "memory_fit": {
            "memory_per_rank_bytes": st["memory_per_rank_bytes"],
            "accelerator_memory_bytes": st["memory"]["accelerator_memory_bytes"],
            "fits": st["fits"],
            "headroom_bytes": st["headroom_bytes"],
            "verdict": fit_verdict(st),
        },
        "caveat": CAVEAT,
    }


def step(
    topology_id: str, workload_id: str, mfu: float | None = None, root: str | Path | None = None, knobs: Knobs = None
) -> dict[str, Any]:
    """Memory per rank and whether it fits; compute, exposed communication and step time (TTFT / TPOT for
    inference). A figure that needs an unknown registry field is unknown, and the field is named in `missing`.
    `mfu` None: params.yaml's `step.mfu`."""
    from .estimate import CAVEAT
    from .estimate.traffic import step_estimate

    lay = _lay(root)
    data = step_estimate(lay, topology_id, _workload(lay, workload_id, knobs), mfu)
    return {"topology_id": topology_id, "workload_id": workload_id, **data, "caveat": CAVEAT}


def collective(
    op: str,
    ranks: int,
    size: float,
    bytes_per_s: float,
    latency_s: float,
    algorithm: str | None = None,
    efficiency: float = 1.0,
    direction: str = "per_direction",
) -> dict[str, Any]:
    """One collective at the bandwidth per rank and per-step latency given (parametric mode): time, algbw and
    busbw (nccl-tests conventions). A `bidirectional` bandwidth is halved: the estimate moves bytes one way."""
    from .errors import UsageError
    from .estimate.collectives import parametric, shown_algorithm

    if direction not in ("per_direction", "bidirectional"):
        raise UsageError(f"--direction {direction!r}: expected per_direction or bidirectional")
    rate = bytes_per_s / 2 if direction == "bidirectional" else bytes_per_s
    est = parametric(op, ranks, size, rate, latency_s, algorithm=algorithm or "ring", efficiency=efficiency)
    return {
        **{k: v for k, v in est.as_dict().items() if k not in ("confidence", "calibration", "candidates", "stages")},
        "algorithm": shown_algorithm(op, est.algorithm),
        "protocol": "as given (parametric: the bandwidth and latency stated on the command line)",
    }


def transfer(size: float, bytes_per_s: float, latency_s: float) -> dict[str, Any]:
    """One point-to-point transfer: fixed path overhead + bytes ÷ bandwidth."""
    return collective("send", 2, size, bytes_per_s, latency_s)


def collective_on_topology(
    topology_id: str, op: str, ranks: int, size: float, algorithm: str | None = None, root: str | Path | None = None
) -> dict[str, Any]:
    """One collective on a topology's first `ranks` accelerators: line rates, hops and link classes from its
    wiring, efficiencies and latencies from the calibration; the chosen algorithm and protocol, and why."""
    from .estimate.calculator import on_topology, result_dict
    from .estimate.view import view_for

    lay = _lay(root)
    return result_dict(*on_topology(view_for(lay, topology_id), op, ranks, size, algorithm))


def collective_sweep(
    topology_id: str,
    op: str,
    ranks: int,
    low: int,
    high: int,
    algorithm: str | None = None,
    root: str | Path | None = None,
) -> list[dict[str, Any]]:
    """One row per power-of-two size from `low` to `high`, like `all_reduce_perf -b low -e high -f 2`."""
    from .estimate.calculator import sweep
    from .estimate.view import view_for

    lay = _lay(root)
    return sweep(view_for(lay, topology_id), op, ranks, low, high, algorithm)


def memory(params: float, layout_name: str = "mixed-adam", **degrees: Any) -> dict[str, Any]:
    """Bytes of model state per rank (`bytes`) for a training layout (split over TP × PP, experts over EP,
    partitioned by ZeRO over DP) or a weights-only layout (split over TP × PP). `degrees`: dp, zero, tp, pp, ep
    and expert_params, as estimate/memory.py `training_state` takes them (1, ZeRO-0 and no experts if left out)."""
    from .estimate import memory as mem

    return mem.training_state(params, layout_name, names=mem.flag, **degrees)


def activations(seq: int, batch: int, hidden: int, heads: int, layers: int = 1, **options: Any) -> dict[str, Any]:
    """Activation bytes per transformer layer (Korthikanti et al.), and for `layers` layers (`bytes`). `options`:
    tp, sequence_parallel and recompute, as estimate/memory.py `activations_per_layer` takes them."""
    from .estimate import memory as mem

    data = mem.activations_per_layer(seq, batch, hidden, heads, **options)
    mem.check_degree(layers, "--layers")
    return {**data, "layers": layers, "bytes": data["bytes_per_layer"] * layers}


def inference_memory(
    params: float,
    layers: int,
    kv_heads: int,
    head_dim: int,
    context: int,
    dtype: str = "bf16",
    tp: int = 1,
    concurrency: int = 1,
    memory_bytes: float | None = None,
) -> dict[str, Any]:
    """Per rank: weights / TP + KV cache of concurrency × context tokens; with `memory_bytes`, the most sequences
    of that context one TP group can hold, and whether it fits."""
    from .estimate import memory as mem
    from .estimate import sizing

    mem.check_number(params, "--params", strict=True)
    per_token = mem.kv_bytes_per_token_per_rank(layers, kv_heads, head_dim, sizing.dtype_bytes(dtype), tp)
    data = mem.inference_fit(params * sizing.dtype_bytes(dtype), per_token, context, tp, memory_bytes, concurrency)
    fits = "unknown" if memory_bytes is None else data["bytes"] <= memory_bytes
    return {**data, "kv_bytes_per_token_per_rank": per_token, "fits": fits}


def capacity(
    requests_per_second: float, output_tokens: float, group_tokens_per_second: float, group_size: int, headroom: float
) -> dict[str, Any]:
    """Fleet capacity: groups = ceil(R × T × (1 + headroom) ÷ G); accelerators = groups × group size."""
    from dataclasses import asdict

    from .estimate import sizing

    return asdict(sizing.capacity(requests_per_second, output_tokens, group_tokens_per_second, group_size, headroom))


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


# --- The planner ---------------------------------------------------------------------------------------------------
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
