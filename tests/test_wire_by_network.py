"""Bytes on the wire split by network add up to the phase's bytes on the wire (issue 12: "bytes on the wire split
by network"). A routed phase that the collective library runs with another algorithm (NVLS, one-shot) reports the
library's bytes, and its one network carries all of them; a send counts the bytes its sending rank injects."""

from __future__ import annotations

import shutil

import pytest

from pipeline.cli import main
from pipeline.core.paths import Layout

# (topology, workload, phase) → bytes per rank on the wire, hand-computed:
# prefill TP all-reduce under NVLS: buffer 8192 tokens × 8192 hidden × 2 B = 134,217,728 B; NVLS moves (n + 1) / n
# of it per rank on 8 GPUs = 150,994,944 B (the ring's 2 (n − 1) / n = 234,881,024 B is not what runs);
# decode one-shot all-reduce: 8,192 hidden × 2 B = 16,384 B, each rank reads the 7 others' = 114,688 B;
# KV transfer on GB200 NVL72: one send of 1,342,177,280 B per sending rank (not halved over both ends).
CASES = [
    ("nvidia-dgx-h100", "llama70b-serve-aggregated", "prefill-tp-all-reduce", 150_994_944.0),
    ("nvidia-dgx-h100", "llama70b-serve-aggregated", "decode-tp-all-reduce", 114_688.0),
    ("nvidia-gb200-nvl72", "llama70b-serve-disaggregated", "kv-transfer", 1_342_177_280.0),
]


@pytest.fixture(scope="module")
def topology_built(built_registry: Layout, tmp_path_factory: pytest.TempPathFactory) -> Layout:
    lay = Layout(tmp_path_factory.mktemp("wire") / "repo")
    shutil.copytree(built_registry.root, lay.root, symlinks=True)
    assert main(["topology", "--all", "--root", str(lay.root)]) == 0
    return lay


@pytest.mark.slow
def test_bytes_by_network_add_up_to_the_bytes_on_the_wire(topology_built: Layout) -> None:
    import fabricref

    for topology, workload in sorted({(t, w) for t, w, _, _ in CASES}):
        phases = {p["phase"]: p for p in fabricref.estimate_workload(topology, workload, topology_built.root)}
        for p in phases.values():
            by_net = p["bytes_on_wire_per_rank_by_network"]
            if by_net and "+" not in p["network"]:
                assert sum(by_net.values()) == pytest.approx(p["bytes_on_wire_per_rank"]), (topology, p["phase"])
        for t, w, phase, wire in CASES:
            if (t, w) == (topology, workload):
                assert phases[phase]["bytes_on_wire_per_rank"] == pytest.approx(wire)
                assert phases[phase]["bytes_on_wire_per_rank_by_network"] == {"scale_up": pytest.approx(wire)}
