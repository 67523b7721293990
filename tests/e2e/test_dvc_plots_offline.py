"""`dvc plots show` renders offline: DVC's page template (.dvc/config plots.html_template) carries vega, vega-lite
and vega-embed inlined from .dvc/plots/vendor/, so no script is fetched from a CDN; the page holds the plots the
stages' outputs declare."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT
from test_report_browser import chromium

VENDOR = ROOT / ".dvc" / "plots" / "vendor"


def _build_module():
    spec = importlib.util.spec_from_file_location("plots_page", VENDOR / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_template_is_built_from_the_vendored_libraries_and_names_no_remote_script() -> None:
    page = (ROOT / ".dvc" / "plots" / "offline.html").read_text(encoding="utf-8")
    assert page == _build_module().page(), "run python .dvc/plots/vendor/build.py"
    assert "{plot_divs}" in page and "{scripts}" not in page  # DVC adds its CDN tags only at {scripts}
    assert not re.search(r"<script[^>]+src=", page)
    for name in ("vega", "vega-lite", "vega-embed"):
        assert (
            "BSD" in (VENDOR / f"LICENSE.{name}").read_text()
            or "Redistribution" in (VENDOR / f"LICENSE.{name}").read_text()
        )
    assert "html_template = plots/offline.html" in (ROOT / ".dvc" / "config").read_text()


@pytest.mark.slow
def test_dvc_plots_show_draws_a_plot_with_no_network(built_pipeline: Path, tmp_path: Path) -> None:
    out = tmp_path / "plots"
    done = subprocess.run(
        ["dvc", "plots", "show", "-o", str(out)], cwd=built_pipeline, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "cdn.jsdelivr" not in html and not re.search(r"<script[^>]+src=\"https?:", html)
    for title in ("stacked overhead / bandwidth / queueing", "Busiest link of each class", "KV-cache transfer time"):
        assert title in html, title
    # The phase plot is stacked: one bar per phase, coloured by term.
    assert '"stack": "zero"' in html and '"field": "term"' in html
    # Every host resolves to nothing: a script fetched from the network would fail, and the plot with it.
    dom = chromium(
        [
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--virtual-time-budget=10000",
            "--dump-dom",
            (out / "index.html").as_uri(),
        ],
        tmp_path,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    drawn = re.findall(r'<canvas[^>]*class="marks"|<svg[^>]*class="marks"', dom.stdout)
    assert len(drawn) >= 1, "vega-embed drew nothing: " + dom.stdout[:2000]
    shutil.rmtree(out)
