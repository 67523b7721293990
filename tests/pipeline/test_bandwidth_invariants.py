"""A phase's effective bandwidth is bounded by the wiring its flows were routed over, on every shipped workload laid
on every reference and cluster it fits (its declared targets or not).

Per rank: the bytes it puts on the wire per second never exceed the capacity of the links it sends them on (a
ring over eight rails may exceed one rail; a point-to-point send over one link may not). Per flow: a send's
effective bandwidth never exceeds its path's bottleneck. The bound is read from the phase's own link rows, the
routed figures, so a cost that credits links the flows never touch fails here.

Topologies and workloads are discovered from models/; a workload larger than a topology is first refused with
the error that says so, then laid again with its degrees shrunk to fit (overrides of its knobs)."""

from __future__ import annotations

import math
import re

import pytest
from conftest import CLUSTERS, FAST_SYSTEMS, ROOT, SYSTEM_REFERENCES
from fabricref.errors import UsageError
from fabricref.estimate.calibration import load_calibration
from fabricref.estimate.traffic import estimate
from fabricref.estimate.view import view_for
from fabricref.estimate.workloads import Workload, find_workload, with_knobs

WORKLOADS = sorted(p.stem for p in (ROOT / "models" / "workloads").glob("*.yaml"))
# What a workload that cannot be laid is told: too few accelerators, or TP beyond the scale-up domain.
CANNOT_LAY = re.compile(r"needs \d+ accelerators|tensor parallel degree \d+ exceeds the scale-up domain")
# A topology whose link bandwidth no source states costs nothing (never a made-up number), whatever the layout.
UNKNOWN = re.compile(r"bandwidth of .+ is unknown")
TOLERANCE = 1e-9


def _largest(limit: int, ok) -> int:
    return next(x for x in range(max(1, limit), 0, -1) if ok(x))


def fitted(w: Workload, accelerators: int, domain: int) -> Workload:
    """`w` with its degrees shrunk (never grown) until it fits `accelerators` in domains of `domain`, each
    degree still dividing what it splits: its knobs set otherwise, as `--set` does."""
    m = w.model
    if w.training is not None:
        t = w.training
        tp = _largest(min(t.tp, domain), lambda x: m.hidden % x == 0 and (m.kv_heads < x or m.kv_heads % x == 0))
        pp = _largest(min(t.pp, accelerators // tp), lambda x: m.layers % x == 0)
        dp = max(1, min(t.dp, accelerators // (tp * pp)))
        count = m.experts.count if m.experts is not None else 1
        ep = _largest(t.ep, lambda x: count % x == 0 and (tp * dp) % x == 0)
        return with_knobs(w, {"tp": tp, "pp": pp, "dp": dp, "ep": ep})
    i = w.inference
    assert i is not None
    if i.mode == "aggregated":
        return with_knobs(w, {"tp": min(i.tp, domain, accelerators)})
    if i.prefill_tp + i.decode_tp <= accelerators:
        return w
    half = 2 ** int(math.log2(max(1, accelerators // 2)))
    return with_knobs(w, {"prefill_tp": min(i.prefill_tp, half), "decode_tp": min(i.decode_tp, half)})


def sending_capacity_gbps(phase, kind: dict[str, str]) -> float | None:
    """The smallest, over the accelerators that send in this phase, of the capacity of the links they send on
    (Gb/s per direction, from the phase's routed link rows); None for a phase with no routed links."""
    out: dict[str, float] = {}
    for link in phase.links:
        if "source" not in link:
            return None
        for sender, nbytes in ((link["source"], link["bytes_forward"]), (link["target"], link["bytes_reverse"])):
            if nbytes > 0 and kind.get(sender) == "accelerator":
                out[sender] = out.get(sender, 0.0) + link["capacity_gbps"]
    return min(out.values()) if out else None


def check_phases(result, kind: dict[str, str]) -> list[str]:
    """Every violated bound of every phase, as readable lines."""
    wrong = []
    for p in result.phases:
        where = f"{result.topology_id} {result.workload.id} {p.phase}"
        if p.effective_gbps is None:
            continue
        bottleneck = p.bottleneck_gbps
        if p.collective == "send" and bottleneck is not None and p.effective_gbps > bottleneck * (1 + TOLERANCE):
            wrong.append(f"{where}: effective {p.effective_gbps:g} Gb/s > its path's bottleneck {bottleneck:g}")
        ceiling = sending_capacity_gbps(p, kind)
        if ceiling is not None and p.effective_gbps > ceiling * (1 + TOLERANCE):
            wrong.append(f"{where}: effective {p.effective_gbps:g} Gb/s > the {ceiling:g} Gb/s its ranks send on")
    return wrong


def _laid(lay, view, topology_id: str, workload_id: str):
    """The workload on the topology as shipped, or (when it does not fit, refused with the error that says so)
    with its degrees shrunk to fit; None where a bandwidth on its links is unknown (refused as such)."""
    w = find_workload(lay, workload_id)
    for attempt in (w, fitted(w, len(view.accelerators), view.domain_size)):
        try:
            return estimate(lay, topology_id, attempt, 0, view)
        except UsageError as exc:
            if UNKNOWN.search(str(exc)):
                return None
            assert attempt is w and CANNOT_LAY.search(str(exc)), f"{topology_id} {workload_id}: {exc}"
    raise AssertionError("unreachable")


def _topologies():
    """The fast tier lays every workload on FAST_SYSTEMS (the unknown bandwidth one: every estimate refused as
    such); the whole suite (CI) on every reference and cluster."""
    fast = set(FAST_SYSTEMS)
    return [t if t in fast else pytest.param(t, marks=pytest.mark.slow) for t in [*SYSTEM_REFERENCES, *CLUSTERS]]


@pytest.mark.parametrize("topology_id", _topologies())
def test_effective_bandwidth_never_exceeds_the_links_a_phase_uses(built_registry, topology_id):
    view = view_for(built_registry, topology_id)
    wrong = []
    for workload_id in WORKLOADS:
        result = _laid(built_registry, view, topology_id, workload_id)
        if result is not None:
            wrong += check_phases(result, view.kind)
    assert not wrong, "\n".join(wrong)


def test_the_mi300x_pair_sends_over_its_one_link(built_registry):
    """TP 4 prefill and TP 4 decode pools in one MI300X server: prefill rank i sends its KV shard to decode rank i
    over the one 512 Gb/s Infinity Fabric link joining them, at the calibrated efficiency of that link."""
    topology_id = "amd-mi300x-pollara400"
    view = view_for(built_registry, topology_id)
    w = with_knobs(find_workload(built_registry, "llama70b-serve-disaggregated"), {"prefill_tp": 4, "decode_tp": 4})
    kv = next(p for p in estimate(built_registry, topology_id, w, 0, view).phases if p.phase == "kv-transfer")
    assert kv.bottleneck_gbps == 512
    efficiency = load_calibration(built_registry.root).link_classes["infinity-fabric"].efficiency.value
    assert kv.effective_gbps == pytest.approx(512 * efficiency)
    assert kv.bandwidth_s == pytest.approx(kv.bytes_per_rank / (512e9 / 8 * efficiency))


def test_a_workload_that_cannot_be_laid_says_why(built_registry):
    """TP beyond the scale-up domain cannot be shrunk away by data parallelism: the error names the degree."""
    w = with_knobs(find_workload(built_registry, "llama70b-serve-aggregated"), {"tp": 16})
    with pytest.raises(UsageError, match=CANNOT_LAY):
        estimate(built_registry, "nvidia-dgx-h100", w, 0, view_for(built_registry, "nvidia-dgx-h100"))
