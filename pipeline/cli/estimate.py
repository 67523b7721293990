"""The `estimate` calculators: collectives, transfers, memory, KV cache, capacity, a workload on a topology."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from ..core.errors import FabricrefError, UsageError
from .app import app
from .output import JsonOpt, RootOpt, lay_of, out, print_json

estimate_app = typer.Typer(
    no_args_is_help=True, help="Calculators: collectives, transfers, memory, KV cache, capacity, workloads."
)
app.add_typer(estimate_app, name="estimate")


# The keys every cost estimate reports (the JSON contract for `estimate collective` and `transfer`).
COST_KEYS = (
    "seconds",
    "latency_seconds",
    "bandwidth_seconds",
    "queueing_seconds",
    "bytes_on_wire_per_rank",
    "algorithm",
    "dominant",
)


def _qty(text: str, kind: str, option: str) -> float:
    """'1.5GiB' → bytes, '400Gb/s' → bytes/s, '5us' → seconds; a missing or wrong unit is bad usage."""
    from ..core.units import DATA, RATE, TIME, parse_quantity, unit_info

    target = {"bytes": ("B", DATA), "rate": ("B/s", RATE), "time": ("s", TIME)}[kind]
    try:
        q = parse_quantity(text.replace(" ", ""))
        if unit_info(q.unit)[1] != target[1]:
            raise UsageError(
                f"{option} {text!r}: expected a {kind} with its unit, e.g. "
                + {"bytes": "1.5GiB", "rate": "400Gb/s or 900GB/s", "time": "5us"}[kind]
            )
        factor = unit_info(q.unit)[0]
    except FabricrefError as exc:
        raise UsageError(f"{option} {text!r}: {exc}") from None
    return q.value * factor


def _emit_estimate(data: dict[str, Any], as_json: bool, title: str) -> None:
    from ..traffic import CAVEAT

    data = {**data, "caveat": CAVEAT}
    if as_json:
        print_json(data)
        return
    table = Table("quantity", "value", title=title)
    for key, value in data.items():
        table.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
    out.print(table)


@estimate_app.command("collective")
def estimate_collective(
    op: Annotated[
        str, typer.Option("--op", help="all-reduce, reduce-scatter, all-gather, all-to-all, broadcast, send")
    ],
    ranks: Annotated[int, typer.Option("--ranks", help="Ranks in the group.")],
    size: Annotated[str, typer.Option("--bytes", help="Buffer size S as nccl-tests defines it, e.g. 1GiB.")],
    bandwidth: Annotated[str, typer.Option("--bandwidth", help="Effective per-rank bandwidth, e.g. 400Gb/s.")],
    latency: Annotated[str, typer.Option("--latency", help="Per-step latency, e.g. 5us.")],
    algorithm: Annotated[str, typer.Option("--algorithm", help="ring or tree.")] = "ring",
    direction: Annotated[
        str, typer.Option("--direction", help="per_direction (default) or bidirectional.")
    ] = "per_direction",
    efficiency: Annotated[float, typer.Option("--efficiency", help="Explicit scaling of the bandwidth (0-1].")] = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Alpha-beta cost of one collective: latency, bandwidth and queueing terms, and which dominates."""
    from ..traffic import collectives

    rate = _qty(bandwidth, "rate", "--bandwidth")
    if direction not in ("per_direction", "bidirectional"):
        raise UsageError(f"--direction {direction!r}: expected per_direction or bidirectional")
    if direction == "bidirectional":
        rate /= 2
    est = collectives.estimate(
        op,
        ranks,
        _qty(size, "bytes", "--bytes"),
        rate,
        _qty(latency, "time", "--latency"),
        algorithm=algorithm,
        efficiency=efficiency,
    )
    d = est.as_dict()
    _emit_estimate(
        {k: d[k] for k in (*COST_KEYS, "op", "ranks", "bytes", "steps")}, as_json, f"{op} over {ranks} ranks"
    )


@estimate_app.command("transfer")
def estimate_transfer(
    size: Annotated[str, typer.Option("--bytes", help="Bytes to move, e.g. 10GB.")],
    bandwidth: Annotated[str, typer.Option("--bandwidth", help="Per-direction bandwidth, e.g. 400Gb/s.")],
    latency: Annotated[str, typer.Option("--latency", help="Fixed path overhead, e.g. 5us.")],
    as_json: JsonOpt = False,
) -> None:
    """One point-to-point transfer: fixed path overhead + bytes ÷ bandwidth."""
    from ..traffic import collectives

    est = collectives.estimate(
        "send",
        2,
        _qty(size, "bytes", "--bytes"),
        _qty(bandwidth, "rate", "--bandwidth"),
        _qty(latency, "time", "--latency"),
    )
    d = est.as_dict()
    _emit_estimate({k: d[k] for k in COST_KEYS}, as_json, "transfer")


