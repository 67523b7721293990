"""Fixtures for the explorer (a plugin of tests/conftest.py): one explorer per test module on the session's built
registry (`base`), an HTTP client of it (`http`), and a real headless Chromium (Debian's `chromium` driven by
Playwright's bundled driver through `executable_path`; no browser is downloaded)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from explore_server import client, serve
from fabricref.core.paths import Layout

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def base(built_registry: Layout) -> Iterator[str]:
    with serve(built_registry.root) as url:
        yield url


@pytest.fixture(scope="module")
def http(base: str) -> Iterator[Any]:
    with client(base) as c:
        yield c


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: the README test command installs Debian's chromium")
        pytest.skip("chromium not installed on this machine")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def viewport() -> dict[str, int]:
    return {"width": 1300, "height": 900}


@pytest.fixture
def page(browser: Any, base: str, viewport: dict[str, int]) -> Iterator[Any]:
    """A fresh page that fails the test on any script error or console error (a CSP violation is one), and on any
    request off the explorer's own origin: nothing leaves the machine."""
    context = browser.new_context(viewport=viewport, base_url=base)
    p = context.new_page()
    problems: list[str] = []
    p.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    p.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)

    def outside(route: Any) -> None:
        problems.append(f"request outside the explorer: {route.request.url}")
        route.abort()

    p.route(re.compile(r"^(?!" + re.escape(base) + r").*"), outside)
    yield p
    context.close()
    assert problems == []
