"""The `estimate` calculators: collectives, transfers, memory, KV cache, capacity, a workload on a topology."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from .. import api
from ..core.format import format_quantity
from ..core.units import parse_amount
from ..errors import FabricrefError, UsageError
from ..estimate import CAVEAT
from .app import app
from .options import amount
from .output import (
    JsonOpt,
    RootOpt,
    cell,
    lay_of,
    out,
    output_path,
    print_json,
    readable,
    records_table,
    unit_of_key,
)

estimate_app = typer.Typer(
    no_args_is_help=True, help="Calculators: collectives, transfers, memory, KV cache, capacity, workloads."
)
app.add_typer(estimate_app, name="estimate")


# The keys every cost estimate reports: the JSON contract of `estimate collective` and `estimate transfer`.
COST_KEYS = (
    "seconds",
    "latency_seconds",
    "bandwidth_seconds",
    "queueing_seconds",
    "bytes_on_wire_per_rank",
    "algorithm",
    "dominant",
)


def _warn_if_stale(root: Path) -> None:
    """Say on stderr when params.yaml's `topology` knobs moved since the wiring an estimate reads was built."""
    for moved in api.stale_topology(root):
        sys.stderr.write(f"warning: {moved}\n")


def _qty(text: str, kind: str, option: str) -> float:
    """'1.5GiB' → bytes, '400Gb/s' → bytes/s, '5us' → seconds (core/units.parse_amount); bad text is bad usage,
    and so is a zero rate (nothing would ever arrive)."""
    try:
        value = parse_amount(text, kind)
    except FabricrefError as exc:
        raise UsageError(f"{option} {exc}") from None
    if kind == "rate" and value == 0:
        raise UsageError(f"{option} {text!r}: expected a rate above zero, e.g. 400Gb/s or 900GB/s")
    return value


def _emit_estimate(data: dict[str, Any], as_json: bool, title: str) -> None:
    data = {**data, "caveat": CAVEAT}
    if as_json:
        print_json(data)
        return
    out.print(_estimate_table(data, title))


def _estimate_table(data: dict[str, Any], title: str) -> Table:
    """A calculator's result as `quantity | value` rows, in the JSON's order: every number with its unit
    (core/format), rates in one unit family (bytes per second when the result mixes bits and bytes)."""
    rates = {u for u in map(unit_of_key, data) if u in ("Gb/s", "GB/s")}
    table = Table("quantity", "value", title=title)
    for key, value in data.items():
        mixed = unit_of_key(key) == "Gb/s" and len(rates) > 1 and isinstance(value, float | int)
        shown = format_quantity(value / 8, "GB/s") if mixed and not isinstance(value, bool) else readable(value, key)
        table.add_row(key, cell(shown))
    return table


