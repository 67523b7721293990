"""The explorer in a real headless Chromium (Debian's `chromium`, driven by Playwright's bundled driver; no browser
is downloaded): pick a reference and see its drawing, change a knob and see the phase time move as the cost formula
says, open a field's provenance, fail a leaf uplink, reload the URL. A screenshot of each page is written under
test-artifacts/ for people to look at."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from fabricref.core.paths import Layout

pytestmark = pytest.mark.slow
SHOTS = ROOT / "test-artifacts"
# The DP phase's "ranks" cell (the fourth) once the page shows the new degree.
DP_RANKS_START = (
    "(prefix) => { const c = document.querySelector(\"tr[data-phase='dp-all-reduce'] td:nth-child(4)\");"
    " return c !== null && new RegExp('^' + prefix + '( |$)').test(c.textContent); }"
)


def shot(page, name: str) -> Path:
    SHOTS.mkdir(exist_ok=True)
    path = SHOTS / f"explore-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return path


def wait_results(page) -> None:
    page.wait_for_selector("#results[data-ready='yes']", timeout=60_000)
    page.wait_for_selector("#drawing[data-ready='yes']", timeout=60_000)


def phase_cells(page, phase: str) -> dict[str, str]:
    """The cells of one row of the phases table, by column heading, as shown."""
    table = page.locator("#phases table")
    heads = [t.strip() for t in table.locator("thead th").all_inner_texts()]
    cells = [t.strip() for t in table.locator(f"tr[data-phase='{phase}'] td").all_inner_texts()]
    return dict(zip(heads, cells, strict=True))


def seconds(text: str) -> float:
    value, unit = text.split()
    return float(value.replace(",", "")) * {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}[unit]


def test_pages_render_and_the_index_lists_references(page) -> None:
    page.goto("/")
    assert page.title() == "References — fabricref explorer"
    rows = page.locator("#references tbody tr").count()
    assert rows == len(list((ROOT / "models" / "references").glob("*.yaml")))
    # The export is exactly what the table shows: its headings and its cells' text.
    shown = [[c.strip() for c in r.locator("th, td").all_inner_texts()] for r in page.locator("#references tr").all()]
    for fmt in ("csv", "json"):
        with page.expect_download() as info:
            page.locator("#references").locator("xpath=..").locator(f"button[data-export='{fmt}']").click()
        text = Path(info.value.path()).read_text(encoding="utf-8")
        if fmt == "csv":
            assert list(csv.reader(io.StringIO(text))) == shown
        else:
            assert json.loads(text) == [dict(zip(shown[0], r, strict=True)) for r in shown[1:]]
    shot(page, "index")
    page.goto("/compare?a=nvidia-dgx-h100&b=nvidia-dgx-b200")
    assert page.locator("#comparison tr.differs").count() > 0
    shot(page, "compare")
    page.goto("/sizing")
    page.wait_for_selector("#sizing-results table")
    assert "328 kB" in page.locator("#sizing-results").inner_text()  # 2 × 80 × 8 × 128 × 2 B per token
    shot(page, "sizing")


def test_pick_the_dgx_h100_and_see_eight_accelerators_and_four_nvswitch_chips(page, built_graph) -> None:
    g = built_graph("nvidia-dgx-h100")
    expected = {k: sum(1 for _, kind in g.nodes(data="kind") if kind == k) for k in ("accelerator", "scale_up_switch")}
    assert expected == {"accelerator": 8, "scale_up_switch": 4}
    page.goto("/model?topology=nvidia-gb200-nvl72")
    page.wait_for_selector("#drawing[data-ready='yes']")
    page.select_option("#topology", "nvidia-dgx-h100")
    page.wait_for_selector("svg.topology[data-topology='nvidia-dgx-h100']")
    drawn = page.locator("#drawing svg")
    assert drawn.locator("g.node[data-kind='accelerator']").count() == 8
    assert drawn.locator("g.node[data-kind='scale_up_switch']").count() == 4
    assert drawn.locator("line.net-scale_up").count() == 32  # every GPU to every NVSwitch chip
    assert "topology=nvidia-dgx-h100" in page.url
    drawn.locator("line.net-scale_up").first.hover()
    tip = page.locator("#tooltip")
    assert "per direction" in tip.inner_text() and "scale_up.bandwidth_per_accelerator" in tip.inner_text()
    shot(page, "model-dgx-h100")


def test_changing_dp_moves_the_dp_phase_by_the_ratio_of_the_cost_formula(page, built_registry) -> None:
    """Micro-batches per replica fixed, DP 32 → 8: the ring all-reduce of the same gradients over fewer ranks.
    Expected from the documented formula, with the calibration's own numbers: time = base + 2(n−1)·step +
    2(n−1)/n · S ÷ (line rate × efficiency × protocol factor), S the bf16 gradients per rank."""
    cal = yaml.safe_load((ROOT / "models" / "calibration" / "collectives.yaml").read_text())
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert "infiniband" not in params.get("calibration", {}).get("link_classes", {})
    ib, ring = cal["link_classes"]["infiniband"], cal["algorithms"]["ring"]
    base, step = (
        ring["base_latency_us"]["Simple"]["value"] * 1e-6,
        ib["step_latency_us"]["ring"]["Simple"]["value"] * 1e-6,
    )
    rate_bits = ib["efficiency"]["value"] * ring["protocol_factor"]["Simple"]["value"]
    line = nic_gbps(built_registry) * 1e9 / 8 * rate_bits  # bytes/s per rank per direction
    workload = yaml.safe_load((ROOT / "models" / "workloads" / "llama70b-train-tp8-pp4-dp32.yaml").read_text())
    knobs = params["workloads"]["llama70b-train-tp8-pp4-dp32"]
    assert workload["training"].get("grad_dtype", "bf16") == "bf16"  # 2 bytes per gradient (the format's default)
    size = float(workload["model"]["params"]) * 2 / (knobs["tp"] * knobs["pp"])  # gradients per rank

    def formula(n: int) -> float:
        return base + 2 * (n - 1) * step + 2 * (n - 1) / n * size / line

    page.goto("/model?topology=illustrative-h100-4096&workload=llama70b-train-tp8-pp4-dp32")
    wait_results(page)
    before = phase_cells(page, "dp-all-reduce")
    assert before["ranks"].startswith("32") and page.input_value("#knob-microbatches") == "8"
    page.fill("#knob-dp", "8")
    page.press("#knob-dp", "Tab")
    page.wait_for_function(DP_RANKS_START, arg="8")
    wait_results(page)
    after = phase_cells(page, "dp-all-reduce")
    assert page.input_value("#knob-microbatches") == "8" and "dp=8" in page.url
    assert after["effective bw"] == before["effective bw"] and after["queueing"] == before["queueing"] == "0 s"
    expected = formula(8) / formula(32)
    shown = seconds(after["time"]) / seconds(before["time"])
    assert shown == pytest.approx(expected, abs=0.006), (before["time"], after["time"], expected)
    assert abs(expected - 1) > 0.05  # a change the display resolves
    shot(page, "model-4096-dp8")


def nic_gbps(lay: Layout) -> float:
    """The NIC speed of the DGX H100 (the 4,096-GPU cluster's building block) as the registry holds it, in Gb/s."""
    import duckdb

    path = lay.tables_dir / "fields.parquet"
    ((value, unit),) = duckdb.sql(
        f"SELECT value_number, unit FROM read_parquet('{path}') "
        "WHERE reference_id = 'nvidia-dgx-h100' AND field = 'scale_out.nic.speed'"
    ).fetchall()
    assert unit == "Gb/s"
    return float(value)


def test_click_a_field_and_see_its_sha256_and_transcription(page, built_registry) -> None:
    import fabricref

    tree = fabricref.audit("nvidia-dgx-h100", "scale_up.bandwidth_per_accelerator", built_registry.root)
    (citation,) = tree["provenance"]
    page.goto("/reference/nvidia-dgx-h100")
    page.click("button[data-field='scale_up.bandwidth_per_accelerator']")
    page.wait_for_selector("#provenance code.sha256")
    panel = page.locator("#provenance")
    assert panel.locator("code.sha256").inner_text() == citation["sha256"]
    assert "transcription" in panel.locator(".origin").inner_text()
    assert "re-verified now" in panel.inner_text()
    assert "field=scale_up.bandwidth_per_accelerator" in page.url
    shot(page, "reference-provenance")


def test_fail_a_leaf_uplink_see_the_survival_statement_and_reload_the_same_view(page) -> None:
    from fabricref.estimate.ha import NOT_ESTABLISHED

    page.goto("/model?topology=illustrative-h100-4096&workload=llama70b-train-tp8-pp4-dp32&open=pod:0")
    wait_results(page)
    uplink = page.locator("line.link[data-source='leaf00000'][data-target='spine000-000']")
    assert uplink.count() == 1
    uplink.dispatch_event("click")
    page.wait_for_selector("#whatif .survival")
    wait_results(page)
    whatif = page.locator("#whatif")
    assert whatif.locator(".statement").inner_text() == NOT_ESTABLISHED
    assert "survives" in whatif.locator(".survival").inner_text()
    assert "oversubscription" in whatif.inner_text()
    assert "fail=leaf00000~spine000-000" in page.url.replace("%7E", "~")
    assert "failed" in (uplink.get_attribute("class") or "")
    shot(page, "model-4096-pod0-failed-uplink")

    def view() -> dict[str, object]:
        return {
            "url": page.url,
            "phases": page.locator("#phases table").inner_text(),
            "whatif": whatif.inner_text(),
            "failed": page.locator("#drawing .failed").count(),
            "links": page.locator("#drawing line.link").count(),
            "level": page.locator(".levels .current").inner_text(),
            "dp": page.input_value("#knob-dp"),
        }

    page.fill("#knob-dp", "16")
    page.press("#knob-dp", "Tab")
    page.wait_for_function(DP_RANKS_START, arg="16")
    wait_results(page)
    shown = view()
    page.reload()
    wait_results(page)
    page.wait_for_selector("#whatif .survival")
    assert view() == shown
