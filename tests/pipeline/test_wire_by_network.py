"""Bytes on the wire split by network add up to the phase's bytes on the wire (issue 12: "bytes on the wire split
by network"). A routed phase that the collective library runs with another algorithm (NVLS, one-shot) reports the
library's bytes, and its one network carries all of them; a send counts the bytes its sending rank injects."""

from __future__ import annotations

import pytest
from fabricref.core.paths import Layout

# (topology, workload, phase) → bytes per rank on the wire, hand-computed:
# prefill TP all-reduce under NVLS: buffer 8192 tokens × 8192 hidden × 2 B = 134,217,728 B; NVLS moves (n + 1) / n
# of it per rank on 8 GPUs = 150,994,944 B (the ring's 2 (n − 1) / n = 234,881,024 B is not what runs);
# decode one-shot all-reduce: 8,192 hidden × 2 B = 16,384 B, each rank reads the 7 others' = 114,688 B;
# KV transfer on GB200 NVL72: one send of 1,342,177,280 B per sending rank (not halved over both ends).
# FSDP reduce-scatter of llama8b (16e9 B of bf16 gradients) over DP 64 = 8 servers × 8 GPUs, NCCL's flat ring: every
# rank sends 63/64 × 16e9 = 15.75e9 B; in each channel one of a server's 8 ranks sends across servers, so 1/8 of it
# (1.96875e9 B) is on each rank's NIC and 7/8 (13.78125e9 B) on NVLink.
HIERARCHICAL = {
    ("illustrative-h100-4096", "llama8b-fsdp-dp64", "dp-reduce-scatter"): {
        "scale_up": 13.78125e9,
        "scale_out": 1.96875e9,
    },
}
CASES = [
    ("nvidia-dgx-h100", "llama70b-serve-aggregated", "prefill-tp-all-reduce", 150_994_944.0),
    ("nvidia-dgx-h100", "llama70b-serve-aggregated", "decode-tp-all-reduce", 114_688.0),
    ("nvidia-gb200-nvl72", "llama70b-serve-disaggregated", "kv-transfer", 1_342_177_280.0),
]


@pytest.mark.slow
def test_bytes_by_network_add_up_to_the_bytes_on_the_wire(built_registry: Layout) -> None:
    """On the session's shared registry (topology stage included; the API only reads it)."""
    import fabricref

    pairs = {(t, w) for t, w, _, _ in CASES} | {(t, w) for t, w, _ in HIERARCHICAL}
    for topology, workload in sorted(pairs):
        phases = {p["phase"]: p for p in fabricref.estimate_workload(topology, workload, built_registry.root)}
        for p in phases.values():
            by_net = p["bytes_on_wire_per_rank_by_network"]
            if by_net:  # every phase, hierarchical ones (scale_up+scale_out) included
                assert sum(by_net.values()) == pytest.approx(p["bytes_on_wire_per_rank"]), (topology, p["phase"])
        for t, w, phase, wire in CASES:
            if (t, w) == (topology, workload):
                assert phases[phase]["bytes_on_wire_per_rank"] == pytest.approx(wire)
                assert phases[phase]["bytes_on_wire_per_rank_by_network"] == {"scale_up": pytest.approx(wire)}
        for (t, w, phase), split in HIERARCHICAL.items():
            if (t, w) == (topology, workload):
                assert phases[phase]["network"] == "scale_up+scale_out"
                assert phases[phase]["bytes_on_wire_per_rank_by_network"] == pytest.approx(split)
                assert phases[phase]["bytes_on_wire_per_rank"] == pytest.approx(sum(split.values()))
