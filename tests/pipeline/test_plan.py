"""The planner (issue 28): a search checked by hand, no legal layout explained, Ray's table equal to the in-process
one, and what the CLI writes (plans/ as a query table, --save as a workload the pipeline loads)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
from pathlib import Path

import pytest
from fabricref.core.paths import Layout
from fabricref.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
SMALL = "illustrative-h100-64"  # 8 DGX H100: 8 scale-up domains of 8 GPUs, 80 GB each
MODEL_70B = "llama70b-train-tp8-pp4-dp32"  # its model: 70e9 params, 80 layers, hidden 8192, 64 heads of 128
GB = 1e9


def _counted_params() -> tuple[int, int]:
    """The 70B workload's weights as the step model counts them (estimate/flops.py `from_workload`, step.py
    `_stage_params`): its MLP width f is solved from the parameter count, then every layer holds the attention
    projections, h·(64·128 + 2·8·128) + 64·128·h, and a gated MLP of 3·h·f; no vocabulary is stated."""
    h, layers = 8192, 80
    attention = h * (64 * 128 + 2 * 8 * 128) + 64 * 128 * h
    assert attention == 150_994_944
    f = int((70e9 / layers - attention) / (3 * h))
    assert f == 29_459
    params = layers * (attention + 3 * h * f)
    assert params == 69_998_346_240
    return params, f


def test_a_70b_model_on_64_h100_has_the_best_layout_worked_out_by_hand(built_registry: Layout) -> None:
    """70B on the 64 H100 of illustrative-h100-64, 64 sequences of 4,096 tokens per step, TP 8, ZeRO-3, selective
    recompute, micro-batch 1 (the filters leave PP, DP and the pipeline schedule to search). By the model's own
    formulas:

    Memory per rank (estimate/step.py, memory.py): ZeRO-3 partitions the 18 B/param of mixed-precision Adam over
    TP × PP × DP = 64 ranks, whatever the split; the activations a layer keeps with sequence parallelism, selective
    recompute and a fused attention kernel are, per micro-batch (s = 4096, h = 8192, t = 8, f = 29,459):
      norm inputs 2·2·s·h/t + QKV input 2·s·h/t + Q, K, V 2·s·(64 + 2·8)·128/t + attention output 2·s·h/t
      + softmax statistics 4·64/t·s + MLP input 2·s·h/t + MLP intermediates 2·s·f/t·3 = 143,057,920 B,
    times the layers of the rank and the micro-batches in flight (1 without PP): 31.13 GB at PP 1 — it fits.
    Step (estimate/schedule.py): PP p leaves each rank 80/p layers and DP = 8/p replicas m = 64/DP = 8p
    micro-batches, so the slowest rank always runs m·80/p = 640 layer passes of the same micro-batch work: the
    same compute and the same TP all-reduces for every candidate. The schedule adds (p − 1)/v of one stage's time
    (T = m·t + (p − 1)·t/v): nothing at PP 1, at least (p − 1)/(v·m) of the compute otherwise. ZeRO-3 hides the
    data-parallel traffic behind the compute except its last 25 MB bucket when it is shorter than the compute, but
    over DP > 1 it gathers every layer's parameters each micro-batch: 640 × kernels.sharded_layer_overhead_us
    (5.64 ms: 3.61 s) on the critical path. At PP 8 × DP 1 there is nothing to gather, so it wins as long as its
    bubble stays below that — asserted below.
    """
    from fabricref import api
    from fabricref.plan import evaluate, space

    r = api.plan_train(
        MODEL_70B, SMALL, root=built_registry.root, gpus=(64,), global_batch=64, seq=4096, tp=(8,), zero=(3,),
        recompute=("selective",), cp=(1,), micro_batch=(1,), memory_headroom=0.0, top=3,
    )  # fmt: skip
    from fabricref.estimate import throughput

    best = r.top[0]
    assert best["layout_id"] == "tp8-pp8-dp1-cp1-ep1-mb1x64-zero3-selective-interleaved4"
    pp1 = next(x for x in r.rows if x["layout_id"] == "tp8-pp1-dp8-cp1-ep1-mb1x8-zero3-selective-1f1b")
    params, f = _counted_params()
    state = 18 * params / 64
    s, h, t = 4096, 8192, 8
    per_layer = (
        2 * 2 * s * h / t + 2 * s * h / t + 2 * s * (64 + 2 * 8) * 128 / t + 2 * s * h / t + 4 * 64 / t * s
        + 2 * s * h / t + 2 * s * f / t * 3
    )  # fmt: skip
    assert per_layer == 143_057_920
    assert pp1["memory_per_rank_bytes"] == state + per_layer * 80 * 1 == 31_131_668_480
    assert pp1["fits"] and pp1["bubble_seconds"] == 0

    evaluated = [x for x in r.rows if x["status"] == "evaluated"]
    assert {(x["pp"], x["dp"]) for x in evaluated} == {(1, 8), (2, 4), (4, 2), (8, 1)}
    compute = pp1["compute_seconds"]
    # PP 1's exposed data-parallel traffic: its last bucket only (the rest hides behind the compute).
    ev = evaluate.TrainEvaluator(r.spec, 4096, 64, _summary(built_registry))
    winner = space.Layout(64, 8, 1, 8, 1, 1, 1, 8, 3, "selective", "1f1b", 1)
    _place(built_registry, ev, winner)
    st = ev.step_model(winner)
    assert st["dp_seconds"] < st["compute_seconds"] and st["dp_exposed_seconds"] < 1e-3
    overhead = throughput.load_throughput(built_registry.root).kernels.sharded_layer_overhead_us.value * 1e-6
    assert st["sharded_overhead_seconds"] == pytest.approx(640 * overhead)
    for x in evaluated:
        p, v, m = x["pp"], x["virtual_stages"], x["microbatches"]
        assert m * 80 // p == 640
        assert x["compute_seconds"] == pytest.approx(compute, rel=1e-12)
        if x is not pp1:
            assert x["bubble_seconds"] >= (p - 1) / (v * m) * compute * (1 - 1e-12)
        if x is not best:
            assert x["step_seconds"] > best["step_seconds"]
    assert best["bubble_seconds"] < 640 * overhead
    # The winner, routed over the installed wiring, shows its busiest links; the rows below K stay analytical.
    assert best["costing"] == "routed per link" and json.loads(best["hot_links"])
    assert {x["costing"] for x in evaluated if x["rank"] > 3} == {"analytical per-tier"}


def _summary(lay: Layout) -> object:
    from fabricref.estimate.traffic import Views
    from fabricref.plan.train import prepare

    return prepare(Views(lay), SMALL, "bf16", 0.0)


def _place(lay: Layout, ev: object, *layouts: object) -> None:
    from fabricref.estimate.traffic import Views
    from fabricref.plan import space
    from fabricref.plan.train import place

    place(Views(lay)(SMALL), ev, list(layouts), space.Rejections())


def test_no_legal_layout_says_why_for_the_closest_candidates(built_registry: Layout) -> None:
    from fabricref import api

    with pytest.raises(UsageError) as e:
        api.plan_train(MODEL_70B, SMALL, root=built_registry.root, gpus=(8,), global_batch=8, seq=4096)
    text = str(e.value)
    assert text.startswith(f"no legal layout of {MODEL_70B} on {SMALL} at 8 GPUs:")
    # The closest: all state sharded over 8 GPUs (ZeRO-3 over DP·CP) still needs 18 B × the counted weights / 8,
    # and CP 8 with full recompute keeps each layer's input, 2·(4096/8)·8192 bytes, for 80 layers.
    params, _ = _counted_params()
    closest = 18 * params / 8 + 2 * 512 * 8192 * 80
    assert f"CP 8, micro-batch 1 × 8, ZeRO-3, full recompute, 1F1B: needs {closest / GB:.1f} GB per rank, has 80.0" in (
        text
    )

    with pytest.raises(UsageError, match=r"TP 16 exceeds the 8-GPU scale-up domain of nvidia-dgx-h100"):
        api.plan_train(MODEL_70B, SMALL, root=built_registry.root, gpus=(64,), tp=(16,))


def _targets_lacking_a_step_input(dtype: str) -> list[tuple[str, str, dict[str, str]]]:
    """Read from models/: (cluster or system reference, the reference holding its accelerator, {field: what would
    settle it}) for every plan target whose accelerator lacks a figure the step model needs for a `dtype` model:
    its memory (the fit), its memory bandwidth (memory-bound kernels, the optimizer step), or its dense `dtype`
    peak when the throughput calibration gives its GEMM rate as a fraction of that peak."""
    import yaml

    models = ROOT / "models"
    calibration = yaml.safe_load((models / "calibration" / "throughput.yaml").read_text())["accelerators"]
    refs = {p.stem: yaml.safe_load(p.read_text()) for p in sorted((models / "references").glob("*.yaml"))}
    systems = {k: k for k, r in refs.items() if r.get("form_factor") in ("server", "rack")}
    clusters = {p.stem: yaml.safe_load(p.read_text())["building_block"] for p in (models / "clusters").glob("*.yaml")}
    found = []
    for target, ref in sorted({**systems, **clusters}.items()):
        fields = refs[ref].get("fields") or {}
        needed = ["accelerator.memory", "accelerator.memory_bandwidth"]
        entry = next((a for a in calibration.values() if ref in a["references"]), None)
        if entry is not None and "tflops" not in entry["gemm"].get(dtype, {}):
            needed.append(f"accelerator.peak_dense_{dtype}")
        lacking = {k: fields[k].get("evidence_needed", "") for k in needed if "unknown" in (fields.get(k) or {})}
        if lacking:
            found.append((target, ref, lacking))
    return found


LACKING = _targets_lacking_a_step_input("bf16")
# The fast tier runs a cluster built of such systems and a system lacking two figures; the whole suite every one.
FAST_LACKING = {"amd-helios-vulcano800-2tier-1152", "nvidia-vera-rubin-nvl144"}


def test_the_targets_lacking_a_step_input_are_found() -> None:
    targets = {t: lacking for t, _, lacking in LACKING}
    assert {"amd-helios", "amd-helios-vulcano800-2tier-1152"} | FAST_LACKING <= set(targets)
    assert any(len(lacking) > 1 for lacking in targets.values())  # each missing input gets its own line
    assert len(targets["nvidia-vera-rubin-nvl144"]) > 1  # so the fast tier prints one with several


@pytest.mark.parametrize(
    ("target", "ref", "lacking"),
    [pytest.param(*x, id=x[0], marks=() if x[0] in FAST_LACKING else pytest.mark.slow) for x in LACKING],
)
def test_a_missing_step_input_is_named_with_what_would_settle_it(
    built_registry: Layout, cli, target: str, ref: str, lacking: dict[str, str]
) -> None:
    """A cluster whose accelerator lacks a figure the step model needs (AMD Helios: the MI455X's BF16 rate is not
    stated) is not "no legal layout": `plan train` and `plan serve` name each missing field (each on its own line),
    the accelerator and the document the registry says would settle it, and exit 2 before searching."""
    from fabricref.core.facts import load_facts

    root = built_registry.root
    accelerator = load_facts(built_registry, ref).text("accelerator.model")
    for command in (
        ["plan", "train", "--model", "llama8b-fsdp-dp64", "--gpus", "8", "--global-batch", "8"],
        ["plan", "serve", "--model", "llama70b-serve-aggregated", "--requests-per-second", "1", "--prompt",
         "128", "--output", "16"],
    ):  # fmt: skip
        r = cli(*command, "--cluster", target, root=root)
        assert r.code == 2, (target, r.out, r.err)
        text = " ".join(r.err.split())
        assert "no legal layout" not in text and "no serving layout" not in text, (target, text)
        assert f"{target}" in text and accelerator in text, (target, text)
        for field, evidence in lacking.items():
            line = next((x for x in r.err.splitlines() if f"{ref}: {field} is unknown" in x), None)
            assert line is not None, (target, field, r.err)
            assert " ".join(evidence.split()) in text, (target, field, text)


def test_bad_options_name_the_option(built_registry: Layout, cli) -> None:
    root = built_registry.root
    base = ["plan", "train", "--model", MODEL_70B, "--cluster", SMALL]
    for extra, message in [
        (["--gpus", "0"], "--gpus 0: expected a whole number ≥ 1"),
        (["--gpus", "eight"], "--gpus 'eight': expected a whole number"),
        (["--gpus", "128"], "--gpus 128: illustrative-h100-64 has 64 accelerators"),
        (["--objective", "dollars"], "--objective 'dollars': expected one of step, tokens-per-second, gpu-hours"),
        (["--recompute", "some"], "--recompute 'some': expected one of none, selective, full"),
        (["--engine", "spark"], "--engine 'spark': expected one of local, ray"),
        (["--address", "127.0.0.1:6379"], "--address names a Ray cluster: use it with --engine ray"),
        (["--engine", "ray", "--workers", "0"], "--workers 0: expected at least 1"),
        (["--gpus", "64", "--max-layouts", "10"], "raise --max-layouts"),
    ]:
        r = cli(*base, *extra, root=root)
        assert r.code == 2, (extra, r.err)
        assert message in r.err, (extra, r.err)
    r = cli("plan", "train", "--model", "llama70b", "--cluster", SMALL, root=root)
    assert r.code == 2 and "no workload 'llama70b'" in r.err
    r = cli("plan", "serve", "--model", "llama70b-serve-aggregated", "--cluster", SMALL, "--tpot", "fast", root=root)
    assert r.code == 2 and "--tpot" in r.err


@pytest.mark.slow
def test_pruning_keeps_the_top_and_the_pareto_front(built_registry: Layout) -> None:
    """A pruned layout is one that could reach neither: the search without pruning finds the same top K and front."""
    from fabricref import api

    opts = {"gpus": (64,), "global_batch": 64, "seq": 4096, "top": 5, "route_top": 0}
    pruned = api.plan_train(MODEL_70B, SMALL, root=built_registry.root, **opts)
    full = api.plan_train(MODEL_70B, SMALL, root=built_registry.root, prune=False, **opts)
    assert pruned.counts["pruned"] > 0 and full.counts["pruned"] == 0
    assert [x["layout_id"] for x in pruned.top] == [x["layout_id"] for x in full.top]
    assert [x["layout_id"] for x in pruned.pareto] == [x["layout_id"] for x in full.pareto]
    # Every pruned layout's lower bound is above the K-th best: it could not have ranked.
    kth = pruned.top[-1]["objective_value"]
    assert all(x["step_lower_bound_seconds"] > kth for x in pruned.rows if x["status"] == "pruned")


def test_the_bound_is_the_evaluation_without_communication(built_registry: Layout) -> None:
    """The search prunes on `bound`: its memory and fit are the evaluation's, its step time never above it."""
    from fabricref.estimate.traffic import Views
    from fabricref.plan import evaluate, space
    from fabricref.plan.train import place, prepare

    views = Views(built_registry)
    summary = prepare(views, SMALL, "bf16")
    spec = space.load_model_spec(built_registry, MODEL_70B)
    req = space.train_request(spec, SMALL, 64, gpus=(64,), global_batch=32, seq=4096)
    layouts, rejected = space.training_layouts(req, space.Cluster(SMALL, summary.reference, 64, 8))
    ev = evaluate.TrainEvaluator(spec, req.seq, req.global_batch, summary)
    layouts = place(views(SMALL), ev, layouts, rejected)
    assert len(layouts) > 500
    for x in layouts[::7]:
        b, e = ev.bound(x), ev.evaluate(x)
        assert (b.memory_per_rank_bytes, b.fits) == (e.memory_per_rank_bytes, e.fits)
        assert b.step_lower_bound_seconds <= e.step_seconds
    views.close()


