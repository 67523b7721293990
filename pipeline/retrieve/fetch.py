"""HTTP retrieval with a registry's limits: timeouts and a total deadline, bounded retries, a size cap on decoded
bytes as they stream, same-site redirects only, conditional requests, no credentials stored or printed."""

from __future__ import annotations

import math
import os
import posixpath
import re
import socket
import time
import urllib.request
import zlib
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import httpcore
import httpx

from ..core.urls import address_problem, host_problem
from ..errors import FetchError, UsageError

RETRYABLE_STATUS = {500, 502, 503, 504, 429}


@dataclass(frozen=True)
class FetchPolicy:
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    deadline: float = 120.0
    max_bytes: int = 32 * 1024 * 1024
    attempts: int = 4
    backoff: float = 1.0
    max_retry_after: float = 60.0
    max_redirects: int = 5
    refresh_deadline: float = 600.0  # over a whole refresh, however many sources
    concurrency: int = 4  # documents fetched at once during a refresh
    # "none": the environment's proxy and CA settings are ignored (a stray HTTPS_PROXY never decides where a
    # document comes from). "env": opt-in for a corporate network: HTTPS_PROXY / HTTP_PROXY / ALL_PROXY /
    # NO_PROXY decide the route and SSL_CERT_FILE / SSL_CERT_DIR the trusted CAs.
    proxy: str = "none"
    user_agent: str = "fabricref/0.1 (+reference-data pipeline)"

    @classmethod
    def from_env(cls, **overrides: float | int | str | None) -> FetchPolicy:
        """Environment knobs (FABRICREF_FETCH_*), mainly so tests and slow mirrors can tune limits."""
        values: dict[str, float | int] = {}
        for name, kind in (
            ("connect_timeout", float),
            ("read_timeout", float),
            ("deadline", float),
            ("max_bytes", int),
            ("attempts", int),
            ("backoff", float),
            ("refresh_deadline", float),
            ("concurrency", int),
        ):
            env = f"FABRICREF_FETCH_{name.upper()}"
            raw = os.environ.get(env)
            if raw:
                try:
                    value = kind(raw)
                except ValueError:
                    value = None
                if value is None or not math.isfinite(value) or value <= 0 or value > 1e9:
                    raise UsageError(f"environment {env}={raw!r}: expected a positive {kind.__name__} below 1e9")
                values[name] = value
        proxy = os.environ.get("FABRICREF_FETCH_PROXY")
        if proxy:
            values["proxy"] = proxy  # type: ignore[assignment]
        values.update({k: v for k, v in overrides.items() if v is not None})
        policy = cls(**values)  # type: ignore[arg-type]
        if policy.proxy not in PROXY_MODES:
            where = "--proxy" if overrides.get("proxy") is not None else "environment FABRICREF_FETCH_PROXY"
            raise UsageError(f"{where}={policy.proxy!r}: expected one of {', '.join(PROXY_MODES)}")
        return policy


PROXY_MODES = ("none", "env")


@dataclass
class FetchResult:
    not_modified: bool
    data: bytes = b""
    media_type: str = ""
    final_url: str = ""
    etag: str | None = None
    last_modified: str | None = None
    attempts: int = 1
    log: list[str] = field(default_factory=list)


def check_mirror(mirror: str) -> str:
    """A `--mirror` the client can reach as written (http(s), a plain host, private ones too, a valid port, no
    query or fragment); bad usage otherwise, naming the option."""
    try:
        parts = urlsplit(mirror)
        host = parts.hostname
        parts.port  # noqa: B018 — raises on a malformed port
    except ValueError as exc:
        raise UsageError(f"--mirror {redact_url_safe(mirror)!r}: not a valid URL ({exc})") from None
    problem = None
    if parts.scheme not in ("http", "https"):
        problem = f"has scheme {parts.scheme!r}: expected http or https"
    elif not host:
        problem = "has no host"
    elif parts.query or parts.fragment:
        problem = "has a query or fragment: expected http(s)://HOST[:PORT][/PATH]"
    elif parts.port == 0:
        problem = "has port 0: expected a port from 1 to 65535"
    else:
        problem = host_problem(host, private_ok=True)
    if not problem:
        try:
            httpx.URL(mirror)  # the client's own parser: `http://[::1]]/` passes urlsplit, not httpx
        except httpx.InvalidURL as exc:
            problem = f"is not a URL the client can open ({exc})"
    if problem:
        raise UsageError(f"--mirror {redact_url_safe(mirror)!r} {problem}")
    return mirror


