"""The explorer's JSON endpoints through a real uvicorn on 127.0.0.1, good input and bad: every reference and topology
the models declare, every workload, the knobs' validation and the library's refusals (the CLI's messages), the
what-if, the sizing calculators; and its safety: CSP on every response, loopback Host only, no path from the client
to the file system, read-only, a time limit per computation."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import CLUSTERS, FAST_REFERENCES, ROOT, SYSTEM_REFERENCES
from explore_server import client, serve
from fabricref.core.paths import Layout

REFERENCES = sorted(p.stem for p in (ROOT / "models" / "references").glob("*.yaml"))
assert set(FAST_REFERENCES) <= set(REFERENCES), set(FAST_REFERENCES) - set(REFERENCES)
# Each reference's fields and page: FAST_REFERENCES in the fast tier (test_pages_read fetches every reference's
# page there too), every reference in the whole suite.
SWEPT_REFERENCES = [r if r in FAST_REFERENCES else pytest.param(r, marks=pytest.mark.slow) for r in REFERENCES]
WORKLOADS = sorted(p.stem for p in (ROOT / "models" / "workloads").glob("*.yaml"))
TOPOLOGIES = sorted(set(SYSTEM_REFERENCES) | set(CLUSTERS))


def detail(response) -> list[dict]:
    assert response.headers["content-type"].startswith("application/json"), response.text[:200]
    return response.json()["detail"]


# -- references -----------------------------------------------------------------------------------------------------


def test_index_lists_every_reference_with_its_fields_counted_by_status(http, built_registry) -> None:
    import duckdb

    data = http.get("/api/index").json()
    assert [r["reference_id"] for r in data["references"]] == REFERENCES
    fields = duckdb.sql(
        f"SELECT reference_id, status, count(*) FROM read_parquet('{built_registry.tables_dir}/fields.parquet') "
        "GROUP BY ALL"
    ).fetchall()
    expected = {(ref, status): n for ref, status, n in fields}
    for r in data["references"]:
        for status, n in r["counts"].items():
            assert n == expected.get((r["reference_id"], status), 0), (r["reference_id"], status)
    assert {t["topology_id"] for t in data["topologies"]} == set(TOPOLOGIES)
    assert [w["workload_id"] for w in data["workloads"]] == WORKLOADS
    assert http.get("/api/references").json() == data["references"]
    assert http.get("/api/topologies").json() == data["topologies"]
    assert http.get("/api/workloads").json() == data["workloads"]


@pytest.mark.parametrize("reference", SWEPT_REFERENCES)
def test_reference_fields_hold_value_unit_direction_status(http, reference: str) -> None:
    data = http.get(f"/api/references/{reference}").json()
    assert data["reference"]["reference_id"] == reference
    assert data["fields"], reference
    for f in data["fields"]:
        assert f["status"] in ("published", "preliminary", "derived", "unknown")
        assert {"field", "value", "unit", "direction", "status"} <= set(f["shown"])
        assert set(f["shown"]) <= {"field", "value", "unit", "direction", "status", "conflict", "check"}
        if f["status"] in ("published", "preliminary") and f["value_text"]:
            assert f["shown"]["value"].startswith(f["value_text"])  # the digits the document states
        assert not re.search(r"\de[+-]\d", f["shown"]["value"]), f  # no scientific notation


def test_reference_fields_carry_precision_conflicts_checks_and_the_kind_of_evidence(http) -> None:
    fields = {f["field"]: f for f in http.get("/api/references/amd-helios").json()["fields"]}
    bandwidth = fields["accelerator.memory_bandwidth"]
    assert bandwidth["conflict"] is True and bandwidth["resolved_by"] == "rule"
    assert bandwidth["shown"]["conflict"].startswith("conflicting sources: 23.3 TB/s from servethehome-")
    assert "19.6 TB/s from turtlesai-amd-mi400-advancing-ai-2025-06-12 (2025-06)" in bandwidth["shown"]["conflict"]
    scale_up = fields["scale_up.bandwidth_per_accelerator"]
    assert scale_up["check"]["agrees"] is True and scale_up["check"]["formula"].endswith("/ accelerator.count")
    gb200 = {f["field"]: f for f in http.get("/api/references/nvidia-gb200-nvl72").json()["fields"]}
    assert gb200["accelerator.memory"]["shown"]["value"] == "186 GB"  # 13.4 TB ÷ 72 to three digits
    tree = http.get("/api/references/amd-helios/fields/accelerator.memory_bandwidth/provenance").json()
    assert tree["conflict"] is True and "conflicting sources" in tree["shown"]["conflict"]
    by_source = {c["source_id"]: c for c in tree["citations"]}
    hot_chips = by_source["servethehome-amd-mi400-hot-chips-2026"]
    assert (hot_chips["publisher_kind"], hot_chips["published_on"], hot_chips["agrees"]) == (
        "press",
        "2026-08-24",
        True,
    )
    assert hot_chips["read_via"].startswith("a copy of the article")
    assert by_source["turtlesai-amd-mi400-advancing-ai-2025-06-12"]["claim_value_number"] == 19.6


def test_unknown_or_malformed_reference_is_refused_by_name(http) -> None:
    r = http.get("/api/references/nvidia-dgx-h10")
    assert r.status_code == 404
    assert "did you mean 'nvidia-dgx-h100'" in detail(r)[0]["msg"]
    r = http.get("/api/references/NVIDIA_DGX")
    assert r.status_code == 422 and detail(r)[0]["loc"] == ["path", "reference_id"]


def test_provenance_of_a_transcribed_field_with_its_hash_re_verified(http, built_registry) -> None:
    import fabricref

    tree = fabricref.audit("nvidia-dgx-h100", "scale_up.bandwidth_per_accelerator", built_registry.root)
    data = http.get("/api/references/nvidia-dgx-h100/fields/scale_up.bandwidth_per_accelerator/provenance").json()
    (c,) = data["citations"]
    (p,) = tree["provenance"]
    assert (c["sha256"], c["origin"], c["url"], c["locator"], c["excerpt"]) == (
        p["sha256"],
        p["origin"],
        p["url"],
        p["locator"],
        p["excerpt"],
    )
    assert c["verified"] is True and c["origin"] == "transcription"
    assert c["title"] and c["publisher_kind"] and c["retrieved_at"]


def test_provenance_of_a_derived_field_walks_its_inputs(http) -> None:
    data = http.get("/api/references/nvidia-dgx-h100/fields/scale_up.aggregate_bandwidth/provenance").json()
    assert data["status"] == "derived" and data["formula"]
    assert data["inputs"] and all(i["citations"] or i["inputs"] or i["status"] != "published" for i in data["inputs"])


@pytest.mark.parametrize(
    ("path", "status", "loc"),
    [
        ("/api/references/nvidia-dgx-h100/fields/no.such_field/provenance", 404, ["path"]),
        ("/api/references/nvidia-dgx-h100/fields/Bad Field/provenance", 422, ["path", "field"]),
        ("/api/references/nvidia-dgx-h100/fields/..%2f..%2fetc/provenance", 404, None),
        ("/api/calibration/no.such.number", 422, []),
    ],
)
def test_provenance_refuses_what_it_cannot_find(http, path: str, status: int, loc: list | None) -> None:
    r = http.get(path)
    assert r.status_code == status, r.text
    if loc is not None:
        assert detail(r)[0]["loc"] == loc


def test_compare_marks_the_fields_that_differ(http) -> None:
    data = http.get("/api/compare", params={"a": "nvidia-dgx-h100", "b": "nvidia-dgx-b200"}).json()
    rows = {r["field"]: r for r in data["rows"]}
    assert rows["accelerator.memory"]["differs"] is True  # 80 GB vs 180 GB
    assert rows["accelerator.count"]["differs"] is False  # "Eight" and "8": the same count
    assert data["differing"] == sum(r["differs"] for r in data["rows"]) > 0
    same = http.get("/api/compare", params={"a": "nvidia-dgx-h100", "b": "nvidia-dgx-h100"}).json()
    assert same["differing"] == 0
    assert http.get("/api/compare", params={"a": "nvidia-dgx-h100"}).status_code == 422
    assert http.get("/api/compare", params={"a": "nvidia-dgx-h100", "b": "x" * 200}).status_code == 422


# -- the model drawn --------------------------------------------------------------------------------------------


def first_drawing(http, topology: str) -> dict:
    """The drawing as the page asks for it: a first drawing of the largest cluster (a graph of a million links
    loaded) may pass the server's time limit on a busy machine; the server goes on and keeps it, the page asks
    again on a 503."""
    for _ in range(6):
        r = http.get(f"/api/model/{topology}")
        if r.status_code != 503:
            break
    assert r.status_code == 200, r.text[:300]
    return r.json()


@pytest.mark.slow
@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_every_topology_is_drawn_with_parts_and_networks_told_apart(http, topology: str, built_graph) -> None:
    g = built_graph(topology)
    d = first_drawing(http, topology)
    kinds = {n["kind"] for n in d["nodes"]}
    networks = {link["network"] for link in d["links"]}
    accelerators = sum(1 for _, k in g.nodes(data="kind") if k == "accelerator")
    if d["level"] == "full":
        assert sum(n["kind"] == "accelerator" for n in d["nodes"]) == accelerators
        assert {"accelerator", "nic"} <= kinds and "scale_up" in networks
    else:
        assert d["level"] == "aggregate" and accelerators > 256
        assert {"leaf", "domain"} <= kinds and "scale_out" in networks
        pod = http.get(f"/api/model/{topology}", params={"open": d["levels"][1]}).json()
        domain = next(n["opens"] for n in pod["nodes"] if (n["opens"] or "").startswith("domain:"))
        one = http.get(f"/api/model/{topology}", params={"open": domain}).json()
        assert {"accelerator", "leaf"} <= {n["kind"] for n in one["nodes"]}
    for n in d["nodes"]:
        assert n["w"] > 0 and n["h"] > 0 and 0 <= n["x"] <= d["width"] and 0 <= n["y"] <= d["height"]
    for link in d["links"]:
        assert link["shown"]["rate"].endswith("per direction") or link["shown"]["rate"] == "unknown"


def test_dgx_h100_is_drawn_with_eight_accelerators_and_four_nvswitch_chips(http) -> None:
    d = http.get("/api/model/nvidia-dgx-h100").json()
    count = {k: sum(n["kind"] == k for n in d["nodes"]) for k in ("accelerator", "scale_up_switch", "cpu", "nic")}
    assert count == {"accelerator": 8, "scale_up_switch": 4, "cpu": 2, "nic": 10}
    nvlink = [link for link in d["links"] if link["network"] == "scale_up"]
    assert len(nvlink) == 32 and all(link["field"] == "scale_up.bandwidth_per_accelerator" for link in nvlink)


@pytest.mark.parametrize(
    ("topology", "open", "status"),
    [
        ("nvidia-dgx-h100", "pod:0", 422),  # a system has no pods
        ("illustrative-h100-4096", "pod:99", 422),
        ("illustrative-h100-4096", "domain:b999", 422),
        ("illustrative-h100-4096", "domain:../../etc", 422),
        ("illustrative-h100-4096", "rack:1", 422),
        ("no-such-topology", None, 404),
    ],
)
def test_drawing_levels_that_do_not_exist_are_refused(http, topology: str, open: str | None, status: int) -> None:
    r = http.get(f"/api/model/{topology}", params={"open": open} if open else {})
    assert r.status_code == status, r.text


# -- a workload on the model ------------------------------------------------------------------------------------


def estimate(http, topology: str, workload: str, knobs: dict | None = None, **extra):
    return http.post("/api/estimate", json={"topology": topology, "workload": workload, "knobs": knobs or {}, **extra})


@pytest.mark.slow
@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_workload_on_its_first_target_matches_the_library(http, built_registry, workload: str) -> None:
    import fabricref

    info = next(w for w in http.get("/api/workloads").json() if w["workload_id"] == workload)
    target = next(t for t in info["targets"] if t in info["fits_on"])
    r = estimate(http, target, workload)
    assert r.status_code == 200, r.text
    e = r.json()
    library = fabricref.estimate_workload(target, workload, built_registry.root)
    assert [p["phase"] for p in e["phases"]] == [p["phase"] for p in library]
    for mine, theirs in zip(e["phases"], library, strict=True):
        assert mine["total_seconds"] == pytest.approx(theirs["total_seconds"], rel=1e-12)
        assert mine["dominant"] == theirs["dominant"] and mine["confidence"] == theirs["confidence"]
        assert mine["shown"]["time"] and not re.search(r"\de[+-]\d", json.dumps(mine["shown"]))
    assert e["fit"]["verdict"].startswith("Memory per rank")
    assert e["progress"]["accelerators"] >= max(g["size"] for g in e["progress"]["groups"]) > 0
    assert {g["kind"] for g in e["progress"]["groups"]} <= {
        "TP",
        "CP",
        "EP",
        "PP neighbours",
        "DP / shard group",
        "KV pair",
        "client",
    }
    assert all(0 <= x["share"] <= 1 for x in e["link_loads"])
    assert e["what_if"] is None and "not an exact NCCL" in e["caveat"]


def test_a_workload_on_a_target_it_does_not_declare(http) -> None:
    info = {w["workload_id"]: w for w in http.get("/api/workloads").json()}["llama70b-serve-aggregated"]
    other = next(t for t in info["fits_on"] if t not in info["targets"])
    r = estimate(http, other, "llama70b-serve-aggregated")
    assert r.status_code == 200, r.text
    assert r.json()["kind"] == "inference" and r.json()["step"]["kind"] == "inference"


def test_knobs_change_the_estimate_and_are_reported(http) -> None:
    base = estimate(http, "illustrative-h100-4096", "llama70b-train-tp8-pp4-dp32").json()
    half = estimate(http, "illustrative-h100-4096", "llama70b-train-tp8-pp4-dp32", {"dp": 16}).json()
    assert base["knobs"]["dp"] == 32 and half["knobs"]["dp"] == 16 and half["knobs"]["microbatches"] == 8
    assert half["accelerators"] == base["accelerators"] // 2
    before, after = (next(p for p in e["phases"] if p["phase"] == "dp-all-reduce") for e in (base, half))
    assert (before["group_size"], after["group_size"]) == (32, 16)
    assert after["bytes_per_rank"] == before["bytes_per_rank"]  # the same gradients per rank


def test_context_parallel_is_a_knob_the_explorer_sets_and_its_phase_is_a_cp_group(http) -> None:
    """cp splits each sequence over cp ranks: the job spans cp times the accelerators, gradients reduce over
    DP × CP, and the ring-attention exchange shows as a CP group (not "other") in the progress panel."""
    base = estimate(http, "illustrative-h100-4096", "llama70b-train-tp8-pp4-dp32").json()
    cp = estimate(http, "illustrative-h100-4096", "llama70b-train-tp8-pp4-dp32", {"cp": 2, "dp": 16}).json()
    assert base["knobs"]["cp"] == 1 and cp["knobs"]["cp"] == 2
    assert cp["accelerators"] == base["accelerators"]
    assert "cp-kv-exchange" in [p["phase"] for p in cp["phases"]]
    assert "cp-kv-exchange" not in [p["phase"] for p in base["phases"]]
    (group,) = [g for g in cp["progress"]["groups"] if g["phase"] == "cp-kv-exchange"]
    assert (group["kind"], group["size"]) == ("CP", 2)
    assert "context-parallel" in group["why"]


def test_the_apis_workload_estimate_takes_knob_overrides(built_registry) -> None:
    """The same override path the explorer uses, for notebooks: params.yaml's knob replaced, checked alike."""
    import fabricref
    from fabricref.errors import UsageError

    phases = fabricref.estimate_workload(
        "illustrative-h100-4096", "llama70b-train-tp8-pp4-dp32", built_registry.root, knobs={"dp": 16}
    )
    assert next(p for p in phases if p["phase"] == "dp-all-reduce")["group_size"] == 16
    with pytest.raises(UsageError, match=r"^dp=0: Input should be greater than or equal to 1"):  # named as given
        fabricref.estimate_workload(
            "illustrative-h100-4096", "llama70b-train-tp8-pp4-dp32", built_registry.root, knobs={"dp": 0}
        )