@pytest.mark.slow
def test_plan_rows_are_the_plans_table_and_save_makes_a_workload(built_copy: Layout, cli) -> None:
    root = built_copy.root
    r = cli("plan", "train", "--model", MODEL_70B, "--cluster", SMALL, "--gpus", "64", "--global-batch", "32",
            "--seq", "4096", "--top", "2", "--save", "llama70b-planned-64", "--json", root=root)  # fmt: skip
    assert r.code == 0, r.err
    out = json.loads(r.out)
    parquet = root / out["parquet"]
    assert parquet.parent == root / "plans" and parquet.is_file()
    q = cli("query", f"SELECT status, count(*) AS n FROM plans WHERE plan_id = '{out['plan_id']}' GROUP BY ALL",
            "--format", "json", root=root)  # fmt: skip
    assert q.code == 0, q.err
    counts = {x["status"]: x["n"] for x in json.loads(q.out)}
    assert sum(counts.values()) == out["counts"]["legal"]
    assert counts["evaluated"] == out["counts"]["evaluated"]

    # --save: the best layout the workload format expresses, its knobs in params.yaml, loadable as the stage loads it.
    from fabricref.estimate.workloads import find_workload

    saved = out["saved"]
    assert saved["files"] == ["models/workloads/llama70b-planned-64.yaml", "params.yaml"]
    w = find_workload(built_copy, "llama70b-planned-64")
    row = next(x for x in out["top"] if x["layout_id"] == saved["layout_id"]) if saved["rank"] <= 2 else None
    assert w.targets == (SMALL,) and w.training.tp * w.training.pp * w.training.dp == 64
    if row is not None:
        assert (w.training.tp, w.training.pp, w.training.micro_batch) == (row["tp"], row["pp"], row["micro_batch"])
    text = (root / "params.yaml").read_text()
    assert "  llama70b-planned-64:\n    tp:" in text and "# The knobs people vary" in text  # comments kept
    r = cli("plan", "train", "--model", MODEL_70B, "--cluster", SMALL, "--gpus", "64", "--global-batch", "32",
            "--save", "llama70b-planned-64", root=root)  # fmt: skip
    assert r.code == 2 and "exists; a workload id is kept" in r.err