def redact_url_safe(url: str) -> str:
    """`redact_url` for text that may not parse as a URL (then only a user:password@ is cut)."""
    try:
        return redact_url(url)
    except ValueError:
        return re.sub(r"//[^/@]*@", "//", url)


def mirror_url(url: str, mirror: str | None) -> str:
    """`https://host/path?q` → `MIRROR/host/path?q`: how air-gapped mirrors (and tests) serve documents."""
    if not mirror:
        return url
    parts = urlsplit(url)
    tail = parts.path or "/"
    query = f"?{parts.query}" if parts.query else ""
    return f"{mirror.rstrip('/')}/{parts.netloc}{tail}{query}"


def canonical_of(final: str, url: str, mirror: str | None) -> str:
    """The publisher's address of what was fetched: `MIRROR/host/path` is `scheme://host/path` again, so no pin
    records the mirror's address."""
    if not mirror:
        return final
    prefix = redact_url(mirror).rstrip("/") + "/"
    if not final.startswith(prefix):
        return url
    scheme = urlsplit(url).scheme
    return f"{scheme}://{final[len(prefix) :]}"


def redact_url(url: str) -> str:
    """The URL without user:password@: credentials reach the server, never a pin, a log or a message."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower() + (f":{parts.port}" if parts.port else "")


def _same_site(start: str, target: str, mirror: str | None, original_host: str) -> bool:
    if _origin(start) != _origin(target):
        return False
    if mirror:
        # On a mirror, the first path segment is the original host: a redirect must stay under it. The check is
        # made on the path as the server will see it: percent-decoded (so %2e%2e and %2f count) and normalised.
        prefix = posixpath.normpath(unquote(urlsplit(mirror).path) or "/").rstrip("/") + f"/{original_host}/"
        path = posixpath.normpath(unquote(urlsplit(target).path) or "/")
        return path.startswith(prefix)
    return True


class _Deadline:
    """Wall-clock end of a whole fetch: every socket call is clamped to what is left of it (a server dripping one
    byte per call passes every read timeout forever)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def clamp(self, timeout: float | None) -> float:
        left = self.left()
        if left <= 0:
            raise httpcore.ReadTimeout(f"total deadline of {self.seconds:g}s exceeded")
        return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._inner, self._deadline = inner, deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._deadline.clamp(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._deadline.clamp(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        inner = self._inner.start_tls(ssl_context, server_hostname, self._deadline.clamp(timeout))
        return _DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """`public_only`: the socket connects to the very address judged public here, so a name resolving (or
    rebound) to a private, loopback or link-local address is never reached."""

    def __init__(self, deadline: _Deadline, public_only: bool = False) -> None:
        self._inner, self._deadline, self._public_only = httpcore.SyncBackend(), deadline, public_only

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, **kwargs: Any) -> Any:
        target = public_address(host, port) if self._public_only else host
        return _DeadlineStream(
            self._inner.connect_tcp(target, port, self._deadline.clamp(timeout), **kwargs), self._deadline
        )

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport on a backend that honours the total deadline (httpx has no backend option, so the pool
    is rebuilt with the same settings; constraints.txt pins httpx), through a proxy too."""

    def __init__(
        self, deadline: _Deadline, proxy: _Proxy | None = None, trust_env: bool = False, public_only: bool = False
    ) -> None:
        super().__init__(trust_env=False)
        ssl_context = httpx.create_ssl_context(trust_env=trust_env)
        if proxy is None:
            self._pool = httpcore.ConnectionPool(
                ssl_context=ssl_context, network_backend=_DeadlineBackend(deadline, public_only)
            )
        else:
            self._pool = httpcore.HTTPProxy(
                proxy_url=proxy.url,
                proxy_auth=proxy.auth,
                ssl_context=ssl_context,
                proxy_ssl_context=ssl_context if proxy.url.lower().startswith("https:") else None,
                network_backend=_DeadlineBackend(deadline),
            )


@dataclass(frozen=True)
class _Proxy:
    url: str  # without credentials
    auth: tuple[str, str] | None = None


def proxy_for(url: str) -> _Proxy | None:
    """The http(s) forward proxy the environment names for `url` (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY), or None
    (none, or NO_PROXY exempts the host); its credentials go to the proxy only, never into a message."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    chosen = proxies.get(parts.scheme.lower()) or proxies.get("all")
    if not chosen:
        return None
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    if urllib.request.proxy_bypass_environment(host, proxies):
        return None
    if "://" not in chosen:
        chosen = f"http://{chosen}"  # `proxy.example:3128`, as curl and requests read it
    proxy = urlsplit(chosen)
    shown = redact_url(chosen)
    if proxy.scheme.lower() not in ("http", "https") or not proxy.hostname:
        raise UsageError(f"proxy {shown!r} from the environment: expected http://HOST:PORT or https://HOST:PORT")
    auth = None
    if proxy.username is not None or proxy.password is not None:
        auth = (unquote(proxy.username or ""), unquote(proxy.password or ""))
    return _Proxy(shown, auth)


def public_address(host: str, port: int) -> str:
    """The first address `host` resolves to, when every one is public; else FetchError naming host, address, why."""
    import ipaddress

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise httpcore.ConnectError(f"host {host!r} does not resolve: {exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    for address in addresses:
        problem = address_problem(ipaddress.ip_address(address.split("%", 1)[0]))
        if problem:
            raise FetchError(
                f"host {host!r} resolves to {address}, which is {problem.removeprefix('names ')}: refused; a source "
                "is fetched from public addresses only (fetch a local copy with --mirror)"
            )
    if not addresses:
        raise httpcore.ConnectError(f"host {host!r} resolves to no address")
    return addresses[0]


def _resolves(url: str) -> bool:
    """A name that does not resolve will not on retry either."""
    host = urlsplit(url).hostname
    if not host:
        return False
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        return False
    return True


# Only these encodings, and only one of them: stacked encodings are how a few KB become gigabytes.
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class _BoundedDecoder:
    """Decodes a Content-Encoding incrementally, never beyond the cap (zlib max_length). Every member of a gzip
    body is decoded (RFC 1952); anything else after the stream is refused: the pin is exactly the document sent."""

    def __init__(self, encoding: str, url: str, max_bytes: int) -> None:
        self.url, self.max_bytes, self.size = url, max_bytes, 0
        self._wbits = _DECODERS.get(encoding)
        self._zlib = zlib.decompressobj(self._wbits) if self._wbits is not None else None
        self._gzip = encoding in ("gzip", "x-gzip")
        self._deflate_raw_fallback = encoding == "deflate"
        self._between = b""  # bytes after a finished member, too few yet to tell whether another one starts

    def _count(self, out: bytes) -> bytes:
        self.size += len(out)
        if self.size > self.max_bytes:
            raise FetchError(f"{self.url}: body exceeds the limit of {self.max_bytes} bytes (decoded)")
        return out

    def _after_stream(self, rest: bytes) -> bytes:
        """What follows a finished stream: the start of the next gzip member (decoded next), or refused."""
        rest = self._between + rest
        self._between = b""
        if self._gzip and len(rest) < 2 and rest in (b"", b"\x1f"):
            self._between = rest
            return b""
        if self._gzip and rest[:2] == b"\x1f\x8b":
            self._zlib = zlib.decompressobj(self._wbits)
            return rest
        raise FetchError(
            f"{self.url}: {len(rest)}+ bytes after the end of the compressed body (not another gzip member); "
            "refused: the document would be pinned in part"
        )

    def feed(self, data: bytes) -> bytes:
        if self._zlib is None:
            return self._count(data)
        out = bytearray()
        pending = data
        while pending:
            if self._zlib.eof:
                pending = self._after_stream(self._zlib.unused_data + pending)
                if not pending:
                    break
            try:
                piece = self._zlib.decompress(pending, self.max_bytes - self.size + 1)
            except zlib.error as exc:
                if self._deflate_raw_fallback and self.size == 0 and not out:
                    # Some servers send raw deflate without the zlib header.
                    self._zlib, self._deflate_raw_fallback = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue
                raise FetchError(f"{self.url}: body could not be decoded: {exc}") from None
            self._deflate_raw_fallback = False
            out += self._count(piece)
            pending = self._zlib.unconsumed_tail
            if self._zlib.eof:
                pending = self._zlib.unused_data
                self._zlib = _Finished(self._zlib)
        return bytes(out)

    def finish(self) -> bytes:
        if self._zlib is None:
            return b""
        if not self._zlib.eof or self._between:
            raise FetchError(f"{self.url}: compressed body ends before its end marker (truncated)")
        return self._count(self._zlib.flush())


class _Finished:
    """A finished stream: what follows is judged by `_after_stream`, not decoded."""

    eof = True
    unused_data = b""

    def __init__(self, done: Any) -> None:
        self._tail = done.flush()

    def flush(self) -> bytes:
        tail, self._tail = self._tail, b""
        return tail


def _looks_binary(data: bytes) -> bool:
    """NUL bytes or many C0 controls: an image or archive labelled text."""
    sample = data[:65536]
    if b"\0" in sample:
        return True
    controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13))
    return bool(sample) and controls / len(sample) > 0.05


