"""Memory per rank, activations, FLOPs and step time against figures worked by hand from their papers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from conftest import ensure_database
from fabricref.errors import UsageError
from fabricref.estimate import compute, memory, sizing, step
from fabricref.estimate.workloads import Workload
from fabricref.formats.workload import Inference, ModelShape, Training


@pytest.mark.parametrize(
    ("zero", "expected_gb"),
    # ZeRO paper (Rajbhandari et al.), Figure 1: 7.5B parameters, K = 12, Nd = 64.
    # stage 0: 16 × 7.5 = 120; stage 1: 4 × 7.5 + 12 × 7.5 / 64 = 31.40625; stage 2: 2 × 7.5 + 14 × 7.5 / 64
    # = 16.640625; stage 3: 16 × 7.5 / 64 = 1.875.
    [(0, 120.0), (1, 31.40625), (2, 16.640625), (3, 1.875)],
)
def test_zero_paper_7_5b_on_64_gpus(zero: int, expected_gb: float) -> None:
    m = memory.training_state(7.5e9, "mixed-adam-16", dp=64, zero=zero)
    assert m["bytes"] == pytest.approx(expected_gb * 1e9)
    assert m["total_bytes"] == pytest.approx(120e9)


def test_article_training_state_and_tp_pp_split() -> None:
    assert memory.training_state(70e9)["bytes"] == pytest.approx(1.26e12)  # 70B × 18 B
    # The "157.5 GB per rank" for TP 8 × DP 512 without sharding: 1.26 TB / 8.
    assert memory.training_state(70e9, dp=512, tp=8)["bytes"] == pytest.approx(157.5e9)
    # TP 8 × PP 4: 1.26 TB / 32 = 39.375 GB.
    assert memory.training_state(70e9, dp=32, tp=8, pp=4)["bytes"] == pytest.approx(39.375e9)


def test_expert_weights_are_sharded_over_ep() -> None:
    # 141B of which 136B in experts; TP 4, DP 16, EP 16: dense 5B / 4 × 18 = 22.5 GB; experts 136B / 16 × 18 = 153 GB.
    m = memory.training_state(141e9, dp=16, tp=4, expert_params=136e9, ep=16)
    assert m["bytes"] == pytest.approx(22.5e9 + 153e9)
    # ZeRO-1 over each weight's own replicas: dense DP 16, experts TP × DP / EP = 4.
    z1 = memory.training_state(141e9, dp=16, tp=4, expert_params=136e9, ep=16, zero=1)
    assert z1["bytes"] == pytest.approx(5e9 / 4 * (6 + 12 / 16) + 136e9 / 16 * (6 + 12 / 4))
    with pytest.raises(UsageError, match="ep 3 must divide"):
        memory.training_state(141e9, dp=16, tp=4, expert_params=136e9, ep=3)


def test_gpt3_175b_layer_activations() -> None:
    # s = 2048, b = 1, h = 12288, a = 96: sbh = 25,165,824; 5as/h = 80; × (34 + 80) = 2,868,903,936 B.
    a = memory.activations_per_layer(2048, 1, 12288, 96)
    assert a["bytes_per_layer"] == 2_868_903_936
    sbh = 2048 * 12288
    assert memory.activations_per_layer(2048, 1, 12288, 96, tp=8, sequence_parallel=True)[
        "bytes_per_layer"
    ] == pytest.approx(2_868_903_936 / 8)
    # TP 8 without sequence parallelism: sbh(10 + 24/8 + 80/8) = 23 sbh.
    assert memory.activations_per_layer(2048, 1, 12288, 96, tp=8)["bytes_per_layer"] == pytest.approx(23 * sbh)
    assert memory.activations_per_layer(2048, 1, 12288, 96, tp=8, sequence_parallel=True, recompute="selective")[
        "bytes_per_layer"
    ] == pytest.approx(34 * sbh / 8)
    assert memory.activations_per_layer(2048, 1, 12288, 96, recompute="full")["bytes_per_layer"] == 2 * sbh


def test_article_inference_figures() -> None:
    assert sizing.memory(70e9, "bf16-weights")["bytes"] == 140e9
    # Llama-70B: 2 × 80 layers × 8 KV heads × 128 × 2 B = 327,680 B per token; 40,960 B on each of 8 TP ranks.
    assert memory.kv_bytes_per_token_per_rank(80, 8, 128, 2.0, 1) == 327_680
    assert memory.kv_bytes_per_token_per_rank(80, 8, 128, 2.0, 8) == 40_960
    # TP 16 over 8 KV heads: each rank keeps one head (replicated), not half of one.
    assert memory.kv_bytes_per_token_per_rank(80, 8, 128, 2.0, 16) == 40_960
    cap = sizing.capacity(100, 200, 1000, 8)
    assert (cap.demand_tokens_per_second, cap.groups, cap.accelerators) == (20_000, 20, 160)


def test_inference_fit_counts_concurrent_sequences() -> None:
    # 80 GB per rank − 17.5 GB of weights = 62.5 GB; a sequence of 8,392 tokens takes 40,960 × 8,392 B.
    fit = memory.inference_fit(140e9, 40_960, 8192 + 200, 8, 80e9)
    assert fit["weights_per_rank_bytes"] == 17.5e9
    assert fit["max_concurrent_sequences"] == math.floor(62.5e9 / (40_960 * 8392)) == 181
    assert memory.inference_fit(140e9, 40_960, 100, 8, None)["max_concurrent_sequences"] is None
    assert memory.inference_fit(140e9, 40_960, 100, 1, 80e9)["max_concurrent_sequences"] == 0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_bad_numbers_are_refused(bad: float) -> None:
    with pytest.raises(UsageError, match="params"):
        memory.training_state(bad)
    with pytest.raises(UsageError, match="mfu"):
        compute.check_mfu(bad)


def test_bad_options_are_refused() -> None:
    with pytest.raises(UsageError, match="zero stage"):
        memory.training_state(1e9, zero=4)
    with pytest.raises(UsageError, match="layout"):
        memory.training_state(1e9, "adam-32")
    with pytest.raises(UsageError, match="recompute"):
        memory.activations_per_layer(1, 1, 1, 1, recompute="some")
    with pytest.raises(UsageError, match="tp"):
        memory.training_state(1e9, tp=0)


class _Phase:
    """A routed phase as the step reads it (estimate/cost.py's Phase): `count` occurrences of `seconds` each,
    `total_seconds` in all; the cost terms are per occurrence; `overlaps` what decompose says it may hide behind."""

    def __init__(
        self,
        phase: str,
        total: float,
        size: float = 0.0,
        latency: float = 0.0,
        bandwidth: float = 0.0,
        count: int = 1,
        overlaps: str = "",
    ):
        self.phase, self.total_seconds, self.bytes_per_rank, self.count = phase, total, size, count
        self.overlaps = overlaps
        self.seconds = total / count
        self.latency_s, self.bandwidth_s, self.queueing_s = latency, bandwidth, 0.0


def _workload(kind: str, model: dict, **parts: dict) -> Workload:
    """A workload as loaded: its model and its training or inference block validated by the format."""
    blocks = {"training": Training, "inference": Inference}
    typed = {k: blocks[k].model_validate(parts[k]) if k in parts else None for k in blocks}
    return Workload(
        id="test", title=kind, kind=kind, model=ModelShape.model_validate(model), targets=(), shares_with=None,
        path=None, **typed,
    )  # fmt: skip


LLAMA70B = {"params": 70e9, "layers": 80, "hidden": 8192, "kv_heads": 8, "head_dim": 128, "dtype": "bf16"}


def _acc(
    memory_gb: float | None, hbm: float | None, peak: float | None, ref: str = "test-accelerator"
) -> step.Accelerator:
    """A hypothetical accelerator with round figures (test inputs, not vendor facts)."""
    values = {
        "accelerator.memory": memory_gb and memory_gb * 1e9,
        "accelerator.memory_bandwidth": hbm,
        "accelerator.peak_dense_bf16": peak,
        "accelerator.peak_dense_fp8": None,
    }
    fields = {
        k: step.AccField(k, v, "published" if v else "unknown", "" if v else "no source") for k, v in values.items()
    }
    return step.Accelerator(ref, fields)


ROOT = Path(__file__).resolve().parents[2]


def _rates(acc: step.Accelerator, dtype: str = "bf16") -> Any:
    return step.rates_for(acc, dtype, ROOT)


def test_step_training_pp4_fits_and_times() -> None:
    """The step adds up: the pipeline (m micro-batches of the slowest stage plus the fill and drain), the exposed
    data-parallel traffic and the optimizer; the bubble of 1F1B is (p − 1)/m; TP and PP never hide."""
    t = {"tp": 8, "pp": 4, "dp": 32, "micro_batch": 1, "microbatches": 8, "seq_len": 4096}
    w = _workload("training", LLAMA70B, training=t)
    # The demand's pp-send: one send each way per micro-batch (2 × 8), 0.05 s in all.
    pp_send = _Phase("pp-send", 0.05, count=16)
    phases = [
        _Phase("tp-all-reduce", 0.2),
        pp_send,
        _Phase("dp-all-reduce", 0.9, 2.1875e9, 1e-3, 0.9, overlaps="compute"),
    ]
    acc = _acc(80, 3e12, 1e15, "nvidia-dgx-h100")
    s = step.estimate(w, phases, acc, _rates(acc))
    assert s["fits"] is True and s["missing"] == []
    # 1F1B without overlapped sends: each micro-batch's forward and backward wait for theirs, all 16 exposed.
    assert s["communication_by_phase"]["pp-send"]["exposed_seconds"] == pytest.approx(0.05)
    assert s["bubble_fraction"] == pytest.approx(3 / 8)
    assert s["step_seconds"] == pytest.approx(
        s["compute_seconds"] * (1 + 3 / 8) + s["exposed_communication_seconds"] + s["optimizer_seconds"], rel=0.05
    )
    assert s["communication_by_phase"]["tp-all-reduce"]["hidden_seconds"] == 0.0
    assert s["exposed_communication_at_least_seconds"] <= s["exposed_communication_seconds"]
    assert any("[published]" in c for c in s["calibration"])


def test_what_hides_behind_compute_is_decomposes_overlap_field_not_the_phase_name() -> None:
    """The step hides what decompose marks `overlaps: compute` and nothing else: the same 0.9 s under another
    name still hides; under the data-parallel name but on the critical path it is all exposed."""
    from fabricref.estimate import decompose

    t = {"tp": 8, "pp": 4, "dp": 32, "micro_batch": 1, "microbatches": 8, "seq_len": 4096}
    w = _workload("training", LLAMA70B, training=t)
    acc = _acc(80, 3e12, 1e15, "nvidia-dgx-h100")

    def run(name: str, overlaps: str) -> dict:
        return step.estimate(w, [_Phase(name, 0.9, 2.1875e9, 1e-3, 0.9, overlaps=overlaps)], acc, _rates(acc))

    dp = run("dp-all-reduce", decompose.BACKWARD)
    renamed = run("gradient-sync", decompose.BACKWARD)
    critical = run("dp-all-reduce", "")
    assert dp["dp_seconds"] == renamed["dp_seconds"] == 0.9 and dp["dp_hidden_seconds"] > 0
    assert renamed["communication_by_phase"]["gradient-sync"] == dp["communication_by_phase"]["dp-all-reduce"]
    assert critical["dp_seconds"] == 0.0
    assert critical["communication_by_phase"]["dp-all-reduce"]["exposed_seconds"] == 0.9


def test_step_names_the_field_it_lacked() -> None:
    t = {"tp": 8, "pp": 1, "dp": 512, "micro_batch": 1, "microbatches": 4, "seq_len": 4096}
    acc = _acc(80, None, None, "nvidia-dgx-h100")
    s = step.estimate(_workload("training", LLAMA70B, training=t), [_Phase("tp-all-reduce", 0.1)], acc, _rates(acc))
    assert s["fits"] is False and s["memory_per_rank_bytes"] > 157.5e9
    assert (s["compute_seconds"], s["step_seconds"]) == (None, None)
    assert "nvidia-dgx-h100:accelerator.memory_bandwidth is unknown" in s["missing"]
    none = _acc(None, None, None, "nvidia-dgx-h100")
    unknown = step.estimate(_workload("training", LLAMA70B, training=t), [], none, _rates(none))
    assert unknown["fits"] == "unknown" and unknown["headroom_bytes"] is None
    assert "nvidia-dgx-h100:accelerator.memory is unknown (no source)" in unknown["missing"]


@pytest.mark.parametrize(("dtype", "per_param"), [("fp32", 4), ("fp16", 2), ("bf16", 2), ("fp8", 1)])
def test_a_services_weights_in_its_sizing_are_its_params_at_its_dtype(dtype: str, per_param: int) -> None:
    """The sizing summary holds the weights as the step estimate does: params × the model dtype's bytes."""
    from fabricref.estimate.summaries import sizing_summary

    i = {"mode": "aggregated", "tp": 8, "batch": 1, "prompt_tokens": 8192, "output_tokens": 200}
    w = _workload("inference", {**LLAMA70B, "dtype": dtype}, inference=i)
    assert sizing_summary(w)["weights_bytes"] == 70e9 * per_param


def test_a_trainings_sizing_is_its_whole_state_and_no_share_per_rank() -> None:
    """The whole model's state (18 B/param for mixed Adam); a rank's share is the step's memory fit alone."""
    from fabricref.estimate.summaries import sizing_summary

    t = {"tp": 8, "pp": 1, "dp": 512, "zero": 1, "micro_batch": 1, "microbatches": 4, "seq_len": 4096}
    got = sizing_summary(_workload("training", LLAMA70B, training=t))
    assert got["training_state_bytes"] == 70e9 * 18
    assert not [k for k in got if "per_rank" in k]


def test_step_inference_ttft_and_tpot() -> None:
    i = {"mode": "aggregated", "tp": 8, "batch": 1, "prompt_tokens": 8192, "output_tokens": 200}
    w = _workload("inference", LLAMA70B, inference=i)
    phases = [_Phase("prefill-tp-all-reduce", 0.05), _Phase("decode-tp-all-reduce", 0.2), _Phase("frontend", 1e-3)]
    acc = _acc(80, 3e12, 1e15, "nvidia-dgx-h100")
    s = step.estimate(w, phases, acc, _rates(acc))
    assert s["max_concurrent_sequences"] == math.floor(62.5e9 / (40_960 * 8392))
    assert s["ttft_seconds"] == pytest.approx(s["prefill_compute_seconds"] + 0.05)
    floor = (17.5e9 + 40_960 * 8292) / 3e12  # weights/TP + KV of prompt + output/2 tokens at the stated HBM
    assert s["tpot_seconds"] > floor + 0.2 / 200  # achieved bandwidth, kernel launches and the step overhead
    assert s["step_seconds"] == pytest.approx(s["ttft_seconds"] + 200 * s["tpot_seconds"])


def test_cli_memory_activations_and_bad_input(cli) -> None:
    def run(*args: str) -> dict:
        result = cli("estimate", *args, "--json")
        assert result.code == 0, result.err
        return json.loads(result.out)

    assert run("memory", "--params", "70e9")["bytes"] == pytest.approx(1.26e12)
    zero2 = run("memory", "--params", "7.5e9", "--layout", "mixed-adam-16", "--dp", "64", "--zero", "2")
    assert zero2["bytes"] == pytest.approx(16.640625e9)
    assert run("memory", "--params", "70e9", "--layout", "bf16-weights", "--tp", "8")["bytes"] == 17.5e9
    acts = run("activations", "--seq", "2048", "--batch", "1", "--hidden", "12288", "--heads", "96")
    assert acts["bytes_per_layer"] == 2_868_903_936
    sel = run(
        "activations", "--seq", "2048", "--batch", "1", "--hidden", "12288", "--heads", "96", "--tp", "8",
        "--sequence-parallel", "--recompute", "selective",
    )  # fmt: skip
    assert sel["bytes_per_layer"] == 2048 * 12288 * 34 / 8
    # The article's 70B on TP 8 of 80 GB GPUs: 17.5 GB of weights per rank, 40,960 B per token per rank.
    serve = run(
        "inference-memory", "--params", "70e9", "--layers", "80", "--kv-heads", "8", "--head-dim", "128",
        "--context", "8392", "--tp", "8", "--memory", "80GB",
    )  # fmt: skip
    assert serve["weights_per_rank_bytes"] == 17.5e9 and serve["kv_bytes_per_token_per_rank"] == 40_960
    assert serve["max_concurrent_sequences"] == 181 and serve["fits"] is True
    for bad in ("nan", "inf", "-1"):
        result = cli("estimate", "memory", "--params", bad, "--json")
        assert result.code == 2 and "--params" in result.err, (bad, result.err)
    assert cli("estimate", "memory", "--params", "7e9", "--zero", "4").code == 2
    bad_recompute = cli("estimate", "activations", "--seq", "1", "--batch", "1", "--hidden", "1", "--heads", "1",
                        "--recompute", "some")  # fmt: skip
    assert bad_recompute.code == 2 and "recompute" in bad_recompute.err


def test_cli_step_on_shipped_data(cli, printed, built_registry) -> None:
    result = printed(
        "estimate", "step", "illustrative-h100-4096", "llama70b-train-tp8-dp512", "--json", root=built_registry.root
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    # The workload declares ZeRO-1 over its 512 replicas, as Megatron-LM's distributed optimizer runs it: each rank
    # keeps its 1/8 of the weights (2 B) and fp32 gradients (4 B) whole and 1/512 of the 12 B of optimizer state,
    # ~52.7 GB, plus 80 layers of one micro-batch's activations (1F1B without PP: one in flight), against the
    # registry's 80 GB H100: it fits.
    state, acts = data["memory"]["state"], data["memory"]["activations"]
    per_tp = state["params"] / 8
    assert state["zero"] == 1 and state["dp"] == 512
    assert state["weights_bytes"] == pytest.approx(2 * per_tp) and state["gradients_bytes"] == pytest.approx(4 * per_tp)
    assert state["optimizer_bytes"] == pytest.approx(12 * per_tp / 512)
    assert acts["bytes"] == pytest.approx(80 * acts["bytes_per_layer"]) and acts["microbatches_in_flight"] == 1
    assert data["memory_per_rank_bytes"] == pytest.approx(state["bytes"] + acts["bytes"])
    assert 60e9 < data["memory_per_rank_bytes"] < 70e9
    assert data["memory"]["accelerator_memory_bytes"] == 80e9
    assert data["fits"] is True and data["headroom_bytes"] == pytest.approx(80e9 - data["memory_per_rank_bytes"])
    assert "fits," in step.fit_verdict(data)
    # The registry holds the H100's dense BF16 peak (989.4 TFLOP/s, the whitepaper): the layout is costed.
    assert data["step_seconds"] is not None and data["compute_seconds"] > 0 and data["missing"] == []
    # Without ZeRO the same layout holds 1.26 TB / TP 8 = 157.5 GB of state per rank: it does not fit, and the
    # verdict beside its (still costed) times says it cannot run as declared.
    t = {"tp": 8, "pp": 1, "dp": 512, "micro_batch": 1, "microbatches": 4, "seq_len": 4096, "zero": 0}
    acc = _acc(80, 3.35e12, 989.4e12, "nvidia-dgx-h100")
    plain = step.estimate(_workload("training", LLAMA70B, training=t), [], acc, _rates(acc))
    assert plain["fits"] is False and plain["memory"]["state"]["bytes"] == pytest.approx(157.5e9, rel=1e-3)
    assert plain["step_seconds"] is not None and "DOES NOT FIT" in step.fit_verdict(plain)
    assert "what_if" not in data and any("gemm_sustained_fraction" in c for c in data["calibration"])
    bad = cli("estimate", "step", "illustrative-h100-4096", "llama70b-train-tp8-dp512", "--mfu", "nan",
              root=built_registry.root)  # fmt: skip
    assert bad.code == 2 and "mfu" in bad.err


def test_throughput_fields_are_declared_with_status_on_every_system(built_registry) -> None:
    import duckdb

    con = duckdb.connect(str(ensure_database(built_registry)), read_only=True)
    systems = con.execute(
        "SELECT reference_id FROM reference_models WHERE form_factor IN ('server', 'rack') ORDER BY 1"
    ).fetchall()
    rows = con.execute(
        "SELECT reference_id, field, value_number, unit, direction, status, reason FROM fields "
        "WHERE field IN ('accelerator.peak_dense_bf16', 'accelerator.peak_dense_fp8') ORDER BY 1, 2"
    ).fetchall()
    con.close()
    assert systems and len(rows) == 2 * len(systems)
    for ref, key, value, unit, direction, status, reason in rows:
        assert (unit, direction) == ("TFLOP/s", None), (ref, key)
        # A figure only with a status that carries provenance; otherwise unknown with its reason.
        assert (value is None and status == "unknown" and reason) or status in ("published", "preliminary", "derived")


def test_workload_memory_options_are_checked(tmp_path) -> None:
    from pathlib import Path

    from fabricref.errors import ValidationError
    from fabricref.estimate.workloads import load_workload, standalone_text

    shipped = Path(__file__).resolve().parents[2] / "models" / "workloads"
    fsdp = standalone_text(shipped / "llama8b-fsdp-dp64.yaml")
    bad = tmp_path / "llama8b-fsdp-dp64.yaml"
    bad.write_text(fsdp.replace("  sharded: true\n", "  sharded: true\n  zero: 1\n"))
    with pytest.raises(ValidationError, match=r"\$\.training\.zero"):
        load_workload(bad)
    moe = standalone_text(shipped / "moe-train-ep16.yaml")
    too_many = tmp_path / "moe-train-ep16.yaml"
    too_many.write_text(moe.replace("params: 136.0e9", "params: 200.0e9"))
    with pytest.raises(ValidationError, match=r"experts\.params"):
        load_workload(too_many)
    (tmp_path / "ok").mkdir()
    good = tmp_path / "ok" / "llama8b-fsdp-dp64.yaml"
    good.write_text(fsdp.replace("  sharded: true\n", "  sharded: true\n  zero: 3\n  recompute: full\n"))
    assert load_workload(good).training.recompute == "full"


# (topology, workload, kind, fully sharded): a dense training, a fully sharded one and a service. The calibration a
# step lists depends on the workload, not on the size of the system it runs on: the fast tier runs the sharded
# training and the service on the smallest of the workload's systems (a 64-GPU cluster, one DGX H100), the whole
# suite on the 4,096-GPU cluster as well.
CALIBRATION_CASES = [
    ("illustrative-h100-4096", "llama70b-train-tp8-dp512", "training", False),
    ("illustrative-h100-64", "llama8b-fsdp-dp64", "training", True),
    ("nvidia-dgx-h100", "llama70b-serve-aggregated", "inference", False),
    pytest.param("illustrative-h100-4096", "llama8b-fsdp-dp64", "training", True, marks=pytest.mark.slow),
    pytest.param("illustrative-h100-4096", "llama70b-serve-aggregated", "inference", False, marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("topology", "workload", "kind", "sharded"), CALIBRATION_CASES)
def test_every_step_ttft_and_tpot_names_the_calibration_it_used_with_status(
    printed, built_registry, topology, workload, kind, sharded
) -> None:
    """CLI (text and JSON) and API: a training step lists the GEMM rate, the fitted fraction and the optimizer's
    bytes, never the decode step's overhead; only a fully sharded run lists the per-layer sharded overhead; a
    service's TTFT / TPOT list the decode step's overhead and not the optimizer's."""
    from fabricref import api

    def numbers(lines: list[str]) -> dict[str, str]:
        out = {}
        for line in lines:
            name, rest = line.split(" = ", 1)
            out[name] = rest[rest.index("[") + 1 : rest.index("]")]
        return out

    root = built_registry.root
    got = printed("estimate", "step", topology, workload, "--json", root=root)
    assert got.code == 0, got.err
    data = json.loads(got.out)
    used = numbers(data["calibration"])
    assert used["nvidia-h100-sxm.gemm.bf16"] == "assumed" and used["kernels.gemm_sustained_fraction"] == "fitted"
    assert all(status in ("published", "fitted", "assumed") for status in used.values())
    if kind == "training":
        assert data["step_seconds"] is not None and "kernels.optimizer_bytes_per_param" in used
        assert "kernels.decode_step_overhead_us" not in used
        assert ("kernels.sharded_layer_overhead_us" in used) is sharded
    else:
        assert data["ttft_seconds"] is not None and data["tpot_seconds"] is not None
        assert used["kernels.decode_step_overhead_us"] == "assumed"
        assert "kernels.optimizer_bytes_per_param" not in used
    text = printed("estimate", "step", topology, workload, root=root)
    assert text.out.count("calibration: ") == len(data["calibration"]), text.out
    assert api.step(topology, workload, root=root)["calibration"] == data["calibration"]
