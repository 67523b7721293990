"""`plan train` and `plan serve`: search the layouts of a training job or a service on a cluster (→ api)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from .. import api
from ..core.format import format_quantity
from ..errors import UsageError
from .app import app
from .options import amount
from .output import JsonOpt, RootOpt, lay_of, make_table, out, print_json, readable, records_table

plan_app = typer.Typer(
    no_args_is_help=True,
    help="Search parallel layouts: fastest, fitting, fewest accelerator-hours (local, or on Ray).",
)
app.add_typer(plan_app, name="plan")

ModelOpt = Annotated[
    str, typer.Option("--model", help="A workload id (models/workloads/) or a YAML file with a `model:` definition.")
]
ClusterOpt = Annotated[str, typer.Option("--cluster", help="Cluster or reference id (its installed wiring).")]
TopOpt = Annotated[int, typer.Option("--top", help="Layouts shown, and routed per physical link.")]
SaveOpt = Annotated[
    str | None,
    typer.Option("--save", help="Save the best layout as models/workloads/ID.yaml with its knobs in params.yaml."),
]
HeadroomOpt = Annotated[
    float | None,
    typer.Option("--memory-headroom", help="Fraction of accelerator memory kept free (default params.yaml's)."),
]


def _tokens(flag: str, help: str) -> Any:
    """An option taking a whole number of tokens as people write it (8k, 4096; cli/options.py `amount`)."""
    return typer.Option(flag, parser=amount(flag, whole=True), help=help)


def _ints(text: str | None, option: str) -> tuple[int, ...] | None:
    """'8' or '4,8' → (4, 8); anything else is bad usage naming the option."""
    if text is None:
        return None
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected a whole number or a comma-separated list, e.g. 4,8") from None
    for v in values:
        if v < (0 if option == "--zero" else 1) or v > 2**53:
            raise UsageError(f"{option} {v}: expected a whole number ≥ {0 if option == '--zero' else 1}")
    return values


def _words(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(p.strip() for p in text.split(",") if p.strip())


def _seconds(text: str | None, option: str) -> float | None:
    """'2s', '500ms', '40us' → seconds (a bare number is seconds)."""
    return None if text is None else amount(option, "time")(text.strip())


@contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A rich progress bar on stderr (layouts done, best so far, rate) for a search on a terminal; silent else."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True, highlight=False, markup=False)
    columns = (
        TextColumn("{task.fields[doing]}"),
        BarColumn(bar_width=20),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("best so far: {task.fields[best]}"),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("search", total=None, best="—", rate="", doing="preparing the cluster and the space")
        started: dict[str, float] = {}

        def update(doing: str, done: int, total: int, best: str) -> None:
            """Layouts done (evaluated, pruned or not fitting), the rate of the current pass, the best so far."""
            now = time.perf_counter()
            first = started.setdefault(doing, now)
            if doing == "evaluating" and "base" not in started:
                started["base"] = done
            base = started.get("base", 0) if doing == "evaluating" else 0
            rate = f"{(done - base) / (now - first):,.0f}/s" if now > first and done > base else ""
            bar.update(task, completed=done, total=total, best=best or "—", rate=rate, doing=f"layouts {doing}")

        yield update


@plan_app.command("train")
def plan_train(
    model: ModelOpt,
    cluster: ClusterOpt,
    gpus: Annotated[
        str | None, typer.Option("--gpus", help="GPUs of the job, or a list to search (default: the workload's).")
    ] = None,
    global_batch: Annotated[
        int | None, typer.Option("--global-batch", help="Sequences per step (default: the workload's).")
    ] = None,
    seq: Annotated[int | None, _tokens("--seq", "Tokens per sequence (default: the workload's), e.g. 8k.")] = None,
    objective: Annotated[
        str, typer.Option("--objective", help="step, tokens-per-second or gpu-hours (accelerator-hours, no prices).")
    ] = "step",
    top: TopOpt = 10,
    max_layouts: Annotated[
        int, typer.Option("--max-layouts", help="Refuse a search with more legal layouts than this.")
    ] = 200_000,
    engine: Annotated[str, typer.Option("--engine", help="local (in this process) or ray.")] = "local",
    address: Annotated[
        str | None, typer.Option("--address", help="With --engine ray: HOST:PORT of an existing Ray cluster.")
    ] = None,
    workers: Annotated[int, typer.Option("--workers", help="With --engine ray and no --address: CPUs.")] = 2,
    tp: Annotated[str | None, typer.Option("--tp", help="Only these TP degrees, e.g. 4,8.")] = None,
    pp: Annotated[str | None, typer.Option("--pp", help="Only these PP degrees.")] = None,
    cp: Annotated[str | None, typer.Option("--cp", help="Only these context-parallel degrees.")] = None,
    ep: Annotated[str | None, typer.Option("--ep", help="Only these expert-parallel degrees.")] = None,
    zero: Annotated[str | None, typer.Option("--zero", help="Only these ZeRO stages (0-3).")] = None,
    recompute: Annotated[str | None, typer.Option("--recompute", help="Only: none, selective, full.")] = None,
    schedule: Annotated[str | None, typer.Option("--schedule", help="Only: 1f1b, interleaved.")] = None,
    micro_batch: Annotated[str | None, typer.Option("--micro-batch", help="Only these micro-batch sizes.")] = None,
    memory_headroom: HeadroomOpt = None,
    no_prune: Annotated[bool, typer.Option("--no-prune", help="Evaluate every fitting layout.")] = False,
    save: SaveOpt = None,
    as_json: JsonOpt = False,
    root: RootOpt = None,
) -> None:
    """Search the TP × PP × DP × CP (× EP) layouts, micro-batches, ZeRO stages, recompute modes and pipeline
    schedules of a training job; show the best, the Pareto front of step time vs memory headroom, and why
    nothing else. Every evaluated layout is written to plans/ (the `plans` table of `fabricref query`)."""
    lay = lay_of(root)
    options = {
        "gpus": _ints(gpus, "--gpus"),
        "global_batch": global_batch,
        "seq": seq,
        "objective": objective,
        "top": top,
        "max_layouts": max_layouts,
        "tp": _ints(tp, "--tp"),
        "pp": _ints(pp, "--pp"),
        "cp": _ints(cp, "--cp"),
        "ep": _ints(ep, "--ep"),
        "zero": _ints(zero, "--zero"),
        "recompute": _words(recompute),
        "schedule": _words(schedule),
        "micro_batch": _ints(micro_batch, "--micro-batch"),
    }
    from ..plan.engines import engine as make_engine
    from ..plan.space import OBJECTIVES

    if objective not in OBJECTIVES:
        raise UsageError(f"--objective {objective!r}: expected one of {', '.join(OBJECTIVES)}")
    eng = make_engine(engine, address, workers)
    try:
        with _progress(not as_json and sys.stderr.isatty()) as progress:
            result = api.plan_train(
                model, cluster, root=lay.root, engine=eng, progress=progress, memory_headroom=memory_headroom,
                prune=not no_prune, **options,
            )  # fmt: skip
    finally:
        eng.close()
    from ..plan.train import save_training

    _keep(lay, result, save, save_training, as_json, engine)


@plan_app.command("serve")
def plan_serve(
    model: ModelOpt,
    cluster: ClusterOpt,
    requests_per_second: Annotated[
        float | None, typer.Option("--requests-per-second", help="Demand (default: the workload's).")
    ] = None,
    prompt: Annotated[int | None, _tokens("--prompt", "Prompt tokens per request, e.g. 8k.")] = None,
    output: Annotated[int | None, _tokens("--output", "Output tokens per request, e.g. 8k.")] = None,
    ttft_p50: Annotated[
        str | None, typer.Option("--ttft-p50", help="Time-to-first-token target, e.g. 2s or 500ms.")
    ] = None,
    tpot: Annotated[str | None, typer.Option("--tpot", help="Time-per-output-token target, e.g. 50ms.")] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="Only: aggregated, disaggregated.")] = None,
    tp: Annotated[str | None, typer.Option("--tp", help="Only these TP degrees per group.")] = None,
    top: TopOpt = 10,
    memory_headroom: HeadroomOpt = None,
    save: SaveOpt = None,
    as_json: JsonOpt = False,
    root: RootOpt = None,
) -> None:
    """Search the serving layouts (TP per group, aggregated or disaggregated, batch) of a model for a demand and
    latency targets; rank by accelerators, show the Pareto front of accelerators vs request latency."""
    lay = lay_of(root)
    result = api.plan_serve(
        model,
        cluster,
        root=lay.root,
        requests_per_second=requests_per_second,
        prompt=prompt,
        output=output,
        ttft_p50=_seconds(ttft_p50, "--ttft-p50"),
        tpot=_seconds(tpot, "--tpot"),
        modes=_words(mode),
        tp=_ints(tp, "--tp"),
        top=top,
        memory_headroom=memory_headroom,
    )
    from ..plan.serve import save_serving

    _keep(lay, result, save, save_serving, as_json, "local")


def _keep(lay: Any, result: Any, save: str | None, saver: Any, as_json: bool, engine: str) -> None:
    """Write the plan's rows to plans/, save its best layout as workload `save` if asked (`saver`), and report."""
    from ..plan import store

    where = lay.relative(store.write(lay, result))
    saved = None
    if save:
        row, files = saver(lay, result, save)
        files = [lay.relative(f) for f in files]
        saved = {"workload": save, "layout_id": row["layout_id"], "rank": row["rank"], "files": files}
    if as_json:
        print_json({**api.plan_record(result), "parquet": where, "saved": saved, "engine": engine})
        return
    c = result.counts
    _tables(result)
    if result.kind == "train":
        t = result.timings
        rate = c["legal"] / t["search"] if t.get("search") else 0.0
        out.print(
            f"{c['legal']:,} legal layouts: {c['not_fitting']:,} do not fit, {c['pruned']:,} pruned as dominated, "
            f"{c['evaluated']:,} evaluated; searched in {t['search']:.1f} s ({engine}, {rate:,.0f} layouts/s), the "
            f"top {len(result.top)} routed per link in {t['route']:.1f} s, {result.seconds:.1f} s in all."
        )
    else:
        out.print(
            f"{c['legal']:,} serving layouts: {c['not_fitting']:,} do not fit, {c['missing_targets']:,} miss the "
            f"targets; in {result.seconds:.1f} s."
        )
    if result.rejections:
        out.print("Not searched: " + "; ".join(result.rejections))
    winner = result.top[0] if result.top else None
    if winner and winner.get("hot_links"):
        links = json.loads(winner["hot_links"])
        rows = [
            [x["phase"], f"{x['source']} – {x['target']}", x["tier"], format_quantity(x["utilization"])] for x in links
        ]
        out.print(make_table("phase", "link", "tier", "utilization", title=f"hot links of {winner['layout_id']}",
                             rows=rows))  # fmt: skip
    for note in result.notes:
        out.print(f"note: {note}")
    out.print(f"rows: {where} (fabricref query \"SELECT * FROM plans WHERE plan_id = '{result.plan_id}'\")")
    if saved:
        out.print(
            f"saved rank {saved['rank']} ({saved['layout_id']}) as workload {saved['workload']}: "
            f"{', '.join(saved['files'])}; `dvc repro` carries it"
        )