def _retry_after(response: httpx.Response) -> float | None:
    raw = response.headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def fetch(
    url: str,
    expected_media_type: str,
    *,
    mirror: str | None = None,
    etag: str | None = None,
    last_modified: str | None = None,
    policy: FetchPolicy | None = None,
) -> FetchResult:
    """Fetch one document. Raises FetchError (naming the URL, credentials removed, and what was expected)."""
    policy = policy or FetchPolicy.from_env()
    if mirror is not None:
        check_mirror(mirror)
    start = mirror_url(url, mirror)
    shown = redact_url(start)
    headers = {
        "User-Agent": policy.user_agent,
        "Accept": f"{expected_media_type}, */*;q=0.1",
        "Accept-Encoding": "gzip, deflate",
    }
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    # Redirects stay on the same site (scheme and host), so the proxy chosen for the start URL serves them all.
    proxy = proxy_for(start) if policy.proxy == "env" else None
    # Behind a proxy the proxy resolves the name (the client often cannot): the early check is for direct routes.
    if proxy is None and not _resolves(start):
        raise FetchError(f"{shown}: cannot connect: host {urlsplit(start).hostname!r} does not resolve (not retried)")
    timeout = httpx.Timeout(policy.read_timeout, connect=policy.connect_timeout)
    deadline = _Deadline(policy.deadline)
    log: list[str] = []
    last_error = "no attempt made"
    # Straight to the publisher, the address connected to is judged as the URL was when it was declared.
    public_only = mirror is None and proxy is None
    transport = _DeadlineTransport(deadline, proxy, trust_env=policy.proxy == "env", public_only=public_only)
    with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False, transport=transport) as client:
        for attempt in range(1, policy.attempts + 1):
            if attempt > 1:
                pause = policy.backoff * 2 ** (attempt - 2)
                if pause > deadline.left():
                    break
                time.sleep(pause)
            try:
                result = _one_attempt(client, start, headers, expected_media_type, mirror, url, policy, deadline)
                result.attempts, result.log = attempt, log
                return result
            except _Retry as exc:
                last_error = str(exc)
                log.append(f"attempt {attempt}: {exc}")
                if deadline.left() <= 0:
                    raise FetchError(f"{shown}: total deadline of {policy.deadline:g}s exceeded ({exc})") from None
                if exc.wait is not None:
                    if exc.wait > policy.max_retry_after or exc.wait > deadline.left():
                        raise FetchError(f"{shown}: {exc}; Retry-After {exc.wait:.0f}s exceeds the limit") from None
                    time.sleep(exc.wait)
    via = f" (through proxy {proxy.url})" if proxy is not None else ""
    raise FetchError(f"{shown}: giving up after {len(log)} attempt(s){via}: {last_error}")


