"""Peak tensor throughput and HBM per accelerator: vendor figures with honest dense / with-sparsity statuses, and
the step, TTFT and TPOT estimates they make numeric on the shipped data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import db_rows
from fabricref.core.registry import open_tables
from fabricref.inspect.audit import audit, unverified

ROOT = Path(__file__).resolve().parents[2]

# Checked by hand against the transcribed vendor documents (value, unit, status).
KEY_FIGURES = {
    # H100 whitepaper, Table 1: "Peak BF16 Tensor Core 989.4 TFLOPS | 1978.9 TFLOPS¹" (¹ with sparsity).
    ("nvidia-dgx-h100", "accelerator.peak_dense_bf16"): (989.4, "TFLOP/s", "published"),
    # H100 product page, SXM column: "FP8 Tensor Core* 3,958 teraFLOPS" (* With sparsity) → 3,958 / 2.
    ("nvidia-dgx-h100", "accelerator.peak_sparse_fp8"): (3958, "TFLOP/s", "published"),
    ("nvidia-dgx-h100", "accelerator.peak_dense_fp8"): (1979, "TFLOP/s", "derived"),
    ("nvidia-dgx-h100", "accelerator.memory_bandwidth"): (3.35, "TB/s", "published"),
    ("nvidia-dgx-h100", "accelerator.memory"): (80, "GB", "published"),
    # HGX page, HGX B200 column (8 GPUs, sparse): BF16 36 PFLOPS → 36,000 / 8 / 2; FP8 72 PFLOPS → 72,000 / 8 / 2.
    ("nvidia-dgx-b200", "accelerator.peak_dense_bf16"): (2250, "TFLOP/s", "derived"),
    ("nvidia-dgx-b200", "accelerator.peak_dense_fp8"): (4500, "TFLOP/s", "derived"),
    # DGX B200 page: "64TB/s HBM3e bandwidth" over 8 GPUs.
    ("nvidia-dgx-b200", "accelerator.memory_bandwidth"): (8, "TB/s", "derived"),
    # GB200 NVL72 page, rack column (72 GPUs, sparse): BF16 360 PFLOPS → 360,000 / 72 / 2 per GPU (not per superchip).
    ("nvidia-gb200-nvl72", "accelerator.peak_dense_bf16"): (2500, "TFLOP/s", "derived"),
    ("nvidia-gb200-nvl72", "accelerator.peak_dense_fp8"): (5000, "TFLOP/s", "derived"),
    ("nvidia-gb200-nvl72", "accelerator.memory"): (13400 / 72, "GB", "derived"),
    ("nvidia-gb200-nvl72", "accelerator.memory_bandwidth"): (8, "TB/s", "derived"),
    # ROCm MI300 page: "Matrix BF16 | 2048 | 1307.4", "Matrix FP8 | 4096 | 2614.9" (FLOPS/clock/CU, peak TFLOPS).
    ("amd-mi300x-pollara400", "accelerator.peak_dense_bf16"): (1307.4, "TFLOP/s", "published"),
    ("amd-mi300x-pollara400", "accelerator.peak_dense_fp8"): (2614.9, "TFLOP/s", "published"),
    # AMD MI325X page, footnote MI325-002.
    ("amd-mi325x-pollara400", "accelerator.peak_dense_bf16"): (1307.4, "TFLOP/s", "published"),
    ("amd-mi325x-pollara400", "accelerator.peak_dense_fp8"): (2614.9, "TFLOP/s", "published"),
}


_FIELDS: dict[Path, dict[tuple[str, str], list[dict]]] = {}


def _field(lay, ref: str, key: str) -> dict:
    """The one row of `fields` for (ref, key). The whole view is read once per registry (one query instead of one
    connection per field): every test here reads the session's built registry and none writes it."""
    if lay.root not in _FIELDS:
        rows: dict[tuple[str, str], list[dict]] = {}
        for row in db_rows(lay, "SELECT reference_id, field, value_number, unit, status, reason FROM fields"):
            rows.setdefault((row.pop("reference_id"), row.pop("field")), []).append(row)
        _FIELDS[lay.root] = rows
    (row,) = _FIELDS[lay.root].get((ref, key), [])
    return row


def _systems() -> list[str]:
    """Every shipped server or rack reference, from models/ (never a list kept in the test)."""
    out = []
    for path in sorted((ROOT / "models" / "references").glob("*.yaml")):
        model = yaml.safe_load(path.read_text())
        if model["form_factor"] in ("server", "rack"):
            out.append(model["id"])
    return out


@pytest.mark.parametrize(("key", "expected"), sorted(KEY_FIGURES.items()))
def test_key_throughput_and_hbm_figures(built_registry, key, expected) -> None:
    row = _field(built_registry, *key)
    assert (row["value_number"], row["unit"], row["status"]) == pytest.approx(expected)


def test_a_dense_figure_from_a_with_sparsity_one_is_derived_and_audits_to_the_footnoted_page(built_registry) -> None:
    tree = audit(built_registry, "nvidia-gb200-nvl72", "accelerator.peak_dense_bf16")
    assert tree["status"] == "derived" and tree["formula"] == "accelerator.peak_sparse_bf16 / 2"
    assert not unverified(tree)
    sparse = tree["inputs"][0]
    assert sparse["field"] == "accelerator.peak_sparse_bf16" and sparse["status"] == "derived"
    total = next(i for i in sparse["inputs"] if i["field"] == "accelerator.peak_sparse_bf16_total")
    (prov,) = total["provenance"]
    assert prov["source_id"] == "nvidia-gb200-nvl72-page" and prov["verified"] is True
    # The page's own footnote is what licenses the halving; the transcription carries it.
    text = (ROOT / "sources" / "transcriptions" / "nvidia-gb200-nvl72-page.html").read_text()
    assert "Dense is one-half sparse spec shown." in text