def test_plan_serve_ranks_by_accelerators_and_meets_the_targets(built_registry: Layout) -> None:
    from fabricref import api

    r = api.plan_serve(
        "llama70b-serve-aggregated", SMALL, root=built_registry.root, requests_per_second=4.0, prompt=2048,
        output=128, ttft_p50=1.0, tpot=0.05, top=3,
    )  # fmt: skip
    assert r.top and [x["rank"] for x in r.top] == [1, 2, 3]
    gpus = [x["gpus"] for x in r.top]
    assert gpus == sorted(gpus)
    for x in r.top:
        assert x["ttft_seconds"] <= 1.0 and x["tpot_seconds"] <= 0.05 and x["fits"]
        groups = x["groups"] if x["mode"] == "aggregated" else None
        if groups is not None:  # a group finishes `batch` requests per TTFT + output × TPOT
            assert groups == math.ceil(4.0 * (x["ttft_seconds"] + 128 * x["tpot_seconds"]) / x["batch"] - 1e-9)
    assert r.top[0]["costing"] == "routed per link"
    with pytest.raises(UsageError, match=r"no serving layout .* meets 4000 requests/s"):
        api.plan_serve("llama70b-serve-aggregated", SMALL, root=built_registry.root, requests_per_second=4000.0,
                       prompt=2048, output=128, tpot=0.001)  # fmt: skip


