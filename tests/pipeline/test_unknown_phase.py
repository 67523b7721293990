"""A phase whose bandwidth no source states is reported as unknown, the other phases are still costed, and a
total that would add the unknown phase is unknown (null, with the reason), never the sum of the others.

Every shipped system states its frontend NIC speed (`frontend.nic.speed`), so the end-to-end case is a DGX B300
whose model leaves it unknown, rebuilt in a private copy: its client request / response phase has no time.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml
from fabricref.compile import stage as compile_stage
from fabricref.core.paths import Layout
from fabricref.estimate.traffic import Views, estimate, step_of
from fabricref.estimate.view import view_for
from fabricref.estimate.workloads import find_workload
from fabricref.topology import stage as topology_stage
from fabricref.traffic.stage import workload_tables

WID = "llama70b-serve-aggregated"
# Hand-computed from params.yaml and the workload file: (8,192 prompt + 200 output tokens) × 4 B per token on the
# frontend × batch 1.
FRONTEND_BYTES = (8192 + 200) * 4 * 1


def _phases(result):
    return {p.phase: p for p in result.phases}


def _without_frontend_speed(lay: Layout, reference: str) -> None:
    """The reference's model with `frontend.nic.speed` declared unknown, compiled and its topologies rebuilt."""
    path = lay.references_dir / f"{reference}.yaml"
    model = yaml.safe_load(path.read_text())
    model["fields"]["frontend.nic.speed"] = {"unknown": "Left unknown here to cost a phase no source states."}
    model.get("assumptions", {}).pop("frontend.nic.speed", None)
    path.write_text(yaml.safe_dump(model, sort_keys=False))
    compile_stage.run(lay)
    topology_stage.run(lay)


@pytest.mark.slow
def test_an_unknown_frontend_phase_is_unknown_end_to_end_and_the_others_are_costed(cli, built_copy: Layout):
    _without_frontend_speed(built_copy, "nvidia-dgx-b300")
    built_registry = built_copy
    r = cli("estimate", "workload", "nvidia-dgx-b300", WID, "--json", root=built_registry.root)
    assert r.code == 0, r.err
    data = json.loads(r.out)
    rows = {p["phase"]: p for p in data["phases"]}
    fe = rows["frontend-request"]
    assert fe["bytes_per_rank"] == FRONTEND_BYTES == 33_568
    assert (fe["seconds"], fe["total_seconds"], fe["bandwidth_seconds"], fe["latency_seconds"]) == (None,) * 4
    assert (fe["confidence"], fe["dominant"]) == ("unknown", "unknown")
    assert "nvidia-dgx-b300:frontend.nic.speed is unknown (no source states it)" in fe["unknown_reason"]
    for name in ("prefill-tp-all-reduce", "decode-tp-all-reduce"):
        assert rows[name]["total_seconds"] > 0 and rows[name]["unknown_reason"] is None, name
    assert data["communication_seconds"] is None and data["confidence"] == "unknown"

    st = json.loads(cli("estimate", "step", "nvidia-dgx-b300", WID, "--json", root=built_registry.root).out)
    assert st["communication_seconds"] is None and st["exposed_communication_seconds"] is None
    assert any(
        "frontend.nic.speed is unknown" in m and "frontend-request is unknown (null)" in m for m in st["missing"]
    )


def test_only_the_unknown_phase_and_the_totals_adding_it_lose_their_number(built_registry: Layout):
    """The same workload on the DGX B200 (every field known), then with its frontend NIC speed removed: the other
    phases are unchanged, TTFT / TPOT / request time (which do not include the frontend transfer) are unchanged,
    and the communication total — which adds every phase — is unknown instead of the backend phases' sum."""
    w = find_workload(built_registry, WID)
    view = view_for(built_registry, "nvidia-dgx-b200")
    known = estimate(built_registry, "nvidia-dgx-b200", w, 0, view)
    known_step = step_of(built_registry, view, w, known, 0.5)
    assert known.communication_seconds == pytest.approx(sum(p.total_seconds for p in known.phases), rel=1e-12)
    assert known_step["missing"] == [] and known_step["ttft_seconds"] > 0

    view.g.graph["frontend_nic_gbps"] = None
    blind = estimate(built_registry, "nvidia-dgx-b200", w, 0, view)
    blind_step = step_of(built_registry, view, w, blind, 0.5)
    before, after = _phases(known), _phases(blind)
    assert sorted(before) == sorted(after) == ["decode-tp-all-reduce", "frontend-request", "prefill-tp-all-reduce"]
    for name in ("decode-tp-all-reduce", "prefill-tp-all-reduce"):
        assert after[name].total_seconds == before[name].total_seconds, name
    fe = after["frontend-request"]
    assert fe.total_seconds is None and fe.seconds is None and fe.confidence == "unknown"
    assert fe.bytes_per_rank == before["frontend-request"].bytes_per_rank == FRONTEND_BYTES
    assert "nvidia-dgx-b200:frontend.nic.speed is unknown" in fe.unknown
    # The total is not the partial sum of the backend phases (a number that would look complete): it is None.
    assert blind.communication_seconds is None
    assert blind.known_communication_seconds == pytest.approx(
        before["prefill-tp-all-reduce"].total_seconds + before["decode-tp-all-reduce"].total_seconds, rel=1e-12
    )
    assert blind_step["communication_seconds"] is None and blind_step["exposed_communication_seconds"] is None
    for key in ("ttft_seconds", "tpot_seconds", "step_seconds", "compute_seconds"):
        assert blind_step[key] == known_step[key], key
    assert any("TTFT, TPOT and the request time" in a for a in blind_step["assumptions"])
    assert [m for m in blind_step["missing"] if "frontend-request" in m]