def test_no_dense_figure_exceeds_half_its_with_sparsity_figure(built_registry) -> None:
    """Where a system has both, dense ≤ sparse / 2: a with-sparsity figure stored as dense would break this."""
    checked = 0
    for ref in _systems():
        for dtype in ("bf16", "fp8"):
            dense = _field(built_registry, ref, f"accelerator.peak_dense_{dtype}")
            sparse = _field(built_registry, ref, f"accelerator.peak_sparse_{dtype}")
            if dense["value_number"] is None or sparse["value_number"] is None:
                continue
            assert dense["value_number"] <= sparse["value_number"] / 2 * (1 + 1e-9), (ref, dtype)
            checked += 1
    assert checked >= 6


def test_every_throughput_and_hbm_field_is_sourced_or_says_why_not(built_registry) -> None:
    keys = (
        "accelerator.peak_dense_bf16",
        "accelerator.peak_dense_fp8",
        "accelerator.peak_sparse_bf16",
        "accelerator.peak_sparse_fp8",
        "accelerator.peak_sparse_bf16_total",
        "accelerator.peak_sparse_fp8_total",
        "accelerator.memory_bandwidth",
    )
    with open_tables(built_registry) as tables:  # opened once for every audit below
        for ref in _systems():
            for key in keys:
                row = _field(built_registry, ref, key)
                if row["status"] == "unknown":
                    assert row["value_number"] is None and len(row["reason"]) > 20, (ref, key)
                else:
                    assert row["value_number"] is not None and row["value_number"] > 0, (ref, key)
                    assert not unverified(audit(built_registry, ref, key, tables)), (ref, key)


def test_70b_bf16_on_tp8_h100_tpot_is_at_least_the_weights_over_the_registry_bandwidth(cli, built_registry) -> None:
    hbm = _field(built_registry, "nvidia-dgx-h100", "accelerator.memory_bandwidth")
    assert (hbm["value_number"], hbm["unit"]) == (3.35, "TB/s")
    result = cli("estimate", "step", "nvidia-dgx-h100", "llama70b-serve-aggregated", "--json", root=built_registry.root)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    # 70e9 params × 2 B (bf16) / TP 8 = 17.5 GB read per token per rank, at 3.35 TB/s: ≥ 5.22 ms.
    floor = 70e9 * 2 / 8 / (hbm["value_number"] * 1e12)
    assert floor == pytest.approx(5.2239e-3, rel=1e-4)
    assert data["tpot_seconds"] >= floor and data["tpot_memory_floor_seconds"] >= floor
    assert data["ttft_seconds"] > 0 and data["fits"] is True and data["missing"] == []


@pytest.mark.slow
def test_every_reference_with_a_sourced_peak_gives_a_numeric_step(cli, built_registry) -> None:
    """For each shipped server or rack: if the registry holds its dense peak and memory bandwidth, some shipped
    workload that fits the system gets numeric compute, step, TTFT / TPOT; if not, the estimate names the field."""
    workloads = sorted(p.stem for p in (ROOT / "models" / "workloads").glob("*.yaml"))
    with_peak = 0
    for ref in _systems():
        peak = _field(built_registry, ref, "accelerator.peak_dense_bf16")["value_number"]
        hbm = _field(built_registry, ref, "accelerator.memory_bandwidth")["value_number"]
        results, unknown = [], []
        for wid in workloads:
            r = cli("estimate", "step", ref, wid, "--json", root=built_registry.root)
            if r.code == 0:  # workloads larger than the system are refused with a clear error
                results.append(json.loads(r.out))
            elif "is unknown" in r.err:  # a bandwidth no source states: refused, naming it, never guessed
                assert r.code == 2 and re.search(r"no source (or assumption )?states it", r.err), (ref, wid, r.err)
                unknown.append(wid)
        assert results or unknown, ref
        if peak is None:
            # No peak in the registry: compute comes only from a measured GEMM rate the calibration cites for this
            # accelerator (named in the estimate), else the estimate names the unknown peak and gives no time.
            for d in results:
                measured = [c for c in d["calibration"] if ".gemm." in c and "TFLOP/s" in c]
                if d["compute_seconds"] is not None:
                    assert measured and d["compute_seconds"] > 0 and d["step_seconds"] > 0, (ref, measured)
                else:
                    assert d["compute_seconds"] is None and d["step_seconds"] is None, ref
                    # The estimate names the accelerator field it lacks (the peak, or the HBM bandwidth the
                    # memory-bound kernels run at), never a guessed time.
                    assert any(f"{ref}:accelerator." in m and "is unknown" in m for m in d["missing"]), ref
            continue
        with_peak += 1
        for d in results:
            assert d["compute_seconds"] > 0 and d["step_seconds"] > 0, (ref, d["kind"])
            if d["kind"] == "inference" and hbm is not None:
                assert d["ttft_seconds"] > 0 and d["tpot_seconds"] > 0, ref
    assert with_peak >= 5