# The search both Ray tests run: TP 4 and 8 only (of every degree), which still has layouts that do not fit and
# layouts pruned by earlier waves, so every path of the search meets both engines.
RAY_SEARCH = {"gpus": (64,), "global_batch": 64, "seq": 4096, "top": 5, "route_top": 1, "tp": (4, 8)}


@pytest.mark.slow
def test_ray_gives_the_same_table_as_the_local_engine(built_registry: Layout) -> None:
    """A local Ray instance (127.0.0.1 only, no dashboard, no usage statistics, a capped object store) runs the
    same evaluations in batches; the rows gathered are the in-process rows, value for value."""
    pytest.importorskip("ray")
    from fabricref import api
    from fabricref.plan import engines

    local = api.plan_train(MODEL_70B, SMALL, root=built_registry.root, **RAY_SEARCH)
    assert local.counts["pruned"] > 0 and local.counts["not_fitting"] > 0  # every path of the search taken
    ray_engine = engines.engine("ray", workers=2)
    try:
        import ray

        assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
        assert _listening_addresses(ray) <= {"127.0.0.1", "::ffff:127.0.0.1", "::1"}
        remote = api.plan_train(MODEL_70B, SMALL, root=built_registry.root, engine=ray_engine, **RAY_SEARCH)
    finally:
        ray_engine.close()
    assert remote.counts == local.counts
    assert remote.rows == local.rows