@estimate_app.command("collective")
def estimate_collective(
    op: Annotated[
        str,
        typer.Option("--op", help="all-reduce, reduce-scatter, all-gather, all-to-all, broadcast, reduce, send"),
    ],
    ranks: Annotated[int, typer.Option("--ranks", help="Ranks in the group.")],
    size: Annotated[
        str | None, typer.Option("--bytes", help="Buffer size S as nccl-tests defines it, e.g. 1GiB.")
    ] = None,
    topology_id: Annotated[
        str | None,
        typer.Option("--topology", help="Reference or cluster id: bandwidth, hops and link classes from its wiring."),
    ] = None,
    sweep: Annotated[
        str | None,
        typer.Option("--sweep", help="MIN:MAX, powers of two like all_reduce_perf -b MIN -e MAX -f 2 (topology mode)."),
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="With --sweep: write the busbw curve as an SVG file.")
    ] = None,
    bandwidth: Annotated[
        str | None, typer.Option("--bandwidth", help="Parametric mode: effective per-rank bandwidth, e.g. 400Gb/s.")
    ] = None,
    latency: Annotated[
        str | None, typer.Option("--latency", help="Parametric mode: per-step latency, e.g. 5us.")
    ] = None,
    algorithm: Annotated[
        str | None,
        typer.Option(
            "--algorithm",
            help="Force one: ring, tree, nvls, collnet, one-shot, recursive-doubling, bruck (default: the fastest "
            "available; parametric mode: ring, tree, recursive-doubling or bruck, default ring).",
        ),
    ] = None,
    direction: Annotated[
        str, typer.Option("--direction", help="per_direction (default) or bidirectional.")
    ] = "per_direction",
    efficiency: Annotated[float, typer.Option("--efficiency", help="Explicit scaling of the bandwidth (0-1].")] = 1.0,
    as_json: JsonOpt = False,
    root: RootOpt = None,
) -> None:
    """One collective: time, algbw and busbw (nccl-tests conventions), chosen algorithm and protocol.

    Topology mode (--topology) takes line rates, hops and link classes from the installed wiring and efficiencies
    and latencies from models/calibration/collectives.yaml; parametric mode (--bandwidth, --latency) costs the same
    algorithms (those that need no calibration) at the bandwidth and per-step latency given."""
    if topology_id is not None:
        if bandwidth is not None or latency is not None or efficiency != 1.0:
            raise UsageError(
                "--topology takes bandwidth, latency and efficiency from the wiring and the calibration; "
                "drop --bandwidth / --latency / --efficiency"
            )
        _collective_on_topology(topology_id, op, ranks, size, sweep, algorithm, as_json, root, plot)
        return
    if sweep is not None or plot is not None:
        raise UsageError("--sweep needs --topology")
    if size is None or bandwidth is None or latency is None:
        raise UsageError("parametric mode needs --bytes, --bandwidth and --latency (or use --topology ID)")
    rate = _qty(bandwidth, "rate", "--bandwidth")
    d = api.collective(
        op,
        ranks,
        _qty(size, "bytes", "--bytes"),
        rate,
        _qty(latency, "time", "--latency"),
        algorithm=algorithm,
        efficiency=efficiency,
        direction=direction,
    )
    keys = (*COST_KEYS, "op", "ranks", "bytes", "steps", "protocol", "algbw_gb_per_s", "busbw_gb_per_s")
    _emit_estimate({k: d[k] for k in keys}, as_json, f"{op} over {ranks} ranks")


SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="A workload knob set otherwise, KNOB=VALUE (repeatable), e.g. --set prefill_tp=4: to lay it on a "
        "topology it does not target, or at other degrees.",
    ),
]


def _knobs(settings: list[str] | None) -> dict[str, int | float]:
    """`--set tp=4 --set batch=2` → {"tp": 4, "batch": 2}; a value is a whole number or a decimal."""
    knobs: dict[str, int | float] = {}
    for text in settings or []:
        key, sep, value = text.partition("=")
        try:
            number: int | float = int(value) if value.strip().lstrip("-").isdigit() else float(value)
        except ValueError:
            number = float("nan")
        if not sep or not key.strip() or number != number:
            raise UsageError(f"--set {text!r}: expected KNOB=NUMBER, e.g. --set prefill_tp=4")
        knobs[key.strip()] = number
    return knobs


def _size_arg(text: str, option: str) -> int:
    """A byte count: a plain integer, nccl-tests' K / M / G suffixes (powers of 1024, as all_reduce_perf -b -e
    read them), or a quantity with its unit, e.g. 256MiB."""
    text = text.strip()
    if text[:-1].isdigit() and text[-1:] in ("K", "M", "G"):
        value: float = int(text[:-1]) * 1024 ** ("KMG".index(text[-1]) + 1)
    else:
        value = int(text) if text.isdigit() else _qty(text, "bytes", option)
    if value != int(value) or value < 1:
        raise UsageError(f"{option} {text!r}: expected a whole number of bytes of at least 1")
    return int(value)


# The table of a sweep, one row per size: each column's header and its cell.
SWEEP_COLUMNS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "bytes": lambda r: format_quantity(r["bytes"] / 1024, "KiB"),  # powers of two, as nccl-tests sizes
    "time": lambda r: format_quantity(r["seconds"], "s"),
    "algbw": lambda r: format_quantity(r["algbw_gb_per_s"], "GB/s"),
    "busbw": lambda r: format_quantity(r["busbw_gb_per_s"], "GB/s"),
    "algorithm": lambda r: r["algorithm"],
    "protocol": lambda r: r["protocol"],
}


