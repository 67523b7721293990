"""The explorer's plan page in a real headless Chromium (Debian's `chromium` through Playwright's
`executable_path`; no browser is downloaded): a search from the URL, the table sorted by a column header (and the
sort kept in the URL), the Pareto front, and "open this layout" landing on the model view with that layout's
knobs."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

pytestmark = pytest.mark.slow
MODEL, CLUSTER = "llama8b-fsdp-dp64", "illustrative-h100-64"


@pytest.fixture
def viewport() -> dict[str, int]:
    return {"width": 1400, "height": 900}  # the layouts table is wide


def _column(page, table: str, heading: str) -> list[str]:
    heads = [t.strip() for t in page.locator(f"{table} thead th").all_inner_texts()]
    at = next(i for i, h in enumerate(heads) if h.split(" ")[0] == heading.split(" ")[0] and h.startswith(heading))
    return [t.strip() for t in page.locator(f"{table} tbody tr td:nth-child({at + 1})").all_inner_texts()]


def _bytes(text: str) -> float:
    value, unit = text.split()
    return float(value) * {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]


def test_a_search_sorts_by_a_column_and_opens_a_layout_on_the_model_view(page) -> None:
    page.goto(f"/plan?model={MODEL}&cluster={CLUSTER}&gpus=8&global_batch=8&top=10")  # ~2,400 layouts
    page.wait_for_selector("#plan-results:not([hidden]) #plan-table tbody tr", timeout=120_000)
    assert page.title() == "Plan — fabricref explorer"
    assert page.locator("nav a[aria-current='page']").inner_text() == "Plan"
    table = "#plan-table table"
    assert _column(page, table, "rank") == [str(i) for i in range(1, 11)]
    assert set(_column(page, table, "fit")) == {"fits"}
    assert all(_column(page, table, "dominant cost")) and all(_column(page, table, "confidence"))
    assert "legal layouts" in page.locator("#plan-status").inner_text()
    assert page.locator("#plan-pareto tbody tr").count() >= 1

    # Sorting by headroom: ascending, then (a second click) descending; the sort is in the URL.
    page.locator(f"{table} thead th[data-sort='headroom']").click()
    rooms = [_bytes(t) for t in _column(page, table, "headroom")]
    assert rooms == sorted(rooms) and rooms[0] < rooms[-1]
    assert "sort=headroom%3Aasc" in page.url
    page.locator(f"{table} thead th[data-sort='headroom']").click()
    assert [_bytes(t) for t in _column(page, table, "headroom")] == sorted(rooms, reverse=True)
    page.reload()
    page.wait_for_selector("#plan-results:not([hidden]) #plan-table tbody tr", timeout=120_000)
    assert [_bytes(t) for t in _column(page, table, "headroom")] == sorted(rooms, reverse=True)

    # Open the best layout the model view can show (CP 1): the model view has its degrees as knobs.
    page.locator(f"{table} thead th[data-sort='rank']").click()
    link = page.locator(f"{table} a.open-layout").first
    row = link.locator("xpath=ancestor::tr")
    layout = row.get_attribute("data-layout")
    link.click()
    page.wait_for_url(re.compile(r"/model\?"), timeout=60_000)
    q = {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}
    assert (q["topology"], q["workload"]) == (CLUSTER, MODEL)
    tp, pp, dp = (int(re.search(rf"{k}(\d+)", layout).group(1)) for k in ("tp", "pp", "dp"))
    assert (int(q["tp"]), int(q["pp"]), int(q["dp"])) == (tp, pp, dp)
    page.wait_for_selector("#results[data-ready='yes']", timeout=120_000)
    assert page.locator("#knob-dp").input_value() == str(dp)
    assert page.locator("#knob-tp").input_value() == str(tp)
