"""The explorer's plan page: `fabricref plan train` run in memory (nothing is written: no plans/ file, no --save),
its ranked layouts and Pareto front as the page shows them, each with a link that opens it on the model view."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from .. import api
from ..core.format import format_quantity
from ..plan.layout import Layout
from . import models as fmt
from .explorer import Explorer

# Routed per physical link in the explorer (the rest analytical, labelled so): a search answers within the
# explorer's time limit on the largest cluster.
ROUTED = 3


def search(explorer: Explorer, request: fmt.PlanRequest) -> fmt.PlanPage:
    """The search of `request`, once per content of the registry (the explorer's cache)."""
    return explorer.memo(("plan", request.model_dump_json()), lambda: _search(explorer, request))


def _search(explorer: Explorer, request: fmt.PlanRequest) -> fmt.PlanPage:
    q = request
    result = api.plan_train(
        q.model, q.cluster, root=explorer.lay.root, gpus=(q.gpus,) if q.gpus else None, global_batch=q.global_batch,
        seq=q.seq, objective=q.objective, top=q.top, max_layouts=q.max_layouts, route_top=min(ROUTED, q.top),
    )  # fmt: skip
    return fmt.PlanPage(
        plan_id=result.plan_id,
        request=result.request,
        counts=result.counts,
        layouts=[_layout(r, q) for r in result.top],
        pareto=[_layout(r, q) for r in result.pareto],
        rejections=result.rejections,
        notes=result.notes,
    )


def _layout(r: dict[str, Any], q: fmt.PlanRequest) -> fmt.PlanLayout:
    x = Layout.of_row(r)
    choices = {name: r[name] for name in fmt.LayoutChoices.model_fields}
    choices["schedule"] = x.schedule if x.schedule == "1f1b" else f"interleaved (v = {x.v})"
    if r["cp"] > 1:
        url, note = None, "context parallelism is not a knob of the model view"
    else:
        knobs = {"topology": q.cluster, "workload": q.model, "tp": r["tp"], "pp": r["pp"], "dp": r["dp"]}
        if r["ep"] > 1:
            knobs["ep"] = r["ep"]
        knobs |= {"micro_batch": r["micro_batch"], "microbatches": r["microbatches"], "seq_len": r["seq_len"]}
        url = "/model?" + urlencode(knobs)
        note = "opens its TP, PP, DP, EP and micro-batches; ZeRO, recompute and schedule stay the workload's"
    step, routed = r["step_seconds"], r["routed_step_seconds"]
    shown = {
        "step": format_quantity(step, "s"),
        "routed_step": format_quantity(routed, "s") if routed is not None else "—",
        "exposed_communication": format_quantity(r["exposed_communication_seconds"], "s"),
        "memory_per_rank": format_quantity(r["memory_per_rank_bytes"], "B"),
        "headroom": format_quantity(r["headroom_bytes"], "B"),
        "fit": "fits" if r["fits"] else ("does not fit" if r["fits"] is False else "unknown"),
    }
    return fmt.PlanLayout(
        rank=r["rank"],
        layout_id=r["layout_id"],
        describe=x.describe(),
        **choices,
        step_seconds=step,
        routed_step_seconds=routed,
        exposed_communication_seconds=r["exposed_communication_seconds"],
        memory_per_rank_bytes=r["memory_per_rank_bytes"],
        headroom_bytes=r["headroom_bytes"],
        fits=r["fits"],
        dominant=r["dominant"],
        must_talk=r["must_talk"],
        confidence=r["confidence"],
        costing=r["costing"],
        pareto=bool(r["pareto"]),
        open_url=url,
        open_note=note,
        shown=shown,
    )