def _must_talk(r: dict[str, Any]) -> str:
    n = r["largest_group_domains"]
    return (
        f"{r['must_talk']:,} ({r['largest_group_phase']} {r['largest_group']} over {n} domain{'s' if n != 1 else ''})"
    )


def _by_key(key: str) -> Callable[[dict[str, Any]], Any]:
    """A column showing one result value in the unit its key names (`readable`)."""
    return lambda r: readable(r[key], key)


# The tables of `plan train` and `plan serve` (the top K; their Pareto fronts show a few of these columns).
TRAIN_COLUMNS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "rank": lambda r: str(r["rank"]),
    "layout": lambda r: r["layout_id"],
    "step": _by_key("step_seconds"),
    "routed step": _by_key("routed_step_seconds"),
    "exposed comm": _by_key("exposed_communication_seconds"),
    "memory/rank": _by_key("memory_per_rank_bytes"),
    "headroom": _by_key("headroom_bytes"),
    "dominant": lambda r: r["dominant"],
    "must talk (largest group)": _must_talk,
    "confidence": lambda r: r["confidence"],
    "costing": lambda r: r["costing"],
}
SERVE_COLUMNS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "rank": lambda r: str(r["rank"]),
    "layout": lambda r: r["layout_id"],
    "GPUs": lambda r: f"{r['gpus']:,}",
    "groups (prefill:decode)": lambda r: (
        str(r["groups"]) if r["mode"] == "aggregated" else f"{r['prefill_groups']}:{r['decode_groups']}"
    ),
    "TTFT": _by_key("ttft_seconds"),
    "TPOT": _by_key("tpot_seconds"),
    "request": _by_key("request_seconds"),
    "memory/rank": _by_key("memory_per_rank_bytes"),
    "dominant": lambda r: r["dominant"],
    "must talk": lambda r: str(r["must_talk"]),
    "confidence": lambda r: r["confidence"],
    "costing": lambda r: r["costing"],
}


def _tables(result: Any) -> None:
    """The top K and the Pareto front of a plan."""
    q = result.request
    if result.kind == "train":
        columns, front = TRAIN_COLUMNS, ("layout", "step", "headroom", "rank")
        title = f"{q['model']} on {q['cluster']}: top {len(result.top)} by {q['objective']}"
        front_title = "Pareto front: step time vs memory headroom"
    else:
        columns, front = SERVE_COLUMNS, ("layout", "GPUs", "request")
        title = f"{q['model']} on {q['cluster']}: {q['requests_per_second']:g} requests/s, {q['prompt']} in / "
        title += f"{q['output']} out"
        front_title = "Pareto front: accelerators vs request latency"
    out.print(records_table(columns, result.top, title=title))
    out.print(records_table({k: columns[k] for k in front}, result.pareto, title=front_title))
