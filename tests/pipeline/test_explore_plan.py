"""The explorer's plan page through a real uvicorn on 127.0.0.1: the search the CLI runs, in memory (nothing
written), its ranked layouts with fit, dominant cost, exposed communication and confidence, the Pareto front, a link
that opens a layout on the model view, and bad input refused by field."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from fabricref.core.paths import Layout

MODEL, CLUSTER = "llama8b-fsdp-dp64", "illustrative-h100-64"
# The 8B model on 8 of the 64 GPUs, 8 sequences a step: ~2,400 layouts, a search of seconds.
SMALL = {"model": MODEL, "cluster": CLUSTER, "gpus": 8, "global_batch": 8, "top": 5}


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_the_plan_endpoint_is_the_planners_search_and_writes_nothing(http, built_registry: Layout) -> None:
    from fabricref import api
    from fabricref.core.format import format_quantity

    root = built_registry.root
    before = _files(root)
    r = http.post("/api/plan", json=SMALL)
    assert r.status_code == 200, r.text
    page = r.json()
    assert _files(root) == before  # no plans/ file, no workload saved
    cli = api.plan_train(MODEL, CLUSTER, root=root, gpus=(8,), global_batch=8, top=5, route_top=3)
    assert page["plan_id"] == cli.plan_id and page["counts"] == cli.counts
    assert [x["layout_id"] for x in page["layouts"]] == [x["layout_id"] for x in cli.top]
    assert [x["layout_id"] for x in page["pareto"]] == [x["layout_id"] for x in cli.pareto]
    first = page["layouts"][0]
    assert first["rank"] == 1 and first["step_seconds"] == cli.top[0]["step_seconds"]
    assert first["shown"]["fit"] == "fits" and first["shown"]["step"] == format_quantity(first["step_seconds"], "s")
    assert first["dominant"] and first["confidence"] and first["exposed_communication_seconds"] is not None
    assert [x["costing"] for x in page["layouts"]][:3] == ["routed per link"] * 3
    assert {x["costing"] for x in page["layouts"][3:]} <= {"analytical per-tier"}
    assert any(x["pareto"] for x in page["layouts"]) and all(x["pareto"] for x in page["pareto"])


def test_open_this_layout_carries_its_knobs_to_the_model_view(http) -> None:
    page = http.post("/api/plan", json=SMALL).json()
    for x in page["layouts"]:
        if x["cp"] > 1:
            assert x["open_url"] is None and "context parallelism" in x["open_note"]
            continue
        url = urlsplit(x["open_url"])
        assert url.path == "/model"
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        assert (q["topology"], q["workload"]) == (CLUSTER, MODEL)
        assert (int(q["tp"]), int(q["pp"]), int(q["dp"])) == (x["tp"], x["pp"], x["dp"])
        assert (int(q["micro_batch"]), int(q["microbatches"])) == (x["micro_batch"], x["microbatches"])
        # The model view estimates the layout it was given (the workload with those knobs) on the cluster.
        knobs = {k: int(q[k]) for k in ("tp", "pp", "dp", "micro_batch", "microbatches", "seq_len")}
        est = http.post("/api/estimate", json={"topology": CLUSTER, "workload": MODEL, "knobs": knobs})
        assert est.status_code == 200, est.text


@pytest.mark.parametrize(
    ("body", "loc", "message"),
    [
        ({"model": MODEL, "cluster": CLUSTER, "top": 0}, ["body", "top"], "greater than or equal to 1"),
        ({"model": "../etc", "cluster": CLUSTER}, ["body", "model"], "should match pattern"),
        ({"model": MODEL, "cluster": CLUSTER, "objective": "price"}, ["body", "objective"], "'step'"),
        ({"model": MODEL, "cluster": CLUSTER, "gpus": 128}, [], "--gpus 128: illustrative-h100-64 has 64 accelerators"),
        (
            {"model": "llama70b-train-tp8-pp4-dp32", "cluster": CLUSTER, "gpus": 8, "global_batch": 8},
            [],
            "no legal layout of",
        ),
    ],
)
def test_bad_plan_requests_are_refused_by_field_or_with_the_planners_message(http, body, loc, message) -> None:
    r = http.post("/api/plan", json=body)
    assert r.status_code == 422, r.text
    (d,) = r.json()["detail"]
    assert d["loc"] == loc and message in d["msg"]


def test_the_plan_page_is_in_the_navigation(http) -> None:
    r = http.get("/plan")
    assert r.status_code == 200
    assert '<a href="/plan" aria-current="page">Plan</a>' in r.text
    assert f'<option value="{MODEL}"' in r.text and "llama70b-serve-aggregated" not in r.text  # training only