def _collective_on_topology(
    topology_id: str,
    op: str,
    ranks: int,
    size: str | None,
    sweep: str | None,
    algorithm: str | None,
    as_json: bool,
    root: Any,
    plot: Path | None = None,
) -> None:
    root = lay_of(root).root
    _warn_if_stale(root)
    if plot is not None:
        output_path(plot, "--plot")
    if sweep is not None:
        if size is not None:
            raise UsageError("give --bytes or --sweep, not both")
        low_text, sep, high_text = sweep.partition(":")
        if not sep:
            raise UsageError(f"--sweep {sweep!r}: expected MIN:MAX, e.g. 8:8GiB")
        low, high = _size_arg(low_text, "--sweep MIN"), _size_arg(high_text, "--sweep MAX")
        rows = api.collective_sweep(topology_id, op, ranks, low, high, algorithm, root)
        if plot is not None:
            from ..core.files import atomic_write_bytes
            from ..views.charts import busbw_chart

            title = f"{op} over {ranks} ranks on {topology_id}" + (f" ({algorithm})" if algorithm else "")
            atomic_write_bytes(plot, busbw_chart(title, [("", rows)], model="busbw_gb_per_s", measured=None))
        if as_json:
            print_json({"topology_id": topology_id, "op": op, "ranks": ranks, "rows": rows, "caveat": CAVEAT})
            return
        out.print(records_table(SWEEP_COLUMNS, rows, title=f"{op} on {topology_id}"))
        out.print(CAVEAT)
        return
    if plot is not None:
        raise UsageError("--plot draws a curve: it needs --sweep MIN:MAX")
    if size is None:
        raise UsageError("--topology needs --bytes SIZE or --sweep MIN:MAX")
    d = api.collective_on_topology(topology_id, op, ranks, float(_size_arg(size, "--bytes")), algorithm, root)
    if as_json:
        print_json({**d, "caveat": CAVEAT})
        return
    keys = (
        "algorithm",
        "protocol",
        "seconds",
        "latency_seconds",
        "bandwidth_seconds",
        "algbw_gb_per_s",
        "busbw_gb_per_s",
        "ranks_per_domain",
        "domains",
        "dominant",
        "confidence",
    )
    _emit_estimate({k: d[k] for k in keys}, False, f"{op} over {ranks} ranks on {topology_id}")
    for a in d["assumptions"]:
        out.print(f"- {a}")


@estimate_app.command("transfer")
def estimate_transfer(
    size: Annotated[str, typer.Option("--bytes", help="Bytes to move, e.g. 10GB.")],
    bandwidth: Annotated[str, typer.Option("--bandwidth", help="Per-direction bandwidth, e.g. 400Gb/s.")],
    latency: Annotated[str, typer.Option("--latency", help="Fixed path overhead, e.g. 5us.")],
    as_json: JsonOpt = False,
) -> None:
    """One point-to-point transfer: fixed path overhead + bytes ÷ bandwidth."""
    d = api.transfer(
        _qty(size, "bytes", "--bytes"), _qty(bandwidth, "rate", "--bandwidth"), _qty(latency, "time", "--latency")
    )
    _emit_estimate({k: d[k] for k in COST_KEYS}, as_json, "transfer")