class _Retry(Exception):
    def __init__(self, message: str, wait: float | None = None) -> None:
        super().__init__(message)
        self.wait = wait


def _encoding(response: httpx.Response, shown: str) -> str:
    codings = [c.strip().lower() for c in response.headers.get("content-encoding", "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if len(codings) > 1:
        raise FetchError(
            f"{shown}: Content-Encoding {response.headers['content-encoding']!r} refused: expected at most one "
            "encoding (gzip or deflate); stacked encodings are not decoded"
        )
    if codings and codings[0] not in _DECODERS:
        raise FetchError(f"{shown}: Content-Encoding {codings[0]!r} refused: expected gzip, deflate or none")
    return codings[0] if codings else "identity"


def _read_body(
    response: httpx.Response, shown: str, media_type: str, policy: FetchPolicy, deadline: _Deadline
) -> bytes:
    """Raw bytes off the wire, counted against Content-Length, decoded under the cap as they arrive."""
    declared = response.headers.get("content-length")
    if declared is not None and not declared.strip().isdigit():
        raise FetchError(f"{shown}: Content-Length {declared!r} is not a byte count")
    encoding = _encoding(response, shown)
    if declared is not None and encoding == "identity" and int(declared) > policy.max_bytes:
        raise FetchError(f"{shown}: Content-Length {declared} bytes exceeds the limit of {policy.max_bytes} bytes")
    decoder = _BoundedDecoder(encoding, shown, policy.max_bytes)
    raw_size = 0
    chunks: list[bytes] = []
    for raw in response.iter_raw():
        raw_size += len(raw)
        if raw_size > policy.max_bytes:
            raise FetchError(f"{shown}: body exceeds the limit of {policy.max_bytes} bytes (as sent)")
        chunks.append(decoder.feed(raw))
        if deadline.left() <= 0:
            raise FetchError(f"{shown}: total deadline of {policy.deadline:g}s exceeded while reading")
    chunks.append(decoder.finish())
    if declared is not None and raw_size != int(declared):
        raise FetchError(f"{shown}: body has {raw_size} bytes but Content-Length declares {declared}; refused")
    data = b"".join(chunks)
    if media_type.startswith("text/") and _looks_binary(data):
        raise FetchError(f"{shown}: binary bytes labelled {media_type}; expected a text document")
    return data


def _one_attempt(
    client: httpx.Client,
    url: str,
    headers: dict[str, str],
    expected_media_type: str,
    mirror: str | None,
    original_url: str,
    policy: FetchPolicy,
    deadline: _Deadline,
) -> FetchResult:
    original_host = urlsplit(original_url).netloc
    current = url
    for _ in range(policy.max_redirects + 1):
        shown = redact_url(current)
        try:
            with client.stream("GET", current, headers=headers) as response:
                if response.status_code in (301, 302, 303, 307, 308):
                    location = response.headers.get("location")
                    if not location:
                        raise FetchError(f"{shown}: HTTP {response.status_code} redirect without a Location")
                    target = urljoin(current, location)
                    if not _same_site(url, target, mirror, original_host):
                        raise FetchError(
                            f"{shown}: redirect to {redact_url(target)} refused: redirects must stay on the same "
                            f"site as {redact_url(url)}"
                        )
                    current = target
                    continue
                final_url = canonical_of(shown, original_url, mirror)
                etag, last_modified = response.headers.get("etag"), response.headers.get("last-modified")
                if response.status_code == 304:
                    return FetchResult(True, final_url=final_url, etag=etag, last_modified=last_modified)
                if response.status_code in RETRYABLE_STATUS:
                    wait = _retry_after(response) if response.status_code in (429, 503) else None
                    raise _Retry(f"HTTP {response.status_code}", wait)
                if response.status_code != 200:
                    raise FetchError(f"{shown}: HTTP {response.status_code}; expected 200 with the document")
                media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if not media_type:
                    raise FetchError(f"{shown}: response has no Content-Type; expected {expected_media_type}")
                if media_type != expected_media_type:
                    raise FetchError(f"{shown}: Content-Type {media_type}; expected {expected_media_type}")
                data = _read_body(response, shown, media_type, policy, deadline)
                return FetchResult(False, data, media_type, final_url, etag, last_modified)
        except httpx.TimeoutException as exc:
            if deadline.left() <= 0:
                raise FetchError(f"{shown}: total deadline of {policy.deadline:g}s exceeded") from None
            raise _Retry(f"timeout ({type(exc).__name__})") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise _Retry(f"connection broke off: {exc}") from None
        except httpx.ConnectError as exc:
            raise _Retry(f"cannot connect: {exc}") from None
        except httpx.HTTPError as exc:
            raise FetchError(f"{shown}: {type(exc).__name__}: {exc}") from None
    raise FetchError(f"{redact_url(url)}: more than {policy.max_redirects} redirects")
