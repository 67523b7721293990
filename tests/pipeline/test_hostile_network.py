"""Hostile network cases, round 2 (issue: hostile input): limits that always hold and nothing accepted that
should not be. Every server here is real and listens on 127.0.0.1."""

from __future__ import annotations

import gzip
import socket
import threading
import time

import pytest
from fabricref.core.sources import load_sources
from fabricref.errors import FabricrefError
from fabricref.retrieve import stage
from fabricref.retrieve.fetch import FetchPolicy, fetch, redact_url
from test_retrieve import DOC_PATH, PAGE_V1, add_source, state
from werkzeug import Request, Response

URL = "https://example.test/docs/page.html"
FAST = FetchPolicy(connect_timeout=1, read_timeout=2, deadline=5, attempts=1, backoff=0.01)


class DripServer:
    """Answers each connection by sending `raw` one byte at a time, `pause` seconds apart."""

    def __init__(self, raw: bytes, pause: float) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.raw, self.pause, self.stop = raw, pause, threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            for byte in self.raw:
                if self.stop.is_set():
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return
                time.sleep(self.pause)

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def test_stacked_content_encodings_are_refused_before_decoding(httpserver):
    # 64 MiB of zeros compressed twice is a few hundred bytes; decoding it whole is what a bomb relies on.
    bomb = gzip.compress(gzip.compress(b"\0" * (64 * 1024 * 1024)))
    assert len(bomb) < 200_000
    httpserver.expect_request(DOC_PATH).respond_with_data(
        bomb, content_type="text/html", headers={"Content-Encoding": "gzip, gzip"}
    )
    with pytest.raises(FabricrefError, match=r"Content-Encoding 'gzip, gzip'.*one encoding"):
        fetch(URL, "text/html", mirror=httpserver.url_for("/"), policy=FAST)


def test_single_gzip_is_decoded_within_the_cap_chunk_by_chunk(httpserver):
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024))
    httpserver.expect_request(DOC_PATH).respond_with_data(
        bomb, content_type="text/html", headers={"Content-Encoding": "gzip"}
    )
    policy = FetchPolicy(connect_timeout=1, read_timeout=2, deadline=10, attempts=1, max_bytes=1024 * 1024)
    with pytest.raises(FabricrefError, match=r"exceeds the limit of 1048576 bytes \(decoded\)"):
        fetch(URL, "text/html", mirror=httpserver.url_for("/"), policy=policy)


def test_gzip_document_within_the_cap_is_decoded(httpserver):
    httpserver.expect_request(DOC_PATH).respond_with_data(
        gzip.compress(PAGE_V1), content_type="text/html", headers={"Content-Encoding": "gzip"}
    )
    result = fetch(URL, "text/html", mirror=httpserver.url_for("/"), policy=FAST)
    assert result.data == PAGE_V1


def test_slow_response_headers_are_bounded_by_the_total_deadline():
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Padding: " + b"a" * 200 + b"\r\n\r\n<html></html>"
    server = DripServer(raw, pause=0.1)  # every read returns within the read timeout: only a deadline stops it
    policy = FetchPolicy(connect_timeout=1, read_timeout=2, deadline=0.5, attempts=1)
    started = time.monotonic()
    try:
        with pytest.raises(FabricrefError, match=r"total deadline of 0\.5s"):
            fetch(URL, "text/html", mirror=server.url, policy=policy)
    finally:
        server.close()
    assert time.monotonic() - started < 3


@pytest.mark.parametrize(
    "location",
    [
        "/example.test/%2e%2e/other.example/doc.html",
        "/example.test/%2E%2E/other.example/doc.html",
        "/example.test/docs/../../other.example/doc.html",
        "/example.test%2f..%2fother.example/doc.html",
    ],
)
def test_redirect_escaping_the_mirrored_site_is_refused(httpserver, location):
    httpserver.expect_request(DOC_PATH).respond_with_data("", status=302, headers={"Location": location})
    httpserver.expect_request("/other.example/doc.html").respond_with_data(
        "<html>other</html>", content_type="text/html"
    )
    with pytest.raises(FabricrefError, match="redirect to .* refused"):
        fetch(URL, "text/html", mirror=httpserver.url_for("/"), policy=FAST)


def test_credentials_in_the_mirror_url_are_never_stored_or_printed(few_sources, httpserver):
    add_source(few_sources)
    (source,) = load_sources(few_sources, "example-doc")
    seen: list[str | None] = []

    def page(request: Request) -> Response:
        seen.append(request.headers.get("Authorization"))
        return Response(PAGE_V1, content_type="text/html")

    httpserver.expect_request(DOC_PATH).respond_with_handler(page)
    base = httpserver.url_for("/").replace("http://", "http://user:s3cret-token@")
    (outcome,) = stage.refresh(few_sources, [source], mirror=base, policy=FAST)
    assert outcome.action == "new-revision", outcome.detail
    assert seen and seen[0] and seen[0].startswith("Basic ")  # the mirror still gets its credentials
    pins_text = few_sources.pins_file("example-doc").read_text()
    assert "s3cret-token" not in pins_text and "user:" not in pins_text
    assert "s3cret-token" not in outcome.detail