@pytest.mark.parametrize(
    ("knobs", "loc", "message"),
    [
        ({"tp": 0}, ["body", "knobs", "tp"], "greater than or equal to 1"),
        ({"dp": 10**9}, ["body", "knobs", "dp"], "less than or equal to"),
        ({"tp": "8"}, ["body", "knobs", "tp"], "valid integer"),
        ({"tp": True}, ["body", "knobs", "tp"], "valid integer"),
        ({"flops": 1}, ["body", "knobs", "flops"], "Extra inputs"),
        ({"mode": "disaggregated"}, ["body", "knobs", "mode"], "not a knob of this training workload"),
        ({"placement": "explicit"}, ["body", "knobs", "placement"], "'fill-domains' or 'spread'"),
    ],
)
def test_bad_knobs_are_a_422_naming_the_field(http, knobs: dict, loc: list, message: str) -> None:
    r = estimate(http, "illustrative-h100-4096", "llama70b-train-tp8-pp4-dp32", knobs)
    assert r.status_code == 422, r.text
    (d,) = detail(r)
    assert d["loc"] == loc and message in d["msg"], d


def test_tp_beyond_the_scale_up_domain_gives_the_clis_message_at_the_tp_control(http, built_registry) -> None:
    from fabricref.errors import UsageError
    from fabricref.estimate.traffic import estimate as library_estimate
    from fabricref.estimate.workloads import find_workload, with_knobs

    w = with_knobs(find_workload(built_registry, "llama70b-serve-aggregated"), {"tp": 16})
    with pytest.raises(UsageError) as cli_error:  # what `fabricref estimate workload` prints after "error: "
        library_estimate(built_registry, "illustrative-h100-4096", w)
    r = estimate(http, "illustrative-h100-4096", "llama70b-serve-aggregated", {"tp": 16})
    assert r.status_code == 422
    (d,) = detail(r)
    assert d["loc"] == ["body", "knobs", "tp"] and d["msg"] == str(cli_error.value)
    assert "exceeds the scale-up domain" in d["msg"]