@estimate_app.command("memory")
def estimate_memory(
    params: Annotated[float, typer.Option("--params", help="Parameter count, e.g. 70e9.")],
    layout_name: Annotated[str, typer.Option("--layout", help="mixed-adam, bf16-weights, fp8-weights, ...")],
    as_json: JsonOpt = False,
) -> None:
    """Bytes of model state: 18 B/param for mixed-precision Adam, 2 B/param for bf16 weights, ..."""
    from ..traffic import sizing

    _emit_estimate(sizing.memory(params, layout_name), as_json, "memory")


@estimate_app.command("kv")
def estimate_kv(
    layers: Annotated[int, typer.Option("--layers")],
    kv_heads: Annotated[int, typer.Option("--kv-heads", help="KV heads (grouped-query attention), not query heads.")],
    head_dim: Annotated[int, typer.Option("--head-dim")],
    dtype: Annotated[str, typer.Option("--dtype", help="bf16, fp8, fp16, fp32")],
    tokens: Annotated[int, typer.Option("--tokens")],
    as_json: JsonOpt = False,
) -> None:
    """KV-cache bytes per token and for T tokens: 2 × layers × KV heads × head dim × bytes."""
    from ..traffic import sizing

    _emit_estimate(sizing.kv_cache(layers, kv_heads, head_dim, dtype, tokens), as_json, "KV cache")


@estimate_app.command("capacity")
def estimate_capacity(
    rps: Annotated[float, typer.Option("--requests-per-second")],
    output_tokens: Annotated[float, typer.Option("--output-tokens")],
    group_tps: Annotated[float, typer.Option("--group-tokens-per-second")],
    group_size: Annotated[int, typer.Option("--group-size")],
    headroom: Annotated[float, typer.Option("--headroom", help="Spare fraction, e.g. 0.2.")] = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """Fleet capacity: groups = ceil(R × T × (1 + headroom) ÷ G); accelerators = groups × group size."""
    from dataclasses import asdict

    from ..traffic import sizing

    _emit_estimate(asdict(sizing.capacity(rps, output_tokens, group_tps, group_size, headroom)), as_json, "capacity")


@estimate_app.command("workload")
def estimate_workload(
    topology_id: Annotated[str, typer.Argument(help="Reference or cluster id.")],
    workload_id: Annotated[str, typer.Argument(help="Workload id (models/workloads/).")],
    as_json: JsonOpt = False,
    root: RootOpt = None,
) -> None:
    """The per-phase table of a workload laid onto a topology's installed wiring."""
    from ..traffic import CAVEAT
    from ..traffic.stage import estimate, lineage_text
    from ..traffic.workloads import find_workload

    lay = lay_of(root)
    r = estimate(lay, topology_id, find_workload(lay, workload_id))
    rows = [
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
            "latency_seconds": p.latency_s,
            "bandwidth_seconds": p.bandwidth_s,
            "queueing_seconds": p.queueing_s,
            "seconds": p.seconds,
            "total_seconds": p.total_seconds,
            "dominant": p.dominant,
            "confidence": p.confidence,
            "lineage": json.loads(lineage_text(p)),
            "description": p.description,
            "notes": p.notes,
        }
        for p in r.phases
    ]
    if as_json:
        print_json(
            {
                "topology_id": topology_id,
                "workload_id": workload_id,
                "phases": rows,
                "revealing": r.revealing,
                "sizing": r.sizing,
                "failures": r.failures,
                "communication_seconds": r.communication_seconds,
                "confidence": r.confidence,
                "caveat": CAVEAT,
            }
        )
        return
    table = Table(
        "phase",
        "collective",
        "n",
        "network / tier",
        "bytes/rank",
        "Gb/s eff",
        "latency s",
        "bandwidth s",
        "queueing s",
        "× count",
        "total s",
        "dominant",
        "confidence",
        title=f"{workload_id} on {topology_id}",
    )
    for p in rows:
        table.add_row(
            p["phase"],
            p["collective"],
            str(p["group_size"]),
            f"{p['network']} / {p['tier']}",
            f"{p['bytes_per_rank']:.3g}",
            f"{p['effective_gbps']:.4g}" if p["effective_gbps"] else "?",
            f"{p['latency_seconds']:.3g}",
            f"{p['bandwidth_seconds']:.3g}",
            f"{p['queueing_seconds']:.3g}",
            str(p["count"]),
            f"{p['total_seconds']:.4g}",
            p["dominant"],
            p["confidence"],
        )
    out.print(table)
    rv = r.revealing
    out.print(
        f"To make progress on {rv['for']}: {rv['accelerators_per_progress']} accelerators must communicate; "
        f"{'fits' if rv['fits_in_one_domain'] else 'does not fit'} in one scale-up domain of "
        f"{rv['scale_up_domain_size']}."
    )
    for f in r.failures:
        out.print(f"failure: {f['failure']}: route {'survives' if f['route_survives'] else 'lost'}; {f['explanation']}")
    if r.failures:
        out.print(r.failures[0]["not_established"])
    out.print(CAVEAT)