def test_credentials_are_redacted_from_error_messages():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(FabricrefError) as info:
        fetch(URL, "text/html", mirror=f"http://user:s3cret-token@127.0.0.1:{port}", policy=FAST)
    assert "s3cret-token" not in str(info.value)
    assert "127.0.0.1" in str(info.value)


def test_redact_url_keeps_everything_but_the_userinfo():
    assert redact_url("http://u:p@host:8080/a/b?q=1") == "http://host:8080/a/b?q=1"
    assert redact_url("https://host/x") == "https://host/x"


def test_body_shorter_than_its_content_length_is_never_pinned(few_sources):
    add_source(few_sources)
    (source,) = load_sources(few_sources, "example-doc")
    before = state(few_sources)
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n<html>cut"
    server = DripServer(raw, pause=0)
    try:
        (outcome,) = stage.refresh(few_sources, [source], mirror=server.url, policy=FAST)
    finally:
        server.close()
    assert outcome.action == "failed"
    assert state(few_sources) == before


def test_binary_bytes_labelled_text_html_are_refused(httpserver, few_sources):
    add_source(few_sources)
    (source,) = load_sources(few_sources, "example-doc")
    before = state(few_sources)
    httpserver.expect_request(DOC_PATH).respond_with_data(
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)) * 4, content_type="text/html"
    )
    (outcome,) = stage.refresh(few_sources, [source], mirror=httpserver.url_for("/"), policy=FAST)
    assert outcome.action == "failed"
    assert "binary" in outcome.detail and "text/html" in outcome.detail
    assert state(few_sources) == before


def test_unresolvable_host_is_not_retried():
    policy = FetchPolicy(connect_timeout=1, read_timeout=1, deadline=20, attempts=4, backoff=2.0)
    started = time.monotonic()
    with pytest.raises(FabricrefError, match=r"no-such-host\.invalid.*does not resolve"):
        fetch(URL, "text/html", mirror="http://no-such-host.invalid", policy=policy)
    assert time.monotonic() - started < 2  # backoff would have slept 2 + 4 + 8 s


def test_refresh_reports_each_source_and_keeps_one_deadline_overall(few_sources, httpserver, hold):
    """Several sources fetched a few at a time: progress is told of each, outcomes keep the declared order, and
    a source that cannot start before the whole-refresh deadline fails without being fetched."""
    for n in range(3):
        add_source(few_sources, f"doc-{n}", f"https://example.test/docs/{n}.html")

    def slow(_: Request) -> Response:
        hold(30)  # no answer while the test runs: longer than the refresh deadline and every timeout
        return Response(PAGE_V1, content_type="text/html")

    httpserver.expect_request("/example.test/docs/0.html").respond_with_data(PAGE_V1, content_type="text/html")
    for n in (1, 2):
        httpserver.expect_request(f"/example.test/docs/{n}.html").respond_with_handler(slow)
    sources = [s for n in range(3) for s in load_sources(few_sources, f"doc-{n}")]
    seen: list[tuple[str, int, int]] = []
    policy = FetchPolicy(connect_timeout=1, read_timeout=2, deadline=5, attempts=1, refresh_deadline=1.0, concurrency=1)
    outcomes = stage.refresh(
        few_sources,
        sources,
        mirror=httpserver.url_for("/"),
        policy=policy,
        progress=lambda o, d, t: seen.append((o.source_id, d, t)),
    )
    assert [o.source_id for o in outcomes] == ["doc-0", "doc-1", "doc-2"]
    assert sorted(d for _, d, _ in seen) == [1, 2, 3] and {t for _, _, t in seen} == {3}
    assert outcomes[0].action == "new-revision"
    # The fetch under way is cut at the refresh's deadline, not at its own read timeout (2 s)...
    assert outcomes[1].action == "failed" and "total deadline" in outcomes[1].detail
    # ...and the one not started by then is not started.
    assert outcomes[-1].action == "failed" and "refresh deadline of 1s" in outcomes[-1].detail


def test_fetch_environment_knobs_are_checked(monkeypatch):
    monkeypatch.setenv("FABRICREF_FETCH_DEADLINE", "nan")
    with pytest.raises(FabricrefError, match="FABRICREF_FETCH_DEADLINE='nan'"):
        FetchPolicy.from_env()
    monkeypatch.setenv("FABRICREF_FETCH_DEADLINE", "7")
    monkeypatch.setenv("FABRICREF_FETCH_CONCURRENCY", "2")
    policy = FetchPolicy.from_env()
    assert (policy.deadline, policy.concurrency) == (7.0, 2)