def test_degrees_that_do_not_divide_and_too_many_accelerators(http) -> None:
    r = estimate(http, "nvidia-gb200-nvl72", "moe-train-ep16", {"ep": 3})
    (d,) = detail(r)
    assert r.status_code == 422 and d["loc"] == ["body", "knobs", "ep"] and "must divide" in d["msg"]
    r = estimate(http, "nvidia-dgx-h100", "llama70b-train-tp8-pp4-dp32")
    (d,) = detail(r)
    assert r.status_code == 422 and "needs 1024 accelerators" in d["msg"] and "has 8" in d["msg"]


@pytest.mark.parametrize(
    "body",
    [
        {"topology": "../etc", "workload": "llama8b-fsdp-dp64"},
        {"topology": "illustrative-h100-4096", "workload": "no-such-workload"},
        {"topology": "illustrative-h100-4096", "workload": "llama8b-fsdp-dp64", "heat": "utilisation"},
        {"topology": "illustrative-h100-4096", "workload": "llama8b-fsdp-dp64", "fail": [{"source": "x"}] * 9},
        {"topology": "illustrative-h100-4096", "workload": "llama8b-fsdp-dp64", "open": "pod:1; rm -rf"},
        {"topology": "illustrative-h100-4096"},
    ],
)
def test_malformed_requests_are_refused_without_a_traceback(http, body: dict) -> None:
    r = http.post("/api/estimate", json=body)
    assert r.status_code in (404, 422), r.text
    assert "Traceback" not in r.text and detail(r)[0]["msg"]


