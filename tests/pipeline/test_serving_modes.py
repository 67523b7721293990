"""A serving workload is sized by its mode's pools: one TP group (`tp`) when aggregated, a prefill and a decode pool
(`prefill_tp`, `decode_tp`) when disaggregated. A size of the other mode is refused wherever it is written (the
workload file, params.yaml, `--set`, the API's knobs) naming it and the mode, never taken and then ignored: TP 16
on a disaggregated service printed phases of TP 8 and exited 0. Every shipped serving workload, from models/."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT
from fabricref.errors import FabricrefError, UsageError
from fabricref.formats.workload import Inference

SERVING = sorted(
    p.stem
    for p in (ROOT / "models" / "workloads").glob("*.yaml")
    if re.search(r"^kind:\s*inference\s*$", p.read_text(encoding="utf-8"), re.M)
)
OTHER = {"aggregated": "disaggregated", "disaggregated": "aggregated"}


def _mode(lay, wid: str) -> str:
    from fabricref.estimate.workloads import find_workload

    return find_workload(lay, wid).inference.mode


def test_both_modes_are_shipped():
    from fabricref.core.paths import Layout

    assert {_mode(Layout(ROOT), w) for w in SERVING} == set(Inference.POOLS)


@pytest.mark.parametrize("wid", SERVING)
def test_another_modes_pool_size_as_a_knob_is_refused_naming_it_and_the_mode(no_sources, wid):
    from fabricref.estimate.workloads import find_workload, with_knobs

    w = find_workload(no_sources, wid)
    mode = w.inference.mode
    for key in Inference.POOLS[OTHER[mode]][:2]:
        with pytest.raises(UsageError, match=rf"^{key}: not a knob of this {mode} inference workload; expected one of"):
            with_knobs(w, {key: 16})
    own = Inference.POOLS[mode][0]
    assert getattr(with_knobs(w, {own: 2}).inference, own) == 2


@pytest.mark.parametrize("wid", SERVING)
def test_switching_the_mode_takes_the_new_modes_pools_and_drops_the_files(no_sources, wid):
    from fabricref.estimate.workloads import find_workload, with_knobs

    w = find_workload(no_sources, wid)
    other = OTHER[w.inference.mode]
    sizes = {k: 2 for k in Inference.POOLS[other] if k != "decode_pool_start"}
    switched = with_knobs(w, {"mode": other, **sizes})
    assert switched.inference.mode == other
    assert switched.accelerators == sum(sizes.values())
    assert switched.inference.model_fields_set >= set(sizes)
    assert not set(Inference.POOLS[w.inference.mode]) & switched.inference.model_fields_set


@pytest.mark.parametrize("where", ["params.yaml", "workload file"])
@pytest.mark.parametrize("wid", SERVING)
def test_another_modes_pool_size_written_in_a_file_is_refused_at_its_line(no_sources, wid, where):
    """In params.yaml's block of the workload, or in the workload file's `inference` block."""
    from fabricref.estimate.workloads import find_workload

    mode = _mode(no_sources, wid)
    key = Inference.POOLS[OTHER[mode]][0]
    if where == "params.yaml":
        path, after, indent = no_sources.root / "params.yaml", f"\n  {wid}:\n", "    "
        at, says = (
            rf"params\.yaml:{{}}: at \$\.workloads\.{re.escape(wid)}\.{key}: ",
            f"not a knob of a {mode} inference",
        )
    else:
        path, after, indent = no_sources.root / "models" / "workloads" / f"{wid}.yaml", f"  mode: {mode}\n", "  "
        at, says = rf"{re.escape(wid)}\.yaml:{{}}: at \$\.inference\.{key}: ", f"a {mode} service does not read it"
    text = path.read_text(encoding="utf-8")
    assert after in text
    path.write_text(text.replace(after, f"{after}{indent}{key}: 4\n", 1), encoding="utf-8")
    line = path.read_text(encoding="utf-8").splitlines().index(f"{indent}{key}: 4") + 1
    with pytest.raises(FabricrefError) as caught:
        find_workload(no_sources, wid)
    said = str(caught.value)
    assert re.search(at.format(line), said) and says in said, said


def test_tp_16_on_a_disaggregated_service_is_refused_by_the_cli_not_printed_as_tp_8(built_registry, cli):
    wid = next(w for w in SERVING if _mode(built_registry, w) == "disaggregated")
    done = cli("estimate", "workload", "illustrative-h100-4096", wid, "--set", "tp=16", root=built_registry.root)
    assert done.code == 2, done.said
    assert "tp: not a knob of this disaggregated inference workload" in done.said, done.said
    assert "prefill_tp, decode_tp" in done.said, done.said


@pytest.mark.parametrize("wid", SERVING)
def test_a_pool_tp_that_does_not_split_the_model_is_refused_naming_the_knob(built_registry, wid):
    """TP 3 on a model of hidden 8,192 and 64 heads was costed as if a serving engine could split it."""
    from fabricref.estimate.traffic import estimate
    from fabricref.estimate.workloads import find_workload, with_knobs

    w = find_workload(built_registry, wid)
    m = w.model
    heads = m.heads or m.hidden // m.head_dim
    tp = next(t for t in range(3, 64) if heads % t or m.hidden % t)
    for key in Inference.POOLS[w.inference.mode][:2]:
        with pytest.raises(UsageError, match=rf"^workload {wid}: at \$\.inference\.{key}: {tp} must divide model\."):
            estimate(built_registry, "illustrative-h100-4096", with_knobs(w, {key: tp}))