@estimate_app.command("memory")
def estimate_memory(
    params: Annotated[float, typer.Option("--params", parser=amount("--params"), help="Parameter count, e.g. 70B.")],
    layout_name: Annotated[
        str,
        typer.Option(
            "--layout",
            help="mixed-adam (18 B/param), mixed-adam-16 (ZeRO paper, 16 B/param), bf16-weights, fp8-weights, ...",
        ),
    ] = "mixed-adam",
    dp: Annotated[int, typer.Option("--dp", help="Data-parallel degree (ZeRO partitions over it).")] = 1,
    zero: Annotated[int, typer.Option("--zero", help="ZeRO stage 0-3 (FSDP = 3); training layouts only.")] = 0,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline-parallel degree.")] = 1,
    ep: Annotated[int, typer.Option("--ep", help="Expert-parallel degree (splits --expert-params).")] = 1,
    expert_params: Annotated[
        float,
        typer.Option("--expert-params", parser=amount("--expert-params"), help="Parameters held in experts, e.g. 64B."),
    ] = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """Bytes of model state per rank (`bytes`): 18 B/param for mixed-precision Adam, 16 B/param in the ZeRO
    paper's layout, split over TP × PP (experts over EP) and partitioned by ZeRO stage over DP."""
    data = api.memory(params, layout_name, dp=dp, zero=zero, tp=tp, pp=pp, ep=ep, expert_params=expert_params)
    _emit_estimate(data, as_json, "memory per rank")


@estimate_app.command("activations")
def estimate_activations(
    seq: Annotated[
        int, typer.Option("--seq", parser=amount("--seq", "count", whole=True), help="Sequence length s, e.g. 8k.")
    ],
    batch: Annotated[int, typer.Option("--batch", help="Micro-batch size b.")],
    hidden: Annotated[int, typer.Option("--hidden", help="Hidden size h.")],
    heads: Annotated[int, typer.Option("--heads", help="Attention (query) heads a.")],
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel degree t.")] = 1,
    sequence_parallel: Annotated[
        bool, typer.Option("--sequence-parallel/--no-sequence-parallel", help="Sequence parallelism with TP.")
    ] = False,
    recompute: Annotated[str, typer.Option("--recompute", help="none, selective or full.")] = "none",
    layers: Annotated[int, typer.Option("--layers", help="Layers per stage × this is `bytes`.")] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Activation bytes per transformer layer (`bytes_per_layer`) after Korthikanti et al.: sbh(34 + 5as/h)."""
    data = api.activations(
        seq, batch, hidden, heads, layers, tp=tp, sequence_parallel=sequence_parallel, recompute=recompute
    )
    _emit_estimate(data, as_json, "activations")


@estimate_app.command("inference-memory")
def estimate_inference_memory(
    params: Annotated[float, typer.Option("--params", parser=amount("--params"), help="Parameter count, e.g. 70B.")],
    layers: Annotated[int, typer.Option("--layers")],
    kv_heads: Annotated[int, typer.Option("--kv-heads", help="KV heads (grouped-query attention), not query heads.")],
    head_dim: Annotated[int, typer.Option("--head-dim")],
    context: Annotated[
        int,
        typer.Option(
            "--context", parser=amount("--context", "count", whole=True), help="Tokens per sequence, e.g. 128k."
        ),
    ],
    dtype: Annotated[str, typer.Option("--dtype", help="bf16, fp8, fp16, fp32 (weights and KV).")] = "bf16",
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel degree of one serving group.")] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Sequences held at once.")] = 1,
    memory_text: Annotated[
        str | None, typer.Option("--memory", help="Accelerator memory, e.g. 80GB (for max concurrent sequences).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Per rank: weights / TP + KV cache of concurrency × context tokens; with --memory, the most sequences of that
    context one TP group can hold."""
    capacity = None if memory_text is None else _qty(memory_text, "bytes", "--memory")
    data = api.inference_memory(params, layers, kv_heads, head_dim, context, dtype, tp, concurrency, capacity)
    _emit_estimate(data, as_json, "inference memory")


@estimate_app.command("step")
def estimate_step(
    topology_id: Annotated[str, typer.Argument(help="Reference or cluster id.")],
    workload_id: Annotated[str, typer.Argument(help="Workload id (models/workloads/).")],
    mfu: Annotated[
        float | None,
        typer.Option(
            "--mfu",
            help="What-if: products and attention at this fraction of peak instead of the calibrated throughput "
            "(models/calibration/throughput.yaml); every output says it was given.",
        ),
    ] = None,
    settings: SetOpt = None,
    as_json: JsonOpt = False,
    root: RootOpt = None,
) -> None:
    """Memory per rank and whether it fits; compute, exposed communication and step time (TTFT / TPOT for
    inference). A figure that needs an unknown registry field is unknown, and the field is named."""
    from ..estimate.step import fit_verdict

    root = lay_of(root).root
    _warn_if_stale(root)
    data = api.step(topology_id, workload_id, mfu, root, _knobs(settings))
    if as_json:
        print_json(data)
        return
    data.pop("caveat")
    out.print(fit_verdict(data))
    shown = {k: v for k, v in data.items() if not isinstance(v, dict | list) and k not in ("mfu_note", "what_if")}
    out.print(_estimate_table(shown, f"{workload_id} on {topology_id}: memory and step time"))
    for m in data["missing"]:
        out.print(f"missing: {m}")
    for a in data["assumptions"]:
        out.print(f"assumed: {a.removeprefix('assumed: ')}")
    for c in data.get("calibration", []):
        out.print(f"calibration: {c}")
    if data.get("what_if"):
        out.print(f"WHAT-IF: {data['what_if']}")
    if data.get("teaching"):
        out.print(f"teaching example: {data['teaching']}")


@estimate_app.command("kv")
def estimate_kv(
    layers: Annotated[int, typer.Option("--layers")],
    kv_heads: Annotated[int, typer.Option("--kv-heads", help="KV heads (grouped-query attention), not query heads.")],
    head_dim: Annotated[int, typer.Option("--head-dim")],
    dtype: Annotated[str, typer.Option("--dtype", help="bf16, fp8, fp16, fp32")],
    tokens: Annotated[int, typer.Option("--tokens", parser=amount("--tokens", "count", whole=True), help="e.g. 128k.")],
    as_json: JsonOpt = False,
) -> None:
    """KV-cache bytes per token and for T tokens: 2 × layers × KV heads × head dim × bytes."""
    from ..estimate.sizing import kv_cache

    _emit_estimate(kv_cache(layers, kv_heads, head_dim, dtype, tokens), as_json, "KV cache")


@estimate_app.command("capacity")
def estimate_capacity(
    rps: Annotated[float, typer.Option("--requests-per-second")],
    output_tokens: Annotated[float, typer.Option("--output-tokens", parser=amount("--output-tokens", "count"))],
    group_tps: Annotated[
        float, typer.Option("--group-tokens-per-second", parser=amount("--group-tokens-per-second", "count"))
    ],
    group_size: Annotated[int, typer.Option("--group-size")],
    headroom: Annotated[float, typer.Option("--headroom", help="Spare fraction, e.g. 0.2.")] = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """Fleet capacity: groups = ceil(R × T × (1 + headroom) ÷ G); accelerators = groups × group size."""
    _emit_estimate(api.capacity(rps, output_tokens, group_tps, group_size, headroom), as_json, "capacity")


# The per-phase table of `estimate workload`: each column's header and its cell.
PHASE_COLUMNS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "phase": lambda p: p["phase"],
    "collective": lambda p: p["collective"],
    "n": lambda p: format_quantity(p["group_size"]),
    "network / tier": lambda p: f"{p['network']} / {p['tier']}",
    "bytes/rank": lambda p: format_quantity(p["bytes_per_rank"], "B"),
    # What the time is computed from: the buffer times the algorithm's wire factor (e.g. 2(n−1)/n for a ring).
    "on wire/rank": lambda p: format_quantity(p["bytes_on_wire_per_rank"], "B"),
    "eff. bw per direction": lambda p: format_quantity(p["effective_gbps"] or None, "Gb/s"),
    "latency": lambda p: format_quantity(p["latency_seconds"], "s"),
    "bandwidth": lambda p: format_quantity(p["bandwidth_seconds"], "s"),
    "queueing": lambda p: format_quantity(p["queueing_seconds"], "s"),
    "× count": lambda p: format_quantity(p["count"], "count"),
    "total": lambda p: format_quantity(p["total_seconds"], "s"),
    "dominant": lambda p: p["dominant"],
    "confidence": lambda p: p["confidence"],
}


@estimate_app.command("workload")
def estimate_workload(
    topology_id: Annotated[str, typer.Argument(help="Reference or cluster id.")],
    workload_id: Annotated[str, typer.Argument(help="Workload id (models/workloads/).")],
    settings: SetOpt = None,
    as_json: JsonOpt = False,
    root: RootOpt = None,
) -> None:
    """The per-phase table of a workload laid onto a topology's installed wiring."""
    root = lay_of(root).root
    _warn_if_stale(root)
    data = api.workload_report(topology_id, workload_id, root, _knobs(settings))
    if as_json:
        print_json(data)
        return
    out.print(records_table(PHASE_COLUMNS, data["phases"], title=f"{workload_id} on {topology_id}"))
    out.print(data["memory_fit"]["verdict"])
    rv = data["revealing"]
    out.print(
        f"To make progress on {rv['for']}: {format_quantity(rv['accelerators_per_progress'])} accelerators must "
        "communicate; "
        f"{'fits' if rv['fits_in_one_domain'] else 'does not fit'} in one scale-up domain of "
        f"{format_quantity(rv['scale_up_domain_size'])}."
    )
    for f in data["failures"]:
        out.print(f"failure: {f['failure']}: route {'survives' if f['route_survives'] else 'lost'}; {f['explanation']}")
    if data["failures"]:
        out.print(data["failures"][0]["not_established"])
    out.print(data["caveat"])