def test_failing_a_leaf_uplink_re_estimates_and_says_what_survival_does_not_establish(http) -> None:
    from fabricref.estimate.ha import NOT_ESTABLISHED

    fail = [{"source": "leaf00000", "target": "spine000-000"}]
    r = estimate(http, "illustrative-h100-4096", "llama70b-train-tp8-pp4-dp32", fail=fail, open="pod:0")
    assert r.status_code == 200, r.text
    w = r.json()["what_if"]
    assert w["route_survives"] is True and w["statement"] == NOT_ESTABLISHED
    assert any("oversubscription" in c for c in w["capacity_lost"])
    pp = next(p for p in w["phases"] if p["phase"] == "pp-send")
    assert pp["seconds_after"] > pp["seconds_before"]  # one trunk fewer for the stage-to-stage traffic


def test_failing_a_nic_loses_the_route_and_still_says_so(http) -> None:
    from fabricref.estimate.ha import NOT_ESTABLISHED

    r = estimate(http, "illustrative-h100-4096", "llama70b-train-tp8-pp4-dp32", fail=[{"source": "b000/nic0"}])
    w = r.json()["what_if"]
    assert w["route_survives"] is False and "b000/gpu0" in w["error"] and w["statement"] == NOT_ESTABLISHED


def test_failing_an_nvswitch_slows_the_tensor_parallel_all_reduce(http) -> None:
    r = estimate(http, "nvidia-dgx-h100", "llama70b-serve-aggregated", fail=[{"source": "nvidia-dgx-h100/sus0"}])
    w = r.json()["what_if"]
    prefill = next(p for p in w["phases"] if p["phase"] == "prefill-tp-all-reduce")
    assert w["route_survives"] and prefill["seconds_after"] > prefill["seconds_before"]


