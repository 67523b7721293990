"""Every page a person reads, in the explorer and in the report, prints its numbers with units at a sensible
precision: no scientific notation (`1.64e+04`, `5.6e-06 s`), no dict printed as it is (`{'leaf': 1.0}`). The
report's pages are walked in tests/e2e/test_report_pages_read.py (they need the whole `dvc repro`); the explorer's
here. Both draw a topology with the same template (views/)."""

from __future__ import annotations

import html
import re

import pytest
from conftest import SYSTEM_REFERENCES
from explore_server import client, serve
from fabricref.core.paths import Layout

SCIENTIFIC = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][+-]?\d+(?![\w.])")
RAW_DICT = re.compile(r"\{\s*['\"][^'\"]+['\"]\s*:")


def unreadable(page: str) -> list[str]:
    """What a reader of `page` would see printed as a program prints it: each number in scientific notation and
    each dict, with some context. Only the text shown counts (not attributes, styles or scripts)."""
    text = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S | re.I)
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    found = []
    for pattern in (SCIENTIFIC, RAW_DICT):
        for m in pattern.finditer(text):
            found.append(" ".join(text[max(0, m.start() - 50) : m.end() + 30].split()))
    return found


def test_the_check_finds_scientific_notation_and_dicts_and_not_hashes():
    page = "<td>1.64e+04</td><td>5.6e-06 s</td><p>{'leaf': 1.0, 'spine': 7.0}</p><p>{&quot;a&quot;: 1}</p>"
    assert len(unreadable(page)) == 4
    fine = '<span class="hash">3e5a1e9c</span> 16.4 k · 5.6 µs · leaf 1:1 · <td data-x="1e5">x</td> gpu0e1'
    assert unreadable(fine) == []


@pytest.fixture(scope="module")
def http(built_registry: Layout):
    """The explorer on the session's registry (every page but /validation, whose table the validate stage
    writes: `validated_http`)."""
    with serve(built_registry.root) as url, client(url) as c:
        yield c


@pytest.fixture(scope="module")
def validated_http(validated_registry: Layout):
    """The explorer on the registry with the validation stage run on it (conftest.validated_registry, the
    suite's costliest build: its tests run in the whole suite)."""
    with serve(validated_registry.root) as url, client(url) as c:
        yield c


def test_every_explorer_page_prints_numbers_readably(http):
    index = http.get("/api/index").json()
    pages = ["/", "/model", "/sizing", "/compare"]
    pages += [f"/reference/{r['reference_id']}" for r in index["references"]]
    pages.append(f"/compare?a={SYSTEM_REFERENCES[0]}&b={SYSTEM_REFERENCES[1]}")
    for path in pages:
        r = http.get(path)
        assert r.status_code == 200, (path, r.text[:300])
        assert unreadable(r.text) == [], path


@pytest.mark.slow
def test_the_validation_page_shows_the_registry_s_table_model_published_ratio_tolerance_in_or_out(
    validated_http, validated_registry
):
    import duckdb

    http, validated = validated_http, validated_registry

    rows = duckdb.sql(
        f"SELECT file, result, ratio, within FROM '{validated.registry_dir}/validation/validation.parquet'"
    ).fetchall()
    assert rows
    page = http.get("/validation").text
    assert unreadable(page) == []
    for header in ("model", "published", "ratio", "tolerance", "in / out"):
        assert f">{header}</th>" in page
    for file, result, ratio, within in rows:
        row = re.search(rf'<tr class="within-(\w+)" data-case="{re.escape(f"{file}#{result}")}">(.*?)</tr>', page, re.S)
        assert row, (file, result)
        assert row.group(1) == ("unknown" if within is None else "in" if within else "out")
        if ratio is not None:
            assert f">{ratio:.3f}<" in row.group(2)
    shown = http.get("/api/validation").json()
    assert [r["case"] for r in shown] == sorted(f"{f}#{r}" for f, r, _, _ in rows)


@pytest.mark.parametrize(
    ("topology", "accelerators", "switches"), [("nvidia-dgx-h100", 8, 4), ("nvidia-gb200-nvl72", 72, 18)]
)
def test_the_report_draws_a_system_as_the_explorer_does(http, built_registry, topology, accelerators, switches):
    """The same SVG from the report's drawer and from the explorer's /drawing/ID.svg: every accelerator and
    scale-up switch, NVLink lines visible, and an NVL72's 648 GPU–switch links bundled per tray (not a hairball)."""
    from fabricref.report.drawn import Drawer
    from fabricref.report.stage import _env, _open, _technology

    with _open(built_registry, ("fields",)) as con, Drawer(built_registry, _technology(con), _env()) as drawer:
        report = drawer.svg(topology).decode()
    served = http.get(f"/drawing/{topology}.svg")
    assert served.status_code == 200 and served.headers["content-type"].startswith("image/svg+xml")
    assert served.text == report
    assert report.count('class="node kind-accelerator"') == accelerators
    assert report.count('class="node kind-scale_up_switch"') == switches
    nvlink = report.count('class="link net-scale_up')
    assert 0 < nvlink <= 18 * 18  # at most one bundle per compute tray and switch chip (not 648 GPU links)