def test_the_traffic_table_holds_nulls_for_the_unknown_phase(built_registry: Layout):
    """The stage's rows and metrics: null seconds for the phase and for the totals; no number presented as total."""
    views = Views(built_registry)
    try:
        view = views("nvidia-dgx-b200")
        view.g.graph["frontend_nic_gbps"] = None
        w = dataclasses.replace(find_workload(built_registry, WID), targets=("nvidia-dgx-b200",))
        tables, metrics = workload_tables(w, views)
    finally:
        views.close()
    (fe,) = [row for row in tables["traffic"] if row[2] == "frontend-request"]
    # latency_s, bandwidth_s, queueing_s, seconds, total_seconds, dominant, confidence
    assert fe[16:23] == (None, None, None, None, None, "unknown", "unknown")
    (summary,) = tables["traffic_workloads"]
    assert summary[5] is None and summary[7] == "unknown"  # communication_seconds, confidence
    assert "communication_seconds" not in json.dumps(metrics)


def _unknown_scale_up() -> list[str]:
    """The shipped systems whose scale-up bandwidth no source or assumption states (models/)."""
    from conftest import ROOT, SYSTEM_REFERENCES

    keys = ("scale_up.bandwidth_per_accelerator", "scale_up.bandwidth_per_link")
    found = []
    for ref in SYSTEM_REFERENCES:
        model = yaml.safe_load((ROOT / "models" / "references" / f"{ref}.yaml").read_text())
        fields, assumed = model.get("fields") or {}, model.get("assumptions") or {}
        if all("unknown" in fields.get(k, {"unknown": ""}) and k not in assumed for k in keys):
            found.append(ref)
    return found


@pytest.mark.parametrize("ref", _unknown_scale_up())
def test_a_tp_phase_on_an_unknown_scale_up_bandwidth_is_unknown_and_the_memory_fit_is_still_given(
    built_registry: Layout, cli, ref
):
    """`estimate step nvidia-vera-rubin-nvl144 …` exited 2 ("the scale-up bandwidth … is unknown") and gave no
    memory fit, while its 288 GB memory is stated: each phase on the unknown link is unknown naming the field, the
    totals adding it are unknown, and every figure that needs neither is given."""
    r = cli("estimate", "workload", ref, WID, "--json", root=built_registry.root)
    assert r.code == 0, r.err
    rows = {p["phase"]: p for p in json.loads(r.out)["phases"]}
    for name in ("prefill-tp-all-reduce", "decode-tp-all-reduce"):
        tp = rows[name]
        assert tp["total_seconds"] is None and tp["confidence"] == "unknown" and tp["bytes_per_rank"] > 0, name
        assert f"{ref}:scale_up.bandwidth_per_accelerator is unknown" in tp["unknown_reason"], name
    st = cli("estimate", "step", ref, WID, "--json", root=built_registry.root)
    assert st.code == 0, st.err
    step = json.loads(st.out)
    assert step["fits"] is True and step["memory_per_rank_bytes"] > 0 and step["headroom_bytes"] > 0
    assert step["communication_seconds"] is None and step["ttft_seconds"] is None
    assert any(f"{ref}:scale_up.bandwidth_per_accelerator is unknown" in m for m in step["missing"])
    # A calculator still refuses: it has no phase to leave unknown.
    calc = cli("estimate", "collective", "--op", "all-reduce", "--ranks", "8", "--bytes", "1GB", "--topology", ref,
               root=built_registry.root)  # fmt: skip
    assert calc.code == 2 and f"({ref}:scale_up.bandwidth_per_accelerator)" in calc.said, calc.said


def test_the_memory_floor_of_a_token_needs_the_memory_bandwidth_not_the_compute_rate(built_registry: Layout, cli):
    """amd-helios states its HBM bandwidth but no BF16 rate: TPOT is unknown, its memory floor is not."""
    st = json.loads(cli("estimate", "step", "amd-helios", WID, "--json", root=built_registry.root).out)
    assert st["tpot_seconds"] is None and any("peak_dense_bf16 is unknown" in m for m in st["missing"])
    floor = st["tpot_memory_floor_seconds"]
    w = find_workload(built_registry, WID)
    m, i = w.model, w.inference
    kv = 2 * m.layers * m.kv_heads * m.head_dim * 2 / i.tp * (i.prompt_tokens + i.output_tokens // 2) * i.batch
    phases = json.loads(cli("estimate", "workload", "amd-helios", WID, "--json", root=built_registry.root).out)
    decode = next(p for p in phases["phases"] if p["phase"] == "decode-tp-all-reduce")["total_seconds"]
    hbm = 23.3e12  # amd-helios accelerator.memory_bandwidth, 23.3 TB/s
    assert floor == pytest.approx((m.params * 2 / i.tp + kv) / hbm + decode / i.output_tokens, rel=1e-3)
