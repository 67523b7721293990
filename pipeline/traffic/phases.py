"""A workload's phases on a topology: group of ranks, collective and algorithm, bytes, network, links,
bottleneck bandwidth, and time = fixed path overhead + bytes ÷ effective bandwidth + queueing.

Ranks are placed onto accelerators in topology order with tensor parallelism innermost, then data parallel,
then pipeline stages (rank = tp + TP·(dp + DP·pp)). Groups are regular, so one representative group per
phase is costed and the number of groups running it at the same time is counted: never every pair of ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..compile.references import CONFIDENCE_ORDER
from ..core.errors import UsageError
from . import collectives, sizing
from .view import TIER_NAMES, Lineage, View
from .workloads import Workload

GBPS_TO_BYTES = 1e9 / 8


@dataclass
class Phase:
    phase: str
    description: str
    collective: str
    algorithm: str
    group_size: int
    concurrent_groups: int
    count: int
    bytes_per_rank: float
    bytes_on_wire_per_rank: float
    network: str
    tier: str
    hops: int
    bottleneck_gbps: float | None
    effective_gbps: float | None
    latency_s: float
    bandwidth_s: float
    queueing_s: float
    lineage: set[Lineage] = field(default_factory=set)
    notes: str = ""
    links: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.latency_s + self.bandwidth_s + self.queueing_s

    @property
    def total_seconds(self) -> float:
        return self.seconds * self.count

    @property
    def dominant(self) -> str:
        terms = {"latency": self.latency_s, "bandwidth": self.bandwidth_s, "queueing": self.queueing_s}
        return max(terms, key=lambda k: terms[k])

    @property
    def confidence(self) -> str:
        order = {**{s: i for i, s in enumerate(CONFIDENCE_ORDER)}, "derived": 0}
        statuses = [x.status for x in self.lineage] or ["unknown"]
        weakest = max(statuses, key=lambda s: order.get(s, len(order)))
        return "published" if weakest == "derived" else weakest


class CannotEstimate(UsageError):
    """A phase rests on a bandwidth no source or assumption states."""


def _bytes(gbps: float | None, what: str) -> float:
    if gbps is None:
        raise CannotEstimate(f"{what}: the bandwidth is unknown (no source states it and no assumption is declared)")
    return gbps * GBPS_TO_BYTES


def collective(
    view: View, name: str, description: str, op: str, group: list[str], size: float, count: int, concurrent: int
) -> Phase:
    """Cost one collective over `group`: flat inside one domain, flat across domains, or hierarchical."""
    n = len(group)
    by_domain: dict[str, list[str]] = {}
    for acc in group:
        by_domain.setdefault(view.domain(acc), []).append(acc)
    if len(by_domain) == 1:
        path = view.scale_up(group[0])
        bw = _bytes(path.per_rank_gbps, f"{name} over the scale-up domain")
        est = collectives.estimate(op, n, size, bw, path.latency_s)
        return Phase(
            name,
            description,
            op,
            "ring over all scale-up links of each rank",
            n,
            concurrent,
            count,
            size,
            est.bytes_on_wire_per_rank,
            "scale_up",
            TIER_NAMES[0],
            path.hops,
            path.per_rank_gbps,
            path.per_rank_gbps,
            est.latency_seconds,
            est.bandwidth_seconds,
            0.0,
            path.lineage,
            links=[_link("scale_up injection per rank", est.bytes_on_wire_per_rank, path.per_rank_gbps, est.seconds)],
        )
    local = {len(m) for m in by_domain.values()}
    if local != {1}:
        return _hierarchical(view, name, description, op, by_domain, size, count, concurrent)
    tier = max(view.tier(a, b) for a, b in zip(group, group[1:] + group[:1], strict=True))
    far = max(group[1:], key=lambda b: view.tier(group[0], b))
    path, factor = view.scale_out(group[0], far, tier)
    bw = _bytes(path.per_rank_gbps, f"{name} over the scale-out fabric")
    est = collectives.estimate(op, n, size, bw, path.latency_s)
    queue = est.bytes_on_wire_per_rank / (bw / factor) - est.bandwidth_seconds
    eff = path.per_rank_gbps / factor  # type: ignore[operator]
    note = (
        ""
        if factor == 1
        else (
            f"queueing: every group of this phase runs at once, so the oversubscribed tier "
            f"({factor:g}:1 along the path) shares its uplinks (fluid share)"
        )
    )
    links = [_link("NIC link per rank", est.bytes_on_wire_per_rank, path.per_rank_gbps, est.seconds + queue)]
    if tier >= 2:
        links.append(_link("leaf uplinks (per NIC share)", est.bytes_on_wire_per_rank, eff, est.seconds + queue))
    return Phase(
        name,
        description,
        op,
        "ring across domains (one rank per domain)",
        n,
        concurrent,
        count,
        size,
        est.bytes_on_wire_per_rank,
        "scale_out",
        TIER_NAMES[tier],
        path.hops,
        path.per_rank_gbps,
        eff,
        est.latency_seconds,
        est.bandwidth_seconds,
        queue,
        path.lineage,
        note,
        links,
    )


def _hierarchical(
    view: View,
    name: str,
    description: str,
    op: str,
    by_domain: dict[str, list[str]],
    size: float,
    count: int,
    concurrent: int,
) -> Phase:
    """Inside each domain first, then across domains with every local rank driving its own NIC in parallel."""
    members = list(by_domain.values())
    local, outer = len(members[0]), len(members)
    across_group = [m[0] for m in members]
    if op == "all-to-all":
        # Each rank sends S/n to every rank: (local-1)/n·S stays in the domain, (n-local)/n·S crosses the fabric.
        parts = [
            collective(view, name, description, "all-to-all", members[0], size / outer, 1, concurrent),
            collective(view, name, description, "all-to-all", across_group, size, 1, concurrent),
        ]
        algorithm = "hierarchical all-to-all: the in-domain share over scale-up, the rest over scale-out"
    elif op == "all-reduce":
        parts = [
            collective(view, name, description, "reduce-scatter", members[0], size, 1, concurrent),
            collective(view, name, description, "all-reduce", across_group, size / local, 1, concurrent),
            collective(view, name, description, "all-gather", members[0], size, 1, concurrent),
        ]
        algorithm = (
            f"hierarchical: reduce-scatter inside each {local}-rank domain, all-reduce of S/{local} across "
            f"{outer} domains (every local rank on its own NIC), all-gather inside"
        )
    else:
        inner = collective(view, name, description, op, members[0], size, 1, concurrent)
        across = collective(view, name, description, op, across_group, size / local, 1, concurrent)
        parts = [inner, across] if op == "reduce-scatter" else [across, inner]
        algorithm = f"hierarchical {op}: inside each {local}-rank domain and across {outer} domains"
    across = parts[1] if op != "all-gather" else parts[0]
    return Phase(
        name,
        description,
        op,
        algorithm,
        local * outer,
        concurrent,
        count,
        size,
        sum(p.bytes_on_wire_per_rank for p in parts),
        "scale_up+scale_out",
        across.tier,
        max(p.hops for p in parts),
        across.bottleneck_gbps,
        across.effective_gbps,
        sum(p.latency_s for p in parts),
        sum(p.bandwidth_s for p in parts),
        sum(p.queueing_s for p in parts),
        set().union(*(p.lineage for p in parts)),
        across.notes,
        [x for p in parts for x in p.links],
    )


def send(view: View, name: str, description: str, a: str, b: str, size: float, count: int, concurrent: int) -> Phase:
    tier = view.tier(a, b)
    if tier == 0:
        path, factor = view.scale_up(a), 1.0
        network = "scale_up"
    else:
        path, factor = view.scale_out(a, b, tier, concurrent=concurrent > 1)
        network = "scale_out"
    bw = _bytes(path.per_rank_gbps, f"{name} from {a} to {b}")
    est = collectives.estimate("send", 2, size, bw, path.latency_s)
    queue = size / (bw / factor) - est.bandwidth_seconds
    eff = path.per_rank_gbps / factor  # type: ignore[operator]
    return Phase(
        name,
        description,
        "send",
        "point-to-point",
        2,
        concurrent,
        count,
        size,
        size,
        network,
        TIER_NAMES[tier],
        path.hops,
        path.per_rank_gbps,
        eff,
        est.latency_seconds,
        est.bandwidth_seconds,
        queue,
        path.lineage,
        "",
        [_link(f"{network} path per sender", size, path.per_rank_gbps, est.seconds)],
    )


def _link(name: str, bytes_: float, gbps: float | None, seconds: float) -> dict[str, Any]:
    util = None if not gbps or seconds <= 0 else bytes_ / (gbps * GBPS_TO_BYTES * seconds)
    return {"link_class": name, "bytes": bytes_, "capacity_gbps": gbps, "busy_seconds": seconds, "utilization": util}


def _act_bytes(w: Workload) -> float:
    return sizing.dtype_bytes(w.model["dtype"])


def place(view: View, w: Workload, offset: int = 0) -> list[str]:
    needed = w.accelerators
    view.check_size(offset + needed, f"workload {w.id}")
    return view.accelerators[offset : offset + needed]


def check_tp(view: View, tp: int, group: list[str], what: str) -> None:
    reference = view.reference
    if tp > view.domain_size:
        raise UsageError(
            f"{what}: tensor parallel degree {tp} exceeds the scale-up domain of {reference} "
            f"({view.domain_size} accelerators); tensor parallelism must stay inside one scale-up domain"
        )
    if len({view.domain(a) for a in group}) > 1:
        raise UsageError(
            f"{what}: the tensor-parallel group would straddle two scale-up domains of {reference}; "
            f"choose a degree that divides the domain size {view.domain_size}"
        )


def training(view: View, w: Workload, offset: int = 0) -> list[Phase]:
    t, m = w.training, w.model
    assert t is not None
    tp, pp, dp, ep = t["tp"], t["pp"], t["dp"], t.get("ep", 1)
    accs = place(view, w, offset)

    def rank(tp_i: int, dp_i: int, pp_i: int) -> str:
        return accs[tp_i + tp * (dp_i + dp * pp_i)]

    act = t["micro_batch"] * t["seq_len"] * m["hidden"] * _act_bytes(w)
    layers_per_stage = m["layers"] / pp
    phases: list[Phase] = []
    if tp > 1:
        group = [rank(i, 0, 0) for i in range(tp)]
        check_tp(view, tp, group, f"workload {w.id}")
        phases.append(
            collective(
                view,
                "tp-all-reduce",
                "tensor-parallel activation all-reduce (2 forward + 2 backward per layer per micro-batch)",
                "all-reduce",
                group,
                act,
                int(4 * layers_per_stage * t["microbatches"]),
                dp * pp,
            )
        )
    if pp > 1:
        phases.append(
            send(
                view,
                "pp-send",
                "pipeline activations forward and gradients backward between "
                "neighbouring stages (per TP rank, scatter-gather of 1/TP)",
                rank(0, 0, 0),
                rank(0, 0, 1),
                act / tp,
                2 * t["microbatches"],
                tp * dp * (pp - 1),
            )
        )
    if dp > 1:
        grad = m["params"] / (tp * pp) * sizing.dtype_bytes(t.get("grad_dtype", "bf16"))
        group = [rank(0, d, 0) for d in range(dp)]
        if t.get("sharded"):
            phases.append(
                collective(
                    view,
                    "dp-reduce-scatter",
                    "sharded data parallel (FSDP / ZeRO-3): reduce-scatter of gradients",
                    "reduce-scatter",
                    group,
                    grad,
                    1,
                    tp * pp,
                )
            )
            phases.append(
                collective(
                    view,
                    "dp-all-gather",
                    "sharded data parallel: all-gather of parameters, forward and backward",
                    "all-gather",
                    group,
                    grad,
                    2,
                    tp * pp,
                )
            )
        else:
            phases.append(
                collective(
                    view, "dp-all-reduce", "data-parallel gradient all-reduce", "all-reduce", group, grad, 1, tp * pp
                )
            )
    if ep > 1:
        e = m["experts"]
        flat = [rank(i % tp, i // tp, 0) for i in range(ep)]
        tokens = t["micro_batch"] * t["seq_len"] * e["top_k"] * m["hidden"] * _act_bytes(w)
        phases.append(
            collective(
                view,
                "ep-all-to-all",
                "expert-parallel all-to-all dispatch and combine (forward and backward per MoE layer per micro-batch)",
                "all-to-all",
                flat,
                tokens,
                int(4 * e["moe_layers"] / pp * t["microbatches"]),
                tp * dp * pp // ep,
            )
        )
    return phases


def inference(view: View, w: Workload, offset: int = 0) -> list[Phase]:
    i, m = w.inference, w.model
    assert i is not None
    accs = place(view, w, offset)
    batch = i.get("batch", 1)
    hidden_bytes = m["hidden"] * _act_bytes(w)
    phases: list[Phase] = []
    kv = sizing.kv_cache(m["layers"], m["kv_heads"], m["head_dim"], m["dtype"], i["prompt_tokens"])
    if i["mode"] == "aggregated":
        tp = i.get("tp", 1)
        group = accs[:tp]
        check_tp(view, tp, group, f"workload {w.id}")
        if tp > 1:
            phases.append(
                collective(
                    view,
                    "prefill-tp-all-reduce",
                    "prefill: 2 TP all-reduces per layer over the whole prompt",
                    "all-reduce",
                    group,
                    batch * i["prompt_tokens"] * hidden_bytes,
                    2 * m["layers"],
                    1,
                )
            )
            phases.append(
                collective(
                    view,
                    "decode-tp-all-reduce",
                    "decode: 2 TP all-reduces per layer per output token",
                    "all-reduce",
                    group,
                    batch * hidden_bytes,
                    2 * m["layers"] * i["output_tokens"],
                    1,
                )
            )
    else:
        ptp, dtp = i.get("prefill_tp", 1), i.get("decode_tp", 1)
        start = i.get("prefill_offset", ptp)
        view.check_size(offset + start + dtp, f"workload {w.id}")
        prefill = accs[:ptp]
        decode = view.accelerators[offset + start : offset + start + dtp]
        check_tp(view, ptp, prefill, f"workload {w.id} prefill pool")
        check_tp(view, dtp, decode, f"workload {w.id} decode pool")
        if ptp > 1:
            phases.append(
                collective(
                    view,
                    "prefill-tp-all-reduce",
                    "prefill pool: 2 TP all-reduces per layer",
                    "all-reduce",
                    prefill,
                    batch * i["prompt_tokens"] * hidden_bytes,
                    2 * m["layers"],
                    1,
                )
            )
        local = view.domain(prefill[0]) == view.domain(decode[0])
        phases.append(
            send(
                view,
                "kv-transfer",
                "KV cache from the prefill pool to the decode pool ("
                + (
                    "local: both pools in one scale-up domain"
                    if local
                    else "crosses the scale-out fabric: the pools sit in different domains"
                )
                + "); each of the decode ranks receives its 1/TP shard of the KV heads",
                prefill[0],
                decode[0],
                kv["bytes"] * batch / dtp,
                1,
                dtp,
            )
        )  # type: ignore[operator]
        if dtp > 1:
            phases.append(
                collective(
                    view,
                    "decode-tp-all-reduce",
                    "decode pool: 2 TP all-reduces per layer per output token",
                    "all-reduce",
                    decode,
                    batch * hidden_bytes,
                    2 * m["layers"] * i["output_tokens"],
                    1,
                )
            )
    phases.append(_frontend(view, w, accs[0]))
    return phases


def _frontend(view: View, w: Workload, acc: str) -> Phase:
    """Client requests in and tokens out over the frontend/service network, never the backend fabric."""
    i = w.inference or {}
    per_token = i.get("bytes_per_token_on_frontend", 4.0)
    size = (i["prompt_tokens"] + i["output_tokens"]) * per_token * i.get("batch", 1)
    g = view.g
    cpu = next((n for n, d in g[acc].items() if view.kind[n] == "cpu"), None)
    fnics = [n for n in g[cpu] if view.kind[n] == "nic" and g.nodes[n].get("role") == "frontend"] if cpu else []
    if not fnics:
        raise CannotEstimate(f"workload {w.id}: no frontend NIC on the host of {acc}")
    edges = [d for n in fnics for m, d in g[n].items() if d["network"] in ("frontend", "host")]
    nic_speed = g.graph.get("frontend_nic_gbps")
    bw = _bytes(nic_speed, f"workload {w.id} frontend")
    frontend = [d for d in edges if d["network"] == "frontend"]
    # Client → frontend core → access switch → frontend NIC → CPU; a lone reference has only the NIC's host hop.
    hops = 3 if frontend else 1
    per_hop = (frontend or edges)[0]["latency_ns"] * 1e-9
    latency = view.endpoint_s + hops * per_hop
    lineage = {Lineage(view.reference, d["field"] or "topology-defaults", d["status"]) for d in edges}
    est = collectives.estimate("send", 2, size, bw, latency)
    return Phase(
        "frontend-request",
        f"client request in and {i['output_tokens']} tokens out over the frontend "
        "service network (separate from the backend fabric)",
        "send",
        "request/response",
        2,
        1,
        1,
        size,
        size,
        "frontend",
        "frontend network",
        hops,
        nic_speed,
        nic_speed,
        est.latency_seconds,
        est.bandwidth_seconds,
        0.0,
        lineage,
        f"frontend share per accelerator {view.summary['per_accelerator'].get('frontend_gbps')} Gb/s",
    )


def phases(view: View, w: Workload, offset: int = 0) -> list[Phase]:
    return training(view, w, offset) if w.kind == "training" else inference(view, w, offset)


def revealing(view: View, w: Workload) -> dict[str, Any]:
    """How many accelerators must communicate to make progress on one step / one request, and does it fit?"""
    if w.kind == "training":
        n = w.accelerators
        what = "one training step (the data-parallel all-reduce joins every replica)"
    else:
        i = w.inference or {}
        n = i.get("tp", 1) if i["mode"] == "aggregated" else i.get("prefill_tp", 1) + i.get("decode_tp", 1)
        what = "one request (" + ("its TP group" if i["mode"] == "aggregated" else "prefill pool + decode pool") + ")"
    accs = view.accelerators[:n]
    domains = len({view.domain(a) for a in accs})
    return {
        "accelerators_per_progress": n,
        "for": what,
        "scale_up_domain_size": view.domain_size,
        "domains_spanned": domains,
        "fits_in_one_domain": domains == 1,
    }


def sizing_summary(w: Workload) -> dict[str, Any]:
    m = w.model
    out: dict[str, Any] = {}
    if w.training:
        t = w.training
        mem = sizing.memory(m["params"], t.get("optimizer_layout", "mixed-adam"))
        shards = t["tp"] * t["pp"] * (t["dp"] if t.get("sharded") else 1)
        out["training_state_bytes"] = mem["bytes"]
        out["training_state_bytes_per_rank"] = mem["bytes"] / shards
        out["training_state_layout"] = mem["breakdown"]
    else:
        i = w.inference or {}
        weights = sizing.memory(m["params"], "bf16-weights" if m["dtype"] == "bf16" else "fp8-weights")
        kv = sizing.kv_cache(m["layers"], m["kv_heads"], m["head_dim"], m["dtype"], i["prompt_tokens"])
        out["weights_bytes"] = weights["bytes"]
        out["kv_bytes_per_token"] = kv["bytes_per_token"]
        out["kv_bytes_per_request"] = kv["bytes"]
        if i.get("requests_per_second") and i.get("group_tokens_per_second"):
            group = i.get("tp", 1) if i["mode"] == "aggregated" else i.get("prefill_tp", 1) + i.get("decode_tp", 1)
            cap = sizing.capacity(i["requests_per_second"], i["output_tokens"], i["group_tokens_per_second"], group)
            out["capacity"] = {
                "demand_tokens_per_second": cap.demand_tokens_per_second,
                "groups": cap.groups,
                "accelerators": cap.accelerators,
            }
    return out
