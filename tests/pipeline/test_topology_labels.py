"""A topology's summary never shows an assumption as a fact: every part counted on a labelled assumption of the
reference model (its `assumptions:` block), every per-accelerator figure resting on one, and every part drawn as
one aggregate node is listed so, and each view says it (`(assumed)`, `unknown`). Seen: `fabricref topology
nvidia-vera-rubin-nvl144` printed its assumed 1.6 Tb/s NICs, one NIC per GPU and one frontend NIC per tray as
plain figures, `—` for the unknown scale-up bandwidth and a blank protocol. Every system reference, from models/."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from conftest import ROOT, SYSTEM_REFERENCES

# The count field each part of a system is built from (topology/blocks.py), by form factor.
COUNTED_BY = {
    "server": {
        "cpu": "cpu.count",
        "nic (scale_out)": "scale_out.nic.count",
        "nic (frontend)": "frontend.nic.count",
        "scale_up_switch": "scale_up.switch.count",
    },
    "rack": {
        "cpu": "tray.compute.cpus",
        "nic (scale_out)": "tray.compute.scale_out_nics",
        "nic (frontend)": "tray.compute.frontend_nics",
        "tray (compute)": "tray.compute.count",
        "tray (switch)": "tray.switch.count",
    },
}
SCALE_UP_BANDWIDTH = (
    "scale_up.bandwidth_per_accelerator",
    "scale_up.bandwidth_per_link",
    "scale_up.links_per_accelerator",
)


def _model(ref: str) -> dict:
    return yaml.load((ROOT / "models" / "references" / f"{ref}.yaml").read_text(encoding="utf-8"), yaml.CSafeLoader)


@pytest.mark.parametrize("ref", SYSTEM_REFERENCES)
def test_what_rests_on_an_assumption_is_listed_as_assumed_and_nothing_else(built_graph, ref):
    from fabricref.topology.summary import nodes_by_kind_and_role, summarize

    model = _model(ref)
    assumptions = set(model.get("assumptions") or {})
    g = built_graph(ref)
    s = summarize(g)
    parts = nodes_by_kind_and_role(g)
    expected_parts = {p for p, key in COUNTED_BY[model["form_factor"]].items() if key in assumptions and p in parts}
    assert set(s["assumed_parts"]) == expected_parts
    pa = s["per_accelerator"]
    expected = set()
    if pa["scale_up_gbps"] is not None and assumptions & set(SCALE_UP_BANDWIDTH):
        expected.add("scale_up_gbps")
    for role in ("scale_out", "frontend"):
        counted = f"nic ({role})" in expected_parts
        if counted and pa[f"{role}_nics"]:
            expected.add(f"{role}_nics")
        if pa[f"{role}_gbps"] and (counted or f"{role}.nic.speed" in assumptions):
            expected.add(f"{role}_gbps")
    assert set(s["assumed_figures"]) == {f"per_accelerator.{k}" for k in expected}
    aggregates = {d.get("kind") for _, d in g.nodes(data=True) if d.get("aggregate")}
    assert set(s["aggregate_parts"]) == aggregates


def _assumed_rack() -> str:
    """A rack whose NIC speed and counts are assumed and whose scale-up bandwidth is unknown (models/)."""
    for ref in SYSTEM_REFERENCES:
        m = _model(ref)
        unknown = "unknown" in (m.get("fields") or {}).get("scale_up.bandwidth_per_accelerator", {})
        if m["form_factor"] == "rack" and "scale_out.nic.speed" in (m.get("assumptions") or {}) and unknown:
            return ref
    raise AssertionError("no shipped rack with an assumed NIC speed and an unknown scale-up bandwidth")


def test_the_cli_says_assumed_and_unknown_where_the_summary_does(built_registry, cli):
    ref = _assumed_rack()
    data = json.loads(cli("topology", ref, "--json", root=built_registry.root).out)
    shown = " ".join(re.sub(r"[│┃]", " ", cli("topology", ref, root=built_registry.root).out).split())
    assert "scale_up_gbps unknown" in shown and "scale_out_protocol unknown" in shown
    for figure in data["assumed_figures"]:
        assert f"{figure.split('.')[1]} " in shown
    assert "scale_out_gbps 1.6 Tb/s per direction (assumed)" in shown
    for part in data["assumed_parts"]:
        assert f"{part} {data['nodes_by_kind_and_role'][part]} (assumed)" in shown
    for part in data["aggregate_parts"]:
        assert f"{part} {data['nodes_by_kind_and_role'][part]} (one aggregate node)" in shown


def test_the_report_page_says_assumed_and_unknown_where_the_summary_does(built_registry):
    from fabricref.report.stage import _env
    from fabricref.topology.stage import build
    from fabricref.topology.summary import summarize

    ref = _assumed_rack()
    s = summarize(build(built_registry, ref))
    html = _env().get_template("macros.html.j2").module.summary_table(s, "")
    text = " ".join(re.sub(r"<[^>]+>", " ", str(html)).split())
    assert "scale-up unknown" in text and "scale-out protocol unknown" in text
    assert "1.6 Tb/s per direction (assumed)" in text
    assert "(one aggregate node)" in text and "NICs (frontend and scale-out assumed)" in text
