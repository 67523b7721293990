"""Every page of the report `dvc repro` built reads as the explorer's pages do (tests/pipeline/test_pages_read.py):
no scientific notation, no dict printed as it is, one caveat line linking to the caveats page, and the validation
table (`fabricref validate`) as a page of its own."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from test_pages_read import unreadable

pytestmark = pytest.mark.slow


def test_every_report_page_prints_numbers_readably_under_one_caveat_line(built_pipeline: Path):
    report = built_pipeline / "registry" / "report"
    pages = sorted(report.rglob("*.html"))
    assert len(pages) > 20
    for page in pages:
        text = page.read_text()
        assert unreadable(text) == [], page.relative_to(report)
        assert text.count('class="caveat"') >= 1 and "caveats.html" in text, page.relative_to(report)
    caveats = (report / "caveats.html").read_text()
    assert "Logical drawing" in caveats and "Statuses:" in caveats


def test_the_index_times_every_workload_on_every_target_as_its_phases_sum(built_pipeline: Path):
    """The index's time table: one row per workload @ topology, each term the sum over its phases of seconds ×
    count, and each bar's segments laid end to end on the scale of the longest total."""
    from bs4 import BeautifulSoup
    from fabricref.views.render import seconds

    table = built_pipeline / "registry" / "traffic" / "traffic.parquet"
    sums = duckdb.sql(
        f"SELECT workload_id || ' @ ' || topology_id, sum(latency_s * count), sum(bandwidth_s * count), "
        f"sum(queueing_s * count) FROM '{table}' GROUP BY ALL ORDER BY 1"
    ).fetchall()
    page = BeautifulSoup((built_pipeline / "registry" / "report" / "index.html").read_text(), "html.parser")
    heading = page.find("h2", string="Communication time per step / request")
    rows = heading.find_next("table").find_all("tr")[1:]
    longest = max(sum(s[1:]) for s in sums)
    assert len(rows) == len(sums) > 10
    for row, (label, *terms) in zip(rows, sums, strict=True):
        cells = [td.get_text() for td in row.find_all("td")]
        assert cells[:5] == [label, *map(seconds, terms), seconds(sum(terms))]
        rects = row.find_all("rect")
        widths = [float(r["width"]) for r in rects]
        assert widths == pytest.approx([100 * t / longest for t in terms], abs=1e-3)
        assert [float(r["x"]) for r in rects] == pytest.approx([0, widths[0], widths[0] + widths[1]], abs=2e-3)


def test_the_report_has_the_validation_table(built_pipeline: Path):
    table = built_pipeline / "registry" / "validation" / "validation.parquet"
    rows = duckdb.sql(f"SELECT file, result FROM '{table}'").fetchall()
    page = (built_pipeline / "registry" / "report" / "validation.html").read_text()
    assert rows and all(f'data-case="{f}#{r}"' in page for f, r in rows)
    assert 'href="validation.html"' in (built_pipeline / "registry" / "report" / "index.html").read_text()
