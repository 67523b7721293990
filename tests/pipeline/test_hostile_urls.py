"""Hostile input, round 3: addresses judged as the client reaches them, look-alike names, the mirror option,
the pinned final URL, gzip bodies pinned whole. Every server here is real and listens on 127.0.0.1."""

from __future__ import annotations

import gzip
import socket

import pytest
from fabricref.core import pins
from fabricref.core.sources import load_source, load_sources
from fabricref.core.urls import url_problem
from fabricref.errors import FabricrefError, UsageError
from fabricref.retrieve import fetch as fetching
from fabricref.retrieve import stage
from fabricref.retrieve.fetch import FetchPolicy, fetch
from test_canonical_urls import SOURCE
from test_retrieve import DOC_PATH, PAGE_V1, add_source, state

URL = "https://example.test/docs/page.html"
FAST = FetchPolicy(connect_timeout=1, read_timeout=2, deadline=5, attempts=1, backoff=0.01)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.1:18080/docs/ok", "127.0.0.1"),
        ("http://0x7f.0.0.1:18080/docs/ok", "127.0.0.1"),
        ("http://0177.0.0.1:18080/docs/ok", "127.0.0.1"),
        ("http://2130706433/docs/ok", "127.0.0.1"),
        ("http://127.000.000.001/x", "127.0.0.1"),
        ("http://0xa9.0xfe.0xa9.0xfe/latest", "169.254.169.254"),
        ("http://169.254.43518/latest", "169.254.169.254"),
        ("http://0xa9fea9fe/latest", "169.254.169.254"),
        ("http://10.1/x", "10.0.0.1"),
        ("http://08.0.0.1/x", "not an IPv4 address"),
        ("http://1.2.3.0x/x", "not an IPv4 address"),
        ("http://1.2.3.4%2F5/x", "not a valid host name"),
        ("http://[::ffff:127.0.0.1]/x", "loopback"),
        ("http://[::ffff:7f00:1]/x", "loopback"),
        ("http://[::ffff:169.254.169.254]/x", "link-local"),
        ("http://[::127.0.0.1]/x", "loopback"),
        ("http://[64:ff9b::a9fe:a9fe]/x", "link-local"),
        ("http://[2002:7f00:1::]/x", "loopback"),
        ("http://[::ffff:10.0.0.1]/x", "private"),
        ("http://[0:0:0:0:0:0:0:1]/x", "loopback"),
        ("http://[fe80::1%25eth0]/x", "zone"),
        ("http://[::]/x", "private or reserved"),
        # Full stops the client splits at as at `.` (ideographic, fullwidth, halfwidth): the same addresses.
        ("http://127\u30020\u30020\u30021:18080/docs/ok", "loopback"),
        ("http://127\uff0e0\uff0e0\uff0e1/x", "loopback"),
        ("http://0x7f\uff611/x", "127.0.0.1"),
        ("http://169\u3002254\u3002169\u3002254/x", "link-local"),
    ],
)
def test_ip_literals_in_other_spellings_are_judged_as_the_address_they_name(url, said):
    problem = url_problem(url)
    assert problem is not None and said in problem, problem


@pytest.mark.parametrize(
    "url",
    [
        "https://8.8.8.8/x",
        "https://[2001:4860:4860::8888]/x",
        "https://docs.nvidia.com/x",
        "https://bücher.example.de/x",  # one script (Latin) with a diacritic
        "https://例え.テスト/x",  # Japanese: Han and Katakana are one writing system
    ],
)
def test_public_addresses_and_single_script_names_pass(url):
    assert url_problem(url) is None


@pytest.mark.parametrize("url", ["http://0x8.0x8.0x8.0x8/x", "http://8\u30028\u30028\u30028/x"])
def test_a_public_address_in_another_spelling_is_not_canonical(url):
    problem = url_problem(url)
    assert problem is not None and "write it as 8.8.8.8" in problem


@pytest.mark.parametrize(
    "host",
    [
        "developer.nv\u0456dia.com",  # Cyrillic і
        "xn--nvdia-o2e.com",  # the same look-alike, already in punycode
        "\u0430pple.com",  # Cyrillic а + Latin
        "docs.nvidi\u03b1.com",  # Greek α
    ],
)
def test_look_alike_host_names_mixing_scripts_are_refused(host):
    problem = url_problem(f"https://{host}/docs")
    assert problem is not None and "mixes scripts" in problem, problem


def test_a_source_with_a_shorthand_loopback_url_is_refused_at_load(tmp_path):
    path = tmp_path / "demo-doc.yaml"
    path.write_text(SOURCE.format(url="http://127.1:18080/docs/ok", extra=""))
    with pytest.raises(FabricrefError, match=r"demo-doc\.yaml: at \$\.url: .*loopback.*127\.0\.0\.1"):
        load_source(path)


