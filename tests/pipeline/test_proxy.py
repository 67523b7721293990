"""Refresh behind a proxy (opt-in: `--proxy env` / FABRICREF_FETCH_PROXY=env): a real forward proxy on 127.0.0.1
records what it forwarded; the origin is pytest-httpserver on 127.0.0.1. Without the opt-in the proxy variables
are ignored."""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import ipaddress
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import QuickHTTPServer
from fabricref.core import pins
from fabricref.core.paths import Layout
from fabricref.core.sources import load_sources
from fabricref.errors import UsageError
from fabricref.retrieve import stage
from fabricref.retrieve.fetch import FetchPolicy
from test_retrieve import DOC_PATH, PAGE_V1, add_source, state

FAST = {"connect_timeout": 2, "read_timeout": 2, "deadline": 10, "attempts": 1, "backoff": 0.01}
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FABRICREF_FETCH_PROXY")


def _head(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


class Proxy(socketserver.ThreadingTCPServer):
    """A minimal HTTP forward proxy: absolute-form GET forwarded (one request per connection), CONNECT tunnelled.
    It records each request line and its Proxy-Authorization header; `drip` makes it answer one byte at a time."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, str | None]] = []
        self.drip: float | None = None
        self.handled = threading.Semaphore(0)  # released once per connection, after any error was reported

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hangs up mid-answer (the refresh giving up on a dripping proxy, a timeout) is how these
        tests end connections, not a failure of the proxy: no traceback for it. Anything else is printed."""
        if isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipeError, ConnectionResetError, ...
            return
        super().handle_error(request, client_address)

    def shutdown_request(self, request: socket.socket) -> None:
        super().shutdown_request(request)
        self.handled.release()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(socketserver.BaseRequestHandler):
    server: Proxy

    def handle(self) -> None:
        head = _head(self.request)
        if not head:
            return
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        fields = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
        auth = fields.get("proxy-authorization")
        self.server.seen.append((lines[0], auth))
        method, target, _ = lines[0].split(" ", 2)
        if self.server.drip is not None:
            for byte in b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n":
                self.request.sendall(bytes([byte]))
                time.sleep(self.server.drip)
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            try:
                upstream = socket.create_connection((host, int(port)), timeout=5)
            except OSError:
                self.request.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _pipe(self.request, upstream)
            return
        parts = urlsplit(target)
        headers = [x for x in lines[1:] if x.split(":", 1)[0].lower() not in ("proxy-authorization", "connection")]
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        request = "\r\n".join([f"{method} {path} HTTP/1.1", *headers, "Connection: close", "", ""]).encode("latin-1")
        with socket.create_connection((parts.hostname, parts.port or 80), timeout=5) as upstream:
            upstream.sendall(request)
            while chunk := upstream.recv(65536):
                self.request.sendall(chunk)


def _pipe(a: socket.socket, b: socket.socket) -> None:
    def copy(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    t = threading.Thread(target=copy, args=(b, a), daemon=True)
    t.start()
    copy(a, b)
    t.join(timeout=5)
    b.close()


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Proxy]:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    server = Proxy()
    # Polled for the stop every 0.05 s (the default 0.5 s made every test's teardown wait that long).
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def lay(few_sources: Layout) -> Layout:
    add_source(few_sources)
    return few_sources


def refresh(lay: Layout, mirror: str | None, **policy: object) -> stage.RefreshOutcome:
    (outcome,) = stage.refresh(
        lay, load_sources(lay, "example-doc"), mirror=mirror, policy=FetchPolicy(**{**FAST, **policy})
    )
    return outcome


def test_without_the_opt_in_the_proxy_variables_are_ignored(lay, httpserver, proxy, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("http_proxy", proxy.url)
    httpserver.expect_request(DOC_PATH).respond_with_data(PAGE_V1, content_type="text/html")
    assert refresh(lay, httpserver.url_for("/")).action == "new-revision"
    assert proxy.seen == []  # straight to the origin
    assert len(httpserver.log) == 1


def test_with_the_opt_in_the_document_comes_through_the_proxy(lay, httpserver, proxy, monkeypatch, cli):
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    httpserver.expect_request(DOC_PATH).respond_with_data(PAGE_V1, content_type="text/html")
    mirror = httpserver.url_for("/")
    result = cli(
        "retrieve", "--refresh", "--source", "example-doc", "--mirror", mirror, "--proxy", "env", root=lay.root
    )
    assert result.code == 0, result.out + result.err
    # Absolute-form request line: the proxy, not the client, connected to the origin.
    assert proxy.seen == [(f"GET {mirror.rstrip('/')}{DOC_PATH} HTTP/1.1", None)]
    current = pins.load(lay, "example-doc").current
    assert (current.revision, current.sha256) == (1, hashlib.sha256(PAGE_V1).hexdigest())
    # The same through the environment knob.
    monkeypatch.setenv("FABRICREF_FETCH_PROXY", "env")
    assert FetchPolicy.from_env().proxy == "env"


def test_no_proxy_exempts_a_host(lay, httpserver, proxy, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    httpserver.expect_request(DOC_PATH).respond_with_data(PAGE_V1, content_type="text/html")
    assert refresh(lay, httpserver.url_for("/"), proxy="env").action == "new-revision"
    assert proxy.seen == []


def test_proxy_credentials_reach_the_proxy_and_no_message(lay, httpserver, proxy, monkeypatch):
    port = proxy.server_address[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://fab%40user:s3cret@127.0.0.1:{port}")
    httpserver.expect_request(DOC_PATH).respond_with_data("gone", status=404)
    before = state(lay)
    outcome = refresh(lay, httpserver.url_for("/"), proxy="env")
    assert outcome.action == "failed" and "HTTP 404" in outcome.detail and "s3cret" not in outcome.detail
    assert proxy.seen[0][1] == "Basic " + base64.b64encode(b"fab@user:s3cret").decode()
    assert state(lay) == before


def test_behind_the_proxy_the_proxy_resolves_the_name_and_the_deadline_still_holds(lay, proxy, monkeypatch):
    """https://example.test does not resolve here: direct, that is refused before connecting; through the proxy,
    the client asks the proxy to CONNECT. A proxy that drips its answer is cut off by the total deadline (the
    deadline network backend is the proxy pool's backend too)."""
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    direct = refresh(lay, None)
    assert direct.action == "failed" and "does not resolve" in direct.detail and proxy.seen == []
    refused = refresh(lay, None, proxy="env")  # the proxy cannot reach example.test: 502 to the CONNECT
    assert refused.action == "failed" and "example.test" in refused.detail
    assert [line for line, _ in proxy.seen] == ["CONNECT example.test:443 HTTP/1.1"]
    proxy.drip = 0.2
    started = time.monotonic()
    slow = refresh(lay, None, proxy="env", deadline=0.5, read_timeout=5)
    assert slow.action == "failed" and "total deadline of 0.5s exceeded" in slow.detail
    assert time.monotonic() - started < 4  # 44 header bytes at 0.2 s each would take 9 s


def test_a_proxy_setting_that_cannot_be_honoured_is_refused(lay, proxy, monkeypatch):
    monkeypatch.setenv("FABRICREF_FETCH_PROXY", "system")
    with pytest.raises(UsageError, match="FABRICREF_FETCH_PROXY='system': expected one of none, env"):
        FetchPolicy.from_env()
    monkeypatch.setenv("HTTPS_PROXY", "socks5://user:s3cret@127.0.0.1:1080")
    outcome = refresh(lay, None, proxy="env")
    assert outcome.action == "failed" and "expected http://HOST:PORT or https://HOST:PORT" in outcome.detail
    assert "socks5://127.0.0.1:1080" in outcome.detail and "s3cret" not in outcome.detail
    assert proxy.seen == []


def test_proxy_option_needs_refresh(lay, cli):
    result = cli("retrieve", "--proxy", "env", root=lay.root)
    assert result.code == 2 and "--proxy only applies with --refresh" in result.err


def _ca_and_server_cert(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a certificate it signs for 127.0.0.1: (CA file, server cert, server key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fabricref test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


def test_https_through_the_proxy_is_verified_against_ssl_cert_file(lay, proxy, monkeypatch, tmp_path):
    """A TLS origin whose certificate only the test's CA vouches for: through the proxy's CONNECT tunnel the
    fetch fails verification until SSL_CERT_FILE names that CA, and then pins the bytes. Without the opt-in,
    SSL_CERT_FILE is ignored as well."""
    ca_file, cert_file, key_file = _ca_and_server_cert(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    origin = QuickHTTPServer(host="127.0.0.1", port=0, ssl_context=context)
    origin.expect_request(DOC_PATH).respond_with_data(PAGE_V1, content_type="text/html")
    origin.start()
    try:
        mirror = origin.url_for("/")
        assert mirror.startswith("https://127.0.0.1:")
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        untrusted = refresh(lay, mirror, proxy="env")
        assert untrusted.action == "failed" and "CERTIFICATE_VERIFY_FAILED" in untrusted.detail
        assert proxy.seen[0][0] == f"CONNECT 127.0.0.1:{origin.port} HTTP/1.1"
        monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
        ignored = refresh(lay, mirror)  # no opt-in: neither the proxy nor the CA file
        assert ignored.action == "failed" and "CERTIFICATE_VERIFY_FAILED" in ignored.detail and len(proxy.seen) == 1
        trusted = refresh(lay, mirror, proxy="env")
        assert trusted.action == "new-revision", trusted.detail
        assert [line for line, _ in proxy.seen] == [f"CONNECT 127.0.0.1:{origin.port} HTTP/1.1"] * 2
        assert pins.load(lay, "example-doc").current.sha256 == hashlib.sha256(PAGE_V1).hexdigest()
    finally:
        origin.clear()
        origin.stop()


def test_a_client_that_hangs_up_mid_answer_leaves_no_traceback(proxy: Proxy, capfd: pytest.CaptureFixture[str]):
    proxy.drip = 0.01
    with socket.create_connection(("127.0.0.1", proxy.server_address[1]), timeout=5) as client:
        client.sendall(b"GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert client.recv(1) == b"H"
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # hang up: a reset
    assert proxy.handled.acquire(timeout=10)
    assert "Traceback" not in capfd.readouterr().err