@pytest.mark.parametrize(
    ("fail", "message"),
    [
        ({"source": "leaf00000", "target": "leaf00001"}, "no link"),
        ({"source": "no-such-part"}, "no part"),
        ({"source": "b000/gpu0"}, "fail a NIC, a switch or a link"),
    ],
)
def test_failing_what_is_not_there_is_refused(http, fail: dict, message: str) -> None:
    r = estimate(http, "illustrative-h100-4096", "llama8b-fsdp-dp64", fail=[fail])
    assert r.status_code == 422 and message in detail(r)[0]["msg"] and detail(r)[0]["loc"][:2] == ["body", "fail"]


def test_heat_map_loads_sum_per_drawn_link(http) -> None:
    full = estimate(http, "nvidia-dgx-h100", "llama70b-serve-aggregated").json()
    d = http.get("/api/model/nvidia-dgx-h100").json()
    ids = {link["id"] for link in d["links"]}
    assert full["link_loads"] and {x["id"] for x in full["link_loads"]} <= ids
    assert max(x["share"] for x in full["link_loads"]) == 1.0
    by_bytes = estimate(http, "nvidia-dgx-h100", "llama70b-serve-aggregated", heat="bytes").json()
    assert sum(x["bytes"] for x in by_bytes["link_loads"]) == pytest.approx(sum(x["bytes"] for x in full["link_loads"]))