@pytest.mark.slow
def test_ray_on_an_existing_cluster_gives_the_same_table_as_the_local_engine(built_registry: Layout) -> None:
    """`--engine ray --address HOST:PORT`: a Ray cluster started beforehand (`ray start --head` on 127.0.0.1, no
    dashboard, no usage statistics, a capped object store) runs the evaluations; the rows are the in-process ones.
    The cluster is stopped afterwards by the ids of the processes this test started."""
    pytest.importorskip("ray")
    import signal
    import socket
    import subprocess
    import sys
    import tempfile
    import time

    import psutil
    from fabricref import api
    from fabricref.plan import engines

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="/tmp/rt")  # short: Ray's socket paths live under it
    # Loopback only (clusters "off", as the local engine starts its own); token authentication off, so this test
    # cluster neither reads nor makes a token on the machine.
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "RAY_AUTH_MODE": "disabled"}  # fmt: skip
    ray_cli = str(Path(sys.executable).with_name("ray"))
    head = subprocess.Popen(
        [ray_cli, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
         "--include-dashboard=false", "--disable-usage-stats", "--num-cpus=2", "--object-store-memory=100000000",
         f"--temp-dir={temp}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    started: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 120
        while True:
            assert head.poll() is None, head.stderr.read().decode()[-2000:] if head.stderr else "ray start exited"
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "the Ray head did not listen within 120 s"
            time.sleep(0.5)
        started = [psutil.Process(head.pid), *psutil.Process(head.pid).children(recursive=True)]
        local = api.plan_train(MODEL_70B, SMALL, root=built_registry.root, **RAY_SEARCH)
        with pytest.raises(UsageError, match="expected HOST:PORT"):
            engines.engine("ray", address="127.0.0.1")
        ray_engine = engines.engine("ray", address=f"127.0.0.1:{port}")
        try:
            import ray

            assert ray.get_runtime_context().gcs_address == f"127.0.0.1:{port}"  # joined, not started its own
            assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
            assert ray_engine.workers == 2
            head_side = [psutil.Process(head.pid), *psutil.Process(head.pid).children(recursive=True)]
            assert _listening(head_side) <= {"127.0.0.1", "::ffff:127.0.0.1", "::1"}
            remote = api.plan_train(MODEL_70B, SMALL, root=built_registry.root, engine=ray_engine, **RAY_SEARCH)
        finally:
            ray_engine.close()
        assert remote.counts == local.counts
        assert remote.rows == local.rows
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            started += [c for c in psutil.Process(head.pid).children(recursive=True) if c not in started]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGTERM)  # `ray start --block` stops what it started
        try:
            head.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=30)
        _, alive = psutil.wait_procs(started, timeout=30)
        for p in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        shutil.rmtree(temp, ignore_errors=True)


