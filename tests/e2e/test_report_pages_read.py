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


def test_the_report_has_the_validation_table(built_pipeline: Path):
    table = built_pipeline / "registry" / "validation" / "validation.parquet"
    rows = duckdb.sql(f"SELECT file, result FROM '{table}'").fetchall()
    page = (built_pipeline / "registry" / "report" / "validation.html").read_text()
    assert rows and all(f'data-case="{f}#{r}"' in page for f, r in rows)
    assert 'href="validation.html"' in (built_pipeline / "registry" / "report" / "index.html").read_text()
