"""The report, built by the pipeline from the registry, opened in a real headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


@pytest.fixture(scope="module")
def built_report(built_pipeline: Path) -> Path:
    """The report `dvc repro` built in the session's shared clone."""
    return built_pipeline / "registry" / "report"


def chromium(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: the README test command installs Debian's chromium")
        pytest.skip("chromium not installed on this machine")
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("page", "title"), [("index.html", "fabricref report"), ("reference/nvidia-gb200-nvl72.html", "NVIDIA GB200 NVL72")]
)
def test_pages_render_in_chromium(built_report, tmp_path, page, title):
    url = (built_report / page).as_uri()
    dom = chromium(["--dump-dom", url], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert f"<title>{title} — fabricref</title>" in dom.stdout
    images = re.findall(r'<img[^>]+src="([^"]+\.svg)"', dom.stdout)
    assert images, "no drawing on the page"
    for src in images:
        assert (built_report / page).parent.joinpath(src).resolve().is_file(), src
    assert "not an exact NCCL" in dom.stdout  # the standing caveat is on every page
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == [], console
    shot_dir = ROOT / "test-artifacts"
    shot_dir.mkdir(exist_ok=True)
    shot = shot_dir / (page.replace("/", "_").replace(".html", ".png"))
    done = chromium(["--window-size=1300,1800", f"--screenshot={shot}", url], tmp_path)
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_report_is_self_contained_and_escaped(built_report):
    for html in built_report.rglob("*.html"):
        text = html.read_text()
        assert "<script" not in text.lower()
        for src in re.findall(r'src="([^"]+)"', text):
            assert not src.startswith(("http:", "https:", "//")), (html, src)
    drawings = sorted(p.name for p in (built_report / "drawings").glob("*.svg"))
    assert "nvidia-gb200-nvl72.svg" in drawings and "meta-style-h100-24576.svg" in drawings
    svg = (built_report / "drawings" / "nvidia-dgx-h100.svg").read_text()
    assert "scale-up" in svg and "rack positions" in svg  # networks told apart; nothing physical implied


def test_every_citation_on_a_reference_page_names_its_origin(built_report):
    page = (built_report / "reference" / "nvidia-dgx-h100.html").read_text()
    # source · publisher kind (· read via a copy) · read DATE · origin · hash
    citations = re.findall(r"<div><a href=[^>]+>[^<]+</a> · [^<]*?read [0-9-]+ · (\w+) · <span class=\"hash\">", page)
    assert citations and set(citations) == {"transcription"}
    assert "its hash proves the transcription is unchanged" in page
