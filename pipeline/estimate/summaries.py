"""What a workload amounts to beyond its phases: how many accelerators must talk to make progress (and whether
they fit one scale-up domain), and the memory it holds (training state, weights, KV cache, serving capacity)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from . import sizing
from .placement import rank_accelerators
from .view import View
from .workloads import Workload


def revealing(view: View, w: Workload, offset: int = 0) -> dict[str, Any]:
    """How many accelerators must communicate to make progress on one step / one request, and does it fit one
    domain (the domains its placement puts its ranks on)?"""
    if w.kind == "training":
        what = "one training step (the data-parallel all-reduce joins every replica)"
    elif w.inference.mode == "aggregated":
        what = "one request (its TP group)"
    else:
        what = "one request (prefill pool + decode pool)"
    accs = rank_accelerators(view.g, w, offset, view.order).values()
    domains = len({view.domain(a) for a in accs})
    return {
        "accelerators_per_progress": w.accelerators,
        "for": what,
        "scale_up_domain_size": view.domain_size,
        "domains_spanned": domains,
        "fits_in_one_domain": domains == 1,
    }


def sizing_summary(w: Workload) -> dict[str, Any]:
    """Memory the workload holds: its whole training state, or weights, KV cache and serving capacity. A rank's
    share (ZeRO, EP and the pipeline stage it holds) is the step estimate's memory fit, not repeated here."""
    m = w.model
    out: dict[str, Any] = {}
    if w.training:
        mem = sizing.memory(m.params, w.training.optimizer_layout)
        out["training_state_bytes"] = mem["bytes"]
        out["training_state_layout"] = mem["breakdown"]
    else:
        i = w.inference
        kv = sizing.kv_cache(m.layers, m.kv_heads, m.head_dim, m.dtype, i.prompt_tokens)
        out["weights_bytes"] = m.params * sizing.dtype_bytes(m.dtype)  # as the step estimate holds them
        out["kv_bytes_per_token"] = kv["bytes_per_token"]
        out["kv_bytes_per_request"] = kv["bytes"]
        if i.requests_per_second and i.group_tokens_per_second:
            cap = sizing.capacity(i.requests_per_second, i.output_tokens, i.group_tokens_per_second, i.ranks)
            out["capacity"] = {k: v for k, v in asdict(cap).items() if k != "headroom"}
    return out