# -- sizing -------------------------------------------------------------------------------------------------------


def test_sizing_calculators_with_units(http) -> None:
    body = {"params": 70e9, "layers": 80, "kv_heads": 8, "head_dim": 128, "kv_dtype": "bf16", "prompt_tokens": 32768}
    body |= {"output_tokens": 0, "requests_per_second": 100, "group_tokens_per_second": 1000, "group_size": 8}
    data = http.post("/api/sizing", json=body).json()["sections"]
    rows = {r["quantity"]: r for section in data.values() for r in section}
    assert rows["KV cache per token"]["value"] == 2 * 80 * 8 * 128 * 2
    assert rows["KV cache per request"]["value"] == 2 * 80 * 8 * 128 * 2 * 32768
    assert rows["model state, whole model"]["shown"] == "1.26 TB"
    body["output_tokens"] = 200
    data = http.post("/api/sizing", json=body).json()["sections"]
    fleet = {r["quantity"]: r for r in data["fleet"]}
    assert (fleet["serving groups"]["value"], fleet["accelerators"]["value"]) == (20, 160)
    bad = http.post("/api/sizing", json={"kv_dtype": "int3"})
    assert bad.status_code == 422 and detail(bad)[0]["loc"] == ["body", "kv_dtype"]


@pytest.mark.parametrize("reference", SWEPT_REFERENCES)
def test_every_reference_page_renders_its_fields(http, reference: str) -> None:
    r = http.get(f"/reference/{reference}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    fields = http.get(f"/api/references/{reference}").json()["fields"]
    assert r.text.count('<tr class="field"') == len(fields)


@pytest.mark.slow
def test_the_cli_verb_serves_on_loopback_and_prints_its_url(built_registry: Layout) -> None:
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("fabricref")
    proc = subprocess.Popen(
        [str(exe), "explore", "--port", "0", "--root", str(built_registry.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.match(r"fabricref explorer at (http://127\.0\.0\.1:(\d+)/) ", line)
        assert m, line
        with client(m.group(1)) as c:
            assert c.get("/api/topologies").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    bad = subprocess.run([str(exe), "explore", "--port", "70000"], capture_output=True, text=True)
    assert bad.returncode == 2 and "65535" in bad.stderr


# -- safety -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/reference/nvidia-dgx-h100",
        "/compare?a=nvidia-dgx-h100&b=amd-helios",
        "/model",
        "/sizing",
        "/static/model.js",
        "/api/index",
        "/api/references/nope",
        "/reference/nope",
        "/static/../../pyproject.toml",
    ],
)
def test_every_response_carries_a_csp_without_inline_script(http, path: str) -> None:
    r = http.get(path)
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    if r.headers["content-type"].startswith("text/html"):
        for tag in re.findall(r"<script[^>]*>", r.text):
            assert 'src="/static/' in tag, tag
        assert not re.search(r"<script[^>]*>\s*[^<\s]", r.text)  # no inline code
        assert not re.search(r"<[^>]+\son[a-z]+=", r.text)  # no inline event handlers


def test_only_loopback_host_names_are_answered(http) -> None:
    assert http.get("/api/index", headers={"Host": "attacker.example"}).status_code == 421
    assert http.get("/api/index", headers={"Host": "localhost:1234"}).status_code == 200


def test_bodies_are_bounded_and_only_get_and_post_are_answered(http) -> None:
    big = b'{"topology": "nvidia-dgx-h100", "workload": "llama70b-serve-aggregated", "pad": "' + b"x" * 70_000 + b'"}'
    r = http.post("/api/estimate", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "content-security-policy" in r.headers
    assert http.request("PUT", "/api/estimate", json={}).status_code == 405
    assert http.request("DELETE", "/").status_code == 405


def test_static_files_are_served_by_name_never_by_path(http) -> None:
    assert http.get("/static/model.js").status_code == 200
    for path in ("/static/..%2fapp.py", "/static/%2e%2e/app.py", "/static/app.py", "/static/.hidden"):
        assert http.get(path).status_code in (404, 422), path


def test_text_from_models_is_escaped_in_pages(http) -> None:
    """A page shows reference titles and descriptions as text: the template engine escapes them."""
    from jinja2 import Environment

    env = Environment(autoescape=True)
    assert "&lt;script&gt;" in env.from_string("{{ t }}").render(t="<script>alert(1)</script>")
    page = http.get("/reference/nvidia-dgx-h100").text
    assert "Intel® Xeon®" in page  # text as written; a '<' in any model would arrive as &lt;
    assert page.count("<script") == 2


def test_the_explorer_writes_nothing_and_never_creates_the_database(built_copy: Layout, tmp_path: Path) -> None:
    from fabricref.explore.app import create_app

    db = built_copy.registry_dir / "registry.duckdb"
    db.unlink(missing_ok=True)
    before = {p: p.stat().st_mtime_ns for p in built_copy.root.rglob("*") if p.is_file()}
    with serve(app=create_app(built_copy.root, warm=False)) as url, client(url) as c:
        assert c.get("/api/index").status_code == 200
        assert c.get("/api/references/nvidia-dgx-h100/fields/accelerator.count/provenance").status_code == 200
        assert (
            c.post(
                "/api/estimate", json={"topology": "nvidia-dgx-h100", "workload": "llama70b-serve-aggregated"}
            ).status_code
            == 200
        )
        assert c.get("/model").status_code == 200
    after = {p: p.stat().st_mtime_ns for p in built_copy.root.rglob("*") if p.is_file()}
    assert not db.exists()
    assert after == before


def test_a_tampered_snapshot_is_shown_as_not_verified_with_the_reason(built_copy: Layout) -> None:
    """The hash is checked on every provenance request, never served from the cache."""
    import fabricref
    from fabricref.explore.app import create_app

    field = "scale_up.bandwidth_per_accelerator"
    (citation,) = fabricref.audit("nvidia-dgx-h100", field, built_copy.root)["provenance"]
    url = f"/api/references/nvidia-dgx-h100/fields/{field}/provenance"
    with serve(app=create_app(built_copy.root, warm=False)) as base, client(base) as c:
        assert c.get(url).json()["citations"][0]["verified"] is True
        snapshot = built_copy.root / citation["snapshot_path"]
        snapshot.chmod(0o644)
        data = bytearray(snapshot.read_bytes())
        data[0] ^= 1
        snapshot.write_bytes(bytes(data))
        (shown,) = c.get(url).json()["citations"]
    assert shown["verified"] is False and shown["problem"]


def test_a_computation_past_the_time_limit_is_a_503(built_registry: Layout, monkeypatch) -> None:
    import time

    from fabricref.explore import app as explore_app

    monkeypatch.setattr(explore_app, "TIME_LIMIT_SECONDS", 0.2)
    application = explore_app.create_app(built_registry.root, warm=False)
    monkeypatch.setattr(application.state.explorer, "sizing", lambda request: time.sleep(1.0))
    with serve(app=application) as url, client(url) as c:
        r = c.post("/api/sizing", json={})
    assert r.status_code == 503 and "longer than 0.2 s" in r.json()["detail"][0]["msg"]


def test_results_are_cached_by_the_registrys_content(built_registry: Layout) -> None:
    from fabricref.explore.explorer import Explorer
    from fabricref.explore.models import EstimateRequest

    ex = Explorer(built_registry.root)
    request = EstimateRequest(topology="nvidia-dgx-h100", workload="llama70b-serve-aggregated")
    first = ex.estimate(request)
    assert ex.estimate(request) is first  # served from the cache
    fingerprint = ex.fingerprint()
    params = built_registry.root / "params.yaml"
    stat = params.stat()
    try:
        os.utime(params, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        assert ex.fingerprint() != fingerprint  # a changed input: a new key, nothing stale is served
    finally:
        os.utime(params, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    ex.close()


def _texts(data):
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict | list):
        for x in data.values() if isinstance(data, dict) else data:
            yield from _texts(x)


def test_numbers_the_explorer_shows_come_from_the_one_formatter(built_copy: Layout) -> None:
    """A calibration fraction that Python's `:g` prints in exponent notation (1.5e-05), a sizing throughput of two
    million tokens/s (`:g`: '2e+06') and a training MFU: every view prints them as `core/format.py` does."""
    from fabricref.core.format import format_percent
    from fabricref.explore.app import create_app

    path = built_copy.root / "models" / "calibration" / "collectives.yaml"
    text = path.read_text()
    for stated in ("      value: 0.822\n", "        value: 0.6875\n"):  # NVLink 4's ring and NVLS efficiencies
        assert stated in text
        text = text.replace(stated, stated.replace(stated.split()[-1], "0.000015"), 1)
    path.write_text(text)
    with serve(app=create_app(built_copy.root, warm=False)) as url, client(url) as c:
        e = c.post("/api/estimate", json={"topology": "nvidia-dgx-h100", "workload": "llama70b-serve-aggregated"})
        assert e.status_code == 200, e.text[:300]
        lineage = [x for p in e.json()["phases"] for x in p["lineage"] if x["field"].startswith("link_classes.nvlink4")]
        shown = {x["shown"]["value"] for x in lineage if x["field"].endswith("efficiency")}
        assert shown == {"0.000015"}, lineage
        texts = list(_texts(e.json()))  # what is printed; the JSON numbers keep their exact value (1.5e-05)
        assert not [t for t in texts if "e-05" in t]
        for field in ("link_classes.nvlink4.efficiency", "link_classes.nvlink4.nvls.efficiency"):
            assert c.get(f"/api/calibration/{field}").json()["shown"]["value"] == "0.000015"
        body = {"output_tokens": 200, "requests_per_second": 100, "group_tokens_per_second": 2e6, "headroom": 1e-5}
        fleet = {r["quantity"]: r for r in c.post("/api/sizing", json=body).json()["sections"]["fleet"]}
        formula = fleet["serving groups"]["formula"]
        assert "headroom 0.00001" in formula and "(2,000,000 tokens/s)" in formula, formula
        train = {"topology": "illustrative-h100-4096", "workload": "llama70b-train-tp8-pp4-dp32"}
        step = c.post("/api/estimate", json=train).json()["step"]
    (mfu,) = [r for r in step["rows"] if r["quantity"].startswith("MFU")]
    assert mfu["value"] == format_percent(step["values"]["mfu"]) and mfu["value"].endswith("%")