def _listening_addresses(ray: object) -> set[str]:
    """The addresses every process of the local instance (GCS, raylet, their children) listens on."""
    import psutil

    node = ray._private.worker._global_node  # type: ignore[attr-defined]
    procs = [psutil.Process(info.process.pid) for infos in node.all_processes.values() for info in infos]
    procs += [c for p in list(procs) for c in p.children(recursive=True)]
    return _listening(procs)


def _listening(procs: list[object]) -> set[str]:
    """The addresses these processes listen on (none found fails: the check would pass vacuously)."""
    import psutil

    found = set()
    for p in procs:
        try:
            connections = p.net_connections(kind="inet")  # type: ignore[attr-defined]
        except psutil.NoSuchProcess:
            continue
        for c in connections:
            if c.status == psutil.CONN_LISTEN:
                found.add(c.laddr.ip)
    assert found, "no listening socket found: the check would pass vacuously"
    return found


def test_plan_files_stay_out_of_git_and_dvc() -> None:
    root = Path(__file__).resolve().parents[2]
    assert "plans/" in (root / ".gitignore").read_text().splitlines()
    assert "plans" not in (root / "dvc.yaml").read_text()


def test_plan_serve_saves_its_best_layout_as_a_service_workload(built_copy: Layout, cli) -> None:
    root = built_copy.root
    r = cli("plan", "serve", "--model", "llama70b-serve-aggregated", "--cluster", SMALL, "--requests-per-second", "2",
            "--prompt", "2048", "--output", "128", "--ttft-p50", "1s", "--top", "1", "--save", "llama70b-served-64",
            "--json", root=root)  # fmt: skip
    assert r.code == 0, r.err
    out = json.loads(r.out)
    best = out["top"][0]
    from fabricref.estimate.workloads import find_workload

    w = find_workload(built_copy, "llama70b-served-64")
    assert w.kind == "inference" and w.inference.mode == best["mode"] and w.inference.batch == best["batch"]
    assert (w.inference.prompt_tokens, w.inference.output_tokens, w.inference.requests_per_second) == (2048, 128, 2)