def test_a_name_that_resolves_to_a_private_address_is_never_connected_to(httpserver, monkeypatch):
    """Straight to the publisher (no mirror, no proxy), the socket connects only to an address judged public:
    a name resolving (or rebound) to loopback is refused before any byte is sent."""
    httpserver.expect_request("/docs/page.html").respond_with_data(PAGE_V1, content_type="text/html")
    real = socket.getaddrinfo

    def resolver(host, port, *args, **kwargs):
        if host == "docs.example.com":
            return real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(fetching.socket, "getaddrinfo", resolver)
    with pytest.raises(FabricrefError, match=r"'docs\.example\.com' resolves to 127\.0\.0\.1.*loopback"):
        fetch(f"http://docs.example.com:{httpserver.port}/docs/page.html", "text/html", policy=FAST)
    assert not httpserver.log  # nothing reached the server


@pytest.mark.parametrize(
    ("mirror", "said"),
    [
        ("http://[::1", "not a valid URL"),
        ("http://127.0.0.1:99999/", "not a valid URL"),
        ("ftp://127.0.0.1/", "scheme 'ftp'"),
        ("http://127.1:8080/", "write it as 127.0.0.1"),
        ("http://0x7f.0.0.1/", "write it as 127.0.0.1"),
        ("http://m\u0456rror.example/", "mixes scripts"),
        ("http:///nohost", "no host"),
        ("http://127.0.0.1/?q=1", "query or fragment"),
        ("http://127\u30020\u30020\u30021:8080/", "write it as 127.0.0.1"),
        ("http://[::1]]/", "not a URL the client can open"),  # urlsplit takes it, httpx does not
        ("http://127.0.0.1:0/", "port 0"),
    ],
)
def test_a_mirror_the_client_cannot_reach_as_written_is_bad_usage(few_sources, cli, mirror, said):
    add_source(few_sources)
    before = state(few_sources)
    result = cli("retrieve", "--refresh", "--source", "example-doc", "--mirror", mirror, root=few_sources.root)
    assert result.code == 2, result.err
    assert "--mirror" in result.err and said in result.err, result.err
    assert "Traceback" not in result.err
    assert state(few_sources) == before


def test_a_refresh_through_a_mirror_records_the_canonical_url_as_final_url(few_sources, httpserver):
    add_source(few_sources)
    httpserver.expect_request("/example.test/docs/old.html").respond_with_data(
        "", status=301, headers={"Location": "/example.test/docs/page.html"}
    )
    httpserver.expect_request(DOC_PATH).respond_with_data(PAGE_V1, content_type="text/html")
    (source,) = load_sources(few_sources, "example-doc")
    source = source.model_copy(update={"url": "https://example.test/docs/old.html"})
    (outcome,) = stage.refresh(few_sources, [source], mirror=httpserver.url_for("/"), policy=FAST)
    assert outcome.action == "new-revision", outcome.detail
    current = pins.load(few_sources, "example-doc").current
    assert current.url == "https://example.test/docs/old.html"
    assert current.final_url == "https://example.test/docs/page.html"  # where the redirect led, not the mirror
    assert "127.0.0.1" not in few_sources.pins_file("example-doc").read_text()


def test_a_multi_member_gzip_body_is_pinned_whole(few_sources, httpserver):
    add_source(few_sources)
    first, second = PAGE_V1[:40], PAGE_V1[40:]
    body = gzip.compress(first) + gzip.compress(second)
    httpserver.expect_request(DOC_PATH).respond_with_data(
        body, content_type="text/html", headers={"Content-Encoding": "gzip"}
    )
    (source,) = load_sources(few_sources, "example-doc")
    (outcome,) = stage.refresh(few_sources, [source], mirror=httpserver.url_for("/"), policy=FAST)
    assert outcome.action == "new-revision", outcome.detail
    current = pins.load(few_sources, "example-doc").current
    assert current.size == len(PAGE_V1)
    assert stage.store(few_sources).read(current.sha256) == PAGE_V1


def test_many_small_gzip_members_are_all_decoded():
    page = PAGE_V1 * 20
    body = b"".join(gzip.compress(page[i : i + 7]) for i in range(0, len(page), 7))
    decoder = fetching._BoundedDecoder("gzip", "u", 1 << 20)
    out = b"".join(decoder.feed(body[i : i + 5]) for i in range(0, len(body), 5)) + decoder.finish()
    assert out == page


@pytest.mark.parametrize("tail", [b"garbage", b"\x00", b"\x1f", gzip.compress(b"x", mtime=0)[:5]])
def test_trailing_bytes_after_a_gzip_stream_are_refused(few_sources, httpserver, tail):
    add_source(few_sources)
    httpserver.expect_request(DOC_PATH).respond_with_data(
        gzip.compress(PAGE_V1) + tail, content_type="text/html", headers={"Content-Encoding": "gzip"}
    )
    before = state(few_sources)
    (source,) = load_sources(few_sources, "example-doc")
    (outcome,) = stage.refresh(few_sources, [source], mirror=httpserver.url_for("/"), policy=FAST)
    assert outcome.action == "failed"
    assert "after the end of the compressed body" in outcome.detail or "truncated" in outcome.detail
    assert state(few_sources) == before


def test_check_mirror_is_usage_for_library_callers_too():
    with pytest.raises(UsageError, match="not a valid URL"):
        fetch(URL, "text/html", mirror="http://[::1", policy=FAST)
