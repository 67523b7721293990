"""The planner's speed against its budgets (issue 28), printed as a table. Benchmarks, not timed tests.

Run from the repository root after `dvc repro` (it reads the built registry and topologies):
    python benchmarks/plan.py [--calculon PATH] [--ray] [--skip-405b] [--only CASE] [--readme]

Cases (budgets from issue 28; the machine is shared, so CPU seconds of this process are the steadier figure
beside the wall time):
- evaluation: every legal layout of the 70B dense model (llama70b-train-tp8-pp4-dp32's) at 1,024 GPUs of
  meta-style-h100-24576, evaluated once each on the analytical per-tier costs in one process (no pruning, so
  every layout is costed): layouts per CPU second, ≥ 2,000. Then the same search with pruning, as `plan train`
  runs it.
- 405B: `plan train` for Llama 3 405B (models/definitions/llama3-405b.yaml) on 16,384 GPUs of
  meta-style-h100-24576 over the full space (≥ 20,000 layouts), the top 5 routed per physical link: ≤ 60 s.
- --calculon PATH: Calculon (a local checkout of calculon-ai/calculon, run beside the project, never installed
  or committed) on the same model shape, an H100 NVLink-8 system (its systems/h100_80g_nvl8.json) and the same
  layout space at 1,024 GPUs and 1,024 sequences of 4,096 tokens (TP, PP, DP, micro-batch, recompute none /
  attn_only / full), one `Llm.compile` +
  `run` per layout; our evaluation of the same layouts (ZeRO-1, 1F1B, selective for attn_only); both rates and
  the ratio, ≥ 10×. Calculon imports pandas only for a module the benchmark does not use: a stand-in is put in
  its place when pandas is not installed.
- --ray: a 103,092-layout search (the 70B model at 1,024, 2,048 and 4,096 GPUs, 1,024 sequences of 4,096
  tokens) in-process and on a local Ray instance with 2 workers (started and warmed before the clock starts);
  the ratio of the rates, ≥ 1.6×. Both must give the same rows. Beside it, CPU seconds: each worker's
  evaluation, the driver's whole run, and the driver's share spent sending batches and gathering their results.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CLUSTER = "meta-style-h100-24576"
MODEL_70B = "llama70b-train-tp8-pp4-dp32"
MODEL_405B = "models/definitions/llama3-405b.yaml"
RESULTS: list[tuple[str, str, str, str]] = []


def _record(case: str, figure: str, budget: str, ok: bool | None) -> None:
    RESULTS.append((case, figure, budget, "—" if ok is None else ("met" if ok else "NOT MET")))
    print(f"{case}: {figure} (budget {budget})", flush=True)


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    return time.perf_counter() - t[0], time.process_time() - t[1]


def _setup(lay: Any, model: str, views: Any, **options: Any) -> tuple[Any, Any, list[Any]]:
    from fabricref.plan import evaluate, space
    from fabricref.plan.train import place, prepare

    spec = space.load_model_spec(lay, model)
    summary = prepare(views, CLUSTER, spec.shape.dtype)
    req = space.train_request(spec, CLUSTER, summary.accelerators, **options)
    shape = space.Cluster(summary.id, summary.reference, summary.accelerators, summary.domain_size)
    layouts, rejected = space.training_layouts(req, shape)
    ev = evaluate.TrainEvaluator(spec, req.seq, req.global_batch, summary)
    layouts = place(views(CLUSTER), ev, layouts, rejected)
    return req, ev, layouts


def evaluation(lay: Any, views: Any) -> None:
    from fabricref import api
    from fabricref.plan.layout_eval import forget

    _, ev, layouts = _setup(lay, MODEL_70B, views, gpus=(1024,))
    forget()
    t = _clock()
    for x in layouts:
        ev.evaluate(x)
    wall, cpu = _since(t)
    rate = len(layouts) / cpu
    _record(
        "evaluation, 70B on 1,024 GPUs of meta-style-h100-24576",
        f"{len(layouts):,} layouts evaluated in {cpu:.1f} CPU s ({wall:.1f} s wall): {rate:,.0f} layouts/s",
        "≥ 2,000 layouts/s on one core",
        rate >= 2000,
    )
    t = _clock()
    r = api.plan_train(MODEL_70B, CLUSTER, root=lay.root, gpus=(1024,), route_top=0, views=views)
    wall, cpu = _since(t)
    c = r.counts
    _record(
        "search with pruning, same space",
        f"{c['legal']:,} layouts ({c['not_fitting']:,} do not fit, {c['pruned']:,} pruned, {c['evaluated']:,} "
        f"evaluated) in {cpu:.1f} CPU s ({wall:.1f} s wall): {c['legal'] / cpu:,.0f} layouts/s",
        "—",
        None,
    )


def llama405b(lay: Any, views: Any) -> None:
    from fabricref import api

    t = _clock()
    r = api.plan_train(
        MODEL_405B, CLUSTER, root=lay.root, gpus=(16384,), global_batch=2048, seq=8192, top=5, views=views
    )
    wall, cpu = _since(t)
    c, tm = r.counts, r.timings
    routed = sum(1 for x in r.top if x["costing"] == "routed per link")
    _record(
        "plan train, Llama 3 405B on 16,384 GPUs",
        f"{c['legal']:,} layouts, top {len(r.top)} ({routed} routed per link): {wall:.1f} s wall, {cpu:.1f} CPU s "
        f"(setup {tm['setup']:.1f}, search {tm['search']:.1f}, routing {tm['route']:.1f} s wall); best "
        f"{r.top[0]['layout_id']} {r.top[0]['step_seconds']:.2f} s",
        "≥ 20,000 layouts in ≤ 60 s incl. routing the top 5",
        c["legal"] >= 20000 and wall <= 60 and routed == len(r.top),
    )


def calculon(lay: Any, views: Any, path: Path) -> None:
    """Both models over the same (TP, PP, DP, micro-batch, recompute) points."""
    from fabricref.plan import space

    if not (path / "calculon" / "llm" / "llm.py").is_file():
        raise SystemExit(f"--calculon {path}: not a calculon-ai/calculon checkout (no calculon/llm/llm.py)")
    sys.path.insert(0, str(path))
    try:
        import pandas  # noqa: F401
    except ImportError:
        sys.modules["pandas"] = types.ModuleType("pandas")  # used only by calculon.llm.all_executions
    import calculon as calc
    from calculon.llm import Llm
    from calculon.system import System

    gpus, batch, seq = 1024, 1024, 4096
    app = Llm.Application(
        {"hidden": 8192, "feedforward": 28672, "seq_size": seq, "attn_heads": 64, "attn_size": 128, "num_blocks": 80}
    )
    system = System(calc.io.read_json_file(str(path / "systems" / "h100_80g_nvl8.json")))
    modes = {"none": "none", "selective": "attn_only", "full": "full"}
    _, ev, layouts = _setup(
        lay, MODEL_70B, views, gpus=(gpus,), global_batch=batch, seq=seq, zero=(1,), schedule=("1f1b",), cp=(1,)
    )
    layouts = [x for x in layouts if x.ep == 1]

    def execution(x: space.Layout) -> dict[str, Any]:
        return {
            "num_procs": gpus, "tensor_par": x.tp, "pipeline_par": x.pp, "data_par": x.dp, "tensor_par_net": 0,
            "pipeline_par_net": 1, "data_par_net": 1, "batch_size": batch, "microbatch_size": x.micro_batch,
            "datatype": "float16", "fused_activation": True, "attention_type": "multihead",
            "activation_recompute": modes[x.recompute], "pipeline_interleaving": 1, "optimizer_sharding": True,
            "tensor_par_comm_type": "rs_ag", "tensor_par_overlap": "none", "seq_par_ag_redo": False,
            "data_par_overlap": False, "weight_offload": False, "activations_offload": False,
            "optimizer_offload": False, "training": True,
        }  # fmt: skip

    log = logging.Logger("calculon")
    t = _clock()
    good = 0
    for x in layouts:
        try:
            m = Llm(app, log)
            m.compile(system, Llm.Execution.from_json(execution(x)))
            m.run(system)
            good += 1
        except Llm.Error:
            pass
    _, c_cpu = _since(t)
    t = _clock()
    for x in layouts:
        ev.bound(x)
        ev.evaluate(x)
    _, o_cpu = _since(t)
    theirs, ours = len(layouts) / c_cpu, len(layouts) / o_cpu
    _record(
        "Calculon, same 70B space at 1,024 GPUs",
        f"{len(layouts):,} layouts: Calculon {theirs:,.0f}/s ({good:,} it accepts; {c_cpu:.1f} CPU s), fabricref "
        f"{ours:,.0f}/s (bound + evaluation; {o_cpu:.1f} CPU s): {ours / theirs:.1f}×",
        "≥ 10×",
        ours / theirs >= 10,
    )


def _digest(rows: list[dict[str, Any]]) -> str:
    """SHA-256 of the rows as JSON (keys sorted): equal digests, equal tables."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def ray(lay: Any, views: Any) -> None:
    from fabricref import api
    from fabricref.plan import engines

    opts = {"gpus": (1024, 2048, 4096), "global_batch": 1024, "seq": 4096, "route_top": 0, "max_layouts": 200_000}
    t = _clock()
    local = api.plan_train(MODEL_70B, CLUSTER, root=lay.root, views=views, **opts)
    local_s, local_cpu = _since(t)
    # Each search starts as a user's would, in a process not holding another search's 100,000 rows (kept alive,
    # they make every garbage collection of the next search walk them): the rows are compared by a digest.
    n, local_search, local_rows = local.counts["legal"], local.timings["search"], _digest(local.rows)
    del local
    gc.collect()
    engine = engines.engine("ray", workers=2)
    try:
        engine.warm()
        t = _clock()
        remote = api.plan_train(MODEL_70B, CLUSTER, root=lay.root, views=views, engine=engine, **opts)
        remote_s, driver_cpu = _since(t)
        spent = sorted(engine.worker_cpu.values(), reverse=True)  # what each worker's tasks took, CPU seconds
        gathering = engine.driver_cpu  # the driver's CPU seconds sending batches and gathering their results
    finally:
        engine.close()
    same = _digest(remote.rows) == local_rows
    speedup = local_search / remote.timings["search"]
    # On two idle cores the search would take at most the busiest worker's CPU time plus all the driver's (as if
    # none of the driver's work overlapped the workers'): a conservative projection beside the measured one.
    idle = local_cpu / (max(spent) + driver_cpu) if spent else float("nan")
    _record(
        "Ray, 2 workers vs one process",
        f"{n:,} layouts: in-process {local_s:.1f} s (search {local_search:.1f}; {local_cpu:.1f} CPU s), "
        f"Ray {remote_s:.1f} s (search {remote.timings['search']:.1f}; workers "
        f"{' + '.join(f'{c:.1f}' for c in spent)} CPU s, driver {driver_cpu:.1f} of which sending and gathering "
        f"{gathering:.2f}): {speedup:.2f}× on the search; "
        f"at least {idle:.2f}× on two idle cores (one process's CPU ÷ busiest worker's + driver's); same rows: {same}; "
        f"load average {os.getloadavg()[0]:.1f}",
        "≥ 1.6× on a 100,000-layout search",
        speedup >= 1.6 and same and n >= 100_000,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calculon", type=Path, help="A local checkout of calculon-ai/calculon to compare with.")
    parser.add_argument("--ray", action="store_true", help="Also time the Ray engine (2 local workers).")
    parser.add_argument("--skip-405b", action="store_true", help="Skip the Llama 3 405B search.")
    parser.add_argument("--only", choices=("evaluation", "405b", "calculon", "ray"), help="Run one case.")
    parser.add_argument(
        "--readme", action="store_true", help="also write the figures into benchmarks/README.md (its section alone)"
    )
    args = parser.parse_args()
    wanted = {args.only} if args.only else {"evaluation", "405b", "calculon", "ray"}
    from fabricref.core.paths import layout
    from fabricref.estimate.traffic import Views

    lay = layout(ROOT)
    views = Views(lay)
    load_before = os.getloadavg()[0]
    print(f"load average {load_before:.1f} on {os.cpu_count()} CPUs", flush=True)
    if "evaluation" in wanted:
        evaluation(lay, views)
    if "405b" in wanted and not args.skip_405b:
        llama405b(lay, views)
    if "calculon" in wanted and args.calculon:
        calculon(lay, views, args.calculon)
    if "ray" in wanted and (args.ray or args.only == "ray"):
        ray(lay, views)
    views.close()
    width = max(len(r[0]) for r in RESULTS)
    lines = [f"{os.cpu_count()} CPUs, load average before {load_before:.1f}, after {os.getloadavg()[0]:.1f}"]
    for case, figure, budget, verdict in RESULTS:
        lines += [f"{case:<{width}}  {verdict:<8} {budget}", f"{'':<{width}}  {figure}"]
    print("\n" + "\n".join(lines))
    if args.readme:
        from readme import write_figures  # benchmarks/readme.py, beside this script

        write_figures("The planner", "\n".join(lines))
    return 0 if all(r[3] != "NOT MET" for r in RESULTS) else 1


if __name__ == "__main__":
    raise SystemExit(main())