def test_an_unreadable_plan_file_stops_only_queries_of_plans(built_copy: Layout, cli) -> None:
    """plans/ is not a DVC output and anyone may drop a file there: a torn one must not break every query."""
    root = built_copy.root
    (root / "plans").mkdir(exist_ok=True)
    (root / "plans" / "torn.parquet").write_bytes(b"PAR1 not really")
    r = cli("query", "SELECT count(*) AS n FROM fields", "--format", "json", root=root)
    assert r.code == 0, r.err
    r = cli("query", "SELECT count(*) FROM plans", root=root)
    assert r.code != 0 and "plans/ holds a file DuckDB cannot read" in r.err


def _shipped_training() -> list[tuple[str, str]]:
    """Every shipped training workload × target, read from models/workloads/ (a new one is checked too)."""
    import yaml

    pairs = []
    for path in sorted((ROOT / "models" / "workloads").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if data.get("kind") == "training":
            pairs += [(path.stem, target) for target in data["targets"]]
    return pairs


@pytest.mark.parametrize(("workload_id", "target"), _shipped_training())
def test_a_shipped_training_workload_is_a_planner_choice_or_says_teaching(
    built_registry: Layout, workload_id: str, target: str
) -> None:
    """The planner, run at the workload's GPU count, global batch and sequence on the target, puts the workload's
    own layout (its knobs from params.yaml) in its top 10 by step time; or the workload file labels it a teaching
    example and says why it is kept."""
    from fabricref import api
    from fabricref.estimate.workloads import find_workload
    from fabricref.plan import space

    w = find_workload(built_registry, workload_id)
    if w.teaching is not None:
        kind, _, why = w.teaching.partition(": ")
        assert kind in ("does not fit", "not a planner's choice") and len(why) >= 10, w.teaching
        return
    r = api.plan_train(workload_id, target, root=built_registry.root, objective="step", top=10, route_top=0)
    own = space.workload_layout(w.training)
    assert r.request["gpus"] == [own.gpus]
    ranked = {x["layout_id"]: x["rank"] for x in r.rows if x["rank"] is not None}
    top = [x["layout_id"] for x in r.top]
    assert own.id in top, (
        f"{workload_id} ({own.id}) is rank {ranked.get(own.id, 'unranked (pruned or not fitting)')} of "
        f"{len(ranked):,} on {target}; the planner's best: {top[:3]}. Re-tune its knobs in params.yaml, or label it "
        "`teaching:` in its workload file with why"
    )


def test_a_search_reports_its_progress_layouts_done_and_the_best_so_far(built_registry: Layout) -> None:
    """What the CLI's progress bar shows (layouts bounded, then done, the best so far): every layout counted once,
    the count never going back, and the best at the end the search's winner."""
    from fabricref import api

    calls: list[tuple[str, int, int, str]] = []
    r = api.plan_train(
        MODEL_70B, SMALL, root=built_registry.root, gpus=(64,), global_batch=64, seq=4096, tp=(8,), top=3,
        route_top=0, progress=lambda *a: calls.append(a),
    )  # fmt: skip
    n = r.counts["legal"]
    assert n > 100 and {c[2] for c in calls} == {n}
    bounding = [c for c in calls if c[0] == "bounding"]
    evaluating = [c for c in calls if c[0] == "evaluating"]
    assert bounding and evaluating and calls.index(evaluating[0]) > calls.index(bounding[-1])
    for part in (bounding, evaluating):
        done = [c[1] for c in part]
        assert done == sorted(done) and done[-1] == n
    assert evaluating[-1][3].startswith(f"{r.top[0]['layout_id']} (")


@pytest.mark.parametrize("workers", [0, -1, True, 1.5])
def test_an_engine_refuses_a_worker_count_that_is_not_a_positive_whole_number(workers) -> None:
    """The Python API's `engine` checks what the CLI's --workers is checked for (before any Ray starts)."""
    from fabricref.plan.engines import engine

    with pytest.raises(UsageError, match=r"--workers .*: expected at least 1"):
        engine("ray", workers=workers)
