"""retrieve: pinned-mode verification and --refresh against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import copy_checkout_with_sources
from fabricref.core import pins
from fabricref.core.paths import Layout
from fabricref.core.sources import load_sources
from fabricref.errors import IntegrityError
from fabricref.retrieve import stage
from fabricref.retrieve.fetch import FetchPolicy, mirror_url
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

DOC_PATH = "/example.test/docs/page.html"
FAST = FetchPolicy(connect_timeout=1, read_timeout=0.5, deadline=10, attempts=3, backoff=0.01)
PAGE_V1 = b"<html><body><table><tr><th>GPUs</th><td>8</td></tr></table></body></html>"
PAGE_V2 = b"<html><body><table><tr><th>GPUs</th><td>72</td></tr></table></body></html>"


def add_source(lay: Layout, source_id: str = "example-doc", url: str = "https://example.test/docs/page.html") -> None:
    (lay.sources_dir / f"{source_id}.yaml").write_text(f"""\
id: {source_id}
url: {url}
publisher: Example
publisher_kind: vendor-document
title: Example document
document_type: datasheet
media_type: text/html
status: published
rules:
  - id: gpu-count
    field: accelerator.count
    subject: Example server
    select: {{row: GPUs}}
    parse: {{type: count}}
""")


def state(lay: Layout) -> dict[str, bytes]:
    """Every byte of the pins and the store, to prove a failed command changed nothing."""
    files = [*lay.pins_dir.rglob("*"), *lay.store_dir.rglob("*")]
    return {str(p.relative_to(lay.root)): p.read_bytes() for p in files if p.is_file()}


def refresh(lay: Layout, server: HTTPServer, policy: FetchPolicy = FAST) -> stage.RefreshOutcome:
    (outcome,) = stage.refresh(lay, load_sources(lay, "example-doc"), mirror=server.url_for("/"), policy=policy)
    return outcome


@pytest.fixture
def lay(few_sources: Layout) -> Layout:
    add_source(few_sources)
    return few_sources


# The sources the pinned-mode tests break: pinned mode checks each source on its own, so a checkout holding only
# these checks what it checks in the whole one, without verifying every other snapshot.
PINNED = ("nvidia-hgx-h100-blog", "nvidia-nvlink-page")


@pytest.fixture
def pinned(tmp_path: Path) -> Layout:
    return Layout(copy_checkout_with_sources(tmp_path / "repo", *PINNED))


def test_mirror_url_maps_host_into_path():
    assert mirror_url("https://docs.example.com/a/b.html?x=1", "http://127.0.0.1:9/m/") == (
        "http://127.0.0.1:9/m/docs.example.com/a/b.html?x=1"
    )


def test_200_pins_revision_1_then_304_adds_nothing_then_changed_bytes_add_revision_2(lay, httpserver):
    httpserver.expect_ordered_request(DOC_PATH).respond_with_data(
        PAGE_V1, content_type="text/html; charset=utf-8", headers={"ETag": '"v1"'}
    )
    httpserver.expect_ordered_request(DOC_PATH, headers={"If-None-Match": '"v1"'}).respond_with_data("", status=304)
    httpserver.expect_ordered_request(DOC_PATH).respond_with_data(
        PAGE_V2, content_type="text/html", headers={"ETag": '"v2"'}
    )

    first = refresh(lay, httpserver)
    assert (first.action, first.revision) == ("new-revision", 1)
    history = pins.load(lay, "example-doc")
    rev1 = history.current
    assert rev1.origin == "retrieved" and rev1.etag == '"v1"' and rev1.size == len(PAGE_V1)
    # Through a mirror, the pin records the publisher's address (the mirror's is nobody else's).
    assert rev1.final_url == rev1.url == "https://example.test/docs/page.html"
    assert stage.store(lay).read(rev1.sha256) == PAGE_V1

    before = state(lay)
    second = refresh(lay, httpserver)
    assert second.action == "not-modified"
    assert state(lay) == before

    third = refresh(lay, httpserver)
    assert (third.action, third.revision) == ("new-revision", 2)
    history = pins.load(lay, "example-doc")
    assert [r.revision for r in history.revisions] == [1, 2]
    assert history.revisions[0] == rev1  # the old revision is kept exactly
    assert stage.store(lay).read(rev1.sha256) == PAGE_V1  # and so are its bytes
    assert stage.store(lay).read(history.current.sha256) == PAGE_V2
    httpserver.check_assertions()


def test_same_bytes_without_validators_add_no_revision(lay, httpserver):
    httpserver.expect_request(DOC_PATH).respond_with_data(PAGE_V1, content_type="text/html")
    assert refresh(lay, httpserver).action == "new-revision"
    before = state(lay)
    assert refresh(lay, httpserver).action == "unchanged"
    assert state(lay) == before


@pytest.mark.parametrize(
    ("status", "message"),
    [(404, "HTTP 404"), (410, "HTTP 410"), (500, "giving up after 3 attempt"), (503, "giving up after 3 attempt")],
)
def test_errors_are_clear_and_leave_pins_untouched(lay, httpserver, status, message):
    httpserver.expect_request(DOC_PATH).respond_with_data("no", status=status, content_type="text/html")
    before = state(lay)
    outcome = refresh(lay, httpserver)
    assert outcome.action == "failed"
    assert message in outcome.detail and "127.0.0.1" in outcome.detail and DOC_PATH in outcome.detail
    assert state(lay) == before


def test_500_then_200_is_retried(lay, httpserver):
    httpserver.expect_ordered_request(DOC_PATH).respond_with_data("boom", status=500)
    httpserver.expect_ordered_request(DOC_PATH).respond_with_data(PAGE_V1, content_type="text/html")
    outcome = refresh(lay, httpserver)
    assert (outcome.action, outcome.revision) == ("new-revision", 1)
    httpserver.check_assertions()


def test_429_honours_retry_after(lay, httpserver):
    """Half a second (the client reads a number of seconds, fractions too): 50 times FAST's backoff. Timed between
    the two requests as the server receives them: the refresh's own work around them is not counted, so a client
    that ignored Retry-After fails however slow the machine (timed from the refresh's start, it passed one run in
    six at load 16)."""
    arrived: list[float] = []

    def answer(response: Response) -> Callable[[Request], Response]:
        def handler(_: Request) -> Response:
            arrived.append(time.monotonic())
            return response

        return handler

    limited = Response("slow down", status=429, headers={"Retry-After": "0.5"})
    httpserver.expect_ordered_request(DOC_PATH).respond_with_handler(answer(limited))
    page = Response(PAGE_V1, content_type="text/html")
    httpserver.expect_ordered_request(DOC_PATH).respond_with_handler(answer(page))
    assert refresh(lay, httpserver).action == "new-revision"
    assert len(arrived) == 2 and arrived[1] - arrived[0] >= 0.5, arrived


def test_read_timeout_fails_after_bounded_retries(lay, httpserver, hold):
    def slow(_: Request) -> Response:
        hold(30)  # no answer while the test runs: every read times out
        return Response(PAGE_V1, content_type="text/html")

    httpserver.expect_request(DOC_PATH).respond_with_handler(slow)
    before = state(lay)
    policy = FetchPolicy(connect_timeout=1, read_timeout=0.1, deadline=10, attempts=2, backoff=0.01)
    outcome = refresh(lay, httpserver, policy)
    assert outcome.action == "failed" and "timeout" in outcome.detail and "2 attempt" in outcome.detail
    assert state(lay) == before


def test_redirect_to_another_host_is_refused(lay, httpserver):
    httpserver.expect_request(DOC_PATH).respond_with_data(
        "", status=302, headers={"Location": "http://evil.invalid/docs/page.html"}
    )
    before = state(lay)
    outcome = refresh(lay, httpserver)
    assert outcome.action == "failed" and "redirect to http://evil.invalid/docs/page.html refused" in outcome.detail
    assert state(lay) == before


def test_redirect_to_another_site_on_the_mirror_is_refused_but_same_site_is_followed(lay, httpserver):
    httpserver.expect_ordered_request(DOC_PATH).respond_with_data(
        "", status=301, headers={"Location": "/example.test/docs/moved.html"}
    )
    httpserver.expect_ordered_request("/example.test/docs/moved.html").respond_with_data(
        PAGE_V1, content_type="text/html"
    )
    outcome = refresh(lay, httpserver)
    assert outcome.action == "new-revision"
    assert pins.load(lay, "example-doc").current.final_url.endswith("/example.test/docs/moved.html")

    httpserver.clear()
    httpserver.expect_request(DOC_PATH).respond_with_data("", status=302, headers={"Location": "/other.test/x.html"})
    assert "refused" in refresh(lay, httpserver).detail


def test_response_over_the_size_limit_is_refused_and_nothing_stored(lay, httpserver):
    httpserver.expect_request(DOC_PATH).respond_with_data(b"x" * 5000, content_type="text/html")
    before = state(lay)
    policy = FetchPolicy(connect_timeout=1, read_timeout=1, deadline=10, attempts=1, max_bytes=1000)
    outcome = refresh(lay, httpserver, policy)
    assert outcome.action == "failed" and "exceeds the limit of 1000 bytes" in outcome.detail
    assert state(lay) == before


def test_wrong_content_type_is_refused(lay, httpserver):
    httpserver.expect_request(DOC_PATH).respond_with_data(b"%PDF-1.7", content_type="application/pdf")
    outcome = refresh(lay, httpserver)
    assert outcome.action == "failed" and "Content-Type application/pdf; expected text/html" in outcome.detail


def test_cli_refresh_reports_failure_with_exit_1(lay, httpserver, cli, monkeypatch):
    monkeypatch.setenv("FABRICREF_FETCH_ATTEMPTS", "1")
    httpserver.expect_request(DOC_PATH).respond_with_data("gone", status=404)
    result = cli("retrieve", "--refresh", "--source", "example-doc", "--mirror", httpserver.url_for("/"), root=lay.root)
    assert result.code == 1
    assert "example-doc" in result.err and "HTTP 404" in result.err


def test_pinned_mode_detects_a_tampered_snapshot_and_names_it(pinned: Layout, cli):
    history = pins.load(pinned, "nvidia-nvlink-page")
    path = stage.store(pinned).path_for(history.current.sha256)
    path.chmod(0o644)
    path.write_bytes(path.read_bytes().replace(b"1.8TB/s", b"3.6TB/s"))
    manifest_before = pinned.snapshots_manifest.read_bytes() if pinned.snapshots_manifest.exists() else None
    result = cli("retrieve", root=pinned.root)
    assert result.code == 1
    assert str(path) in result.err and "hash mismatch" in result.err and history.current.sha256 in result.err
    after = pinned.snapshots_manifest.read_bytes() if pinned.snapshots_manifest.exists() else None
    assert after == manifest_before


def test_pinned_mode_detects_a_missing_snapshot(pinned: Layout):
    history = pins.load(pinned, "nvidia-hgx-h100-blog")
    path = stage.store(pinned).path_for(history.current.sha256)
    path.unlink()
    with pytest.raises(IntegrityError, match="snapshot missing"):
        stage.verify(pinned, load_sources(pinned))


def test_pinned_mode_notices_an_edited_transcription(pinned: Layout):
    path = pinned.transcription_file("nvidia-hgx-h100-blog")
    path.write_text(path.read_text().replace("900 gigabytes", "950 gigabytes"))
    with pytest.raises(IntegrityError, match="edited since it was pinned"):
        stage.verify(pinned, load_sources(pinned))


def test_pin_adds_an_edited_transcription_as_a_new_revision(pinned: Layout, cli):
    path = pinned.transcription_file("nvidia-hgx-h100-blog")
    old = pins.load(pinned, "nvidia-hgx-h100-blog").current
    path.write_text(path.read_text().replace("fourth generation NVLink", "fourth-generation NVLink"))
    result = cli("pin", "nvidia-hgx-h100-blog", root=pinned.root)
    assert result.code == 0, result.err
    history = pins.load(pinned, "nvidia-hgx-h100-blog")
    assert [r.revision for r in history.revisions] == [1, 2] and history.revisions[0] == old
    assert history.current.origin == "transcription"
    assert cli("retrieve", root=pinned.root).code == 0


def test_store_files_are_read_only_and_content_addressed(repo: Layout):
    for path in Path(repo.store_dir).rglob("*"):
        if path.is_file():
            assert path.parent.parent.name == "sha256" or path.parent.name == path.name[:2]
            assert stage.store(repo).read(path.name)
