"""HTTP retrieval with the limits a registry needs: timeouts, a total deadline, bounded retries with
backoff, a size cap (counted after decompression), same-site redirects only, conditional requests."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from urllib.parse import urljoin, urlsplit

import httpx

from ..core.errors import FetchError

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
    user_agent: str = "fabricref/0.1 (+reference-data pipeline)"

    @classmethod
    def from_env(cls, **overrides: float | int) -> FetchPolicy:
        """Environment knobs (FABRICREF_FETCH_*), mainly so tests and slow mirrors can tune limits."""
        values: dict[str, float | int] = {}
        for name, kind in (
            ("connect_timeout", float),
            ("read_timeout", float),
            ("deadline", float),
            ("max_bytes", int),
            ("attempts", int),
            ("backoff", float),
        ):
            raw = os.environ.get(f"FABRICREF_FETCH_{name.upper()}")
            if raw:
                values[name] = kind(raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


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


def mirror_url(url: str, mirror: str | None) -> str:
    """`https://host/path?q` → `MIRROR/host/path?q`: how air-gapped mirrors (and tests) serve documents."""
    if not mirror:
        return url
    parts = urlsplit(url)
    tail = parts.path or "/"
    query = f"?{parts.query}" if parts.query else ""
    return f"{mirror.rstrip('/')}/{parts.netloc}{tail}{query}"


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower() + (f":{parts.port}" if parts.port else "")


def _same_site(start: str, target: str, mirror: str | None, original_host: str) -> bool:
    if _origin(start) != _origin(target):
        return False
    if mirror:
        # On a mirror, the first path segment is the original host: a redirect must stay under it.
        prefix = urlsplit(mirror).path.rstrip("/") + f"/{original_host}/"
        return urlsplit(target).path.startswith(prefix)
    return True


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
    """Fetch one document. Raises FetchError (naming the URL and what was expected) on any failure."""
    policy = policy or FetchPolicy.from_env()
    start = mirror_url(url, mirror)
    original_host = urlsplit(url).netloc
    headers = {"User-Agent": policy.user_agent, "Accept": f"{expected_media_type}, */*;q=0.1"}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    timeout = httpx.Timeout(policy.read_timeout, connect=policy.connect_timeout)
    deadline = time.monotonic() + policy.deadline
    log: list[str] = []
    last_error = "no attempt made"
    with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client:
        for attempt in range(1, policy.attempts + 1):
            if attempt > 1:
                pause = policy.backoff * 2 ** (attempt - 2)
                if time.monotonic() + pause > deadline:
                    break
                time.sleep(pause)
            try:
                result = _one_attempt(
                    client, start, headers, expected_media_type, mirror, original_host, policy, deadline
                )
                result.attempts, result.log = attempt, log
                return result
            except _Retry as exc:
                last_error = str(exc)
                log.append(f"attempt {attempt}: {exc}")
                if exc.wait is not None:
                    if exc.wait > policy.max_retry_after or time.monotonic() + exc.wait > deadline:
                        raise FetchError(f"{start}: {exc}; Retry-After {exc.wait:.0f}s exceeds the limit") from None
                    time.sleep(exc.wait)
    raise FetchError(f"{start}: giving up after {len(log)} attempt(s): {last_error}")


class _Retry(Exception):
    def __init__(self, message: str, wait: float | None = None) -> None:
        super().__init__(message)
        self.wait = wait


def _one_attempt(
    client: httpx.Client,
    url: str,
    headers: dict[str, str],
    expected_media_type: str,
    mirror: str | None,
    original_host: str,
    policy: FetchPolicy,
    deadline: float,
) -> FetchResult:
    current = url
    for _ in range(policy.max_redirects + 1):
        try:
            with client.stream("GET", current, headers=headers) as response:
                if response.status_code in (301, 302, 303, 307, 308):
                    location = response.headers.get("location")
                    if not location:
                        raise FetchError(f"{current}: HTTP {response.status_code} redirect without a Location")
                    target = urljoin(current, location)
                    if not _same_site(url, target, mirror, original_host):
                        raise FetchError(
                            f"{current}: redirect to {target} refused: redirects must stay on the same site as {url}"
                        )
                    current = target
                    continue
                if response.status_code == 304:
                    return FetchResult(
                        not_modified=True,
                        final_url=current,
                        etag=response.headers.get("etag"),
                        last_modified=response.headers.get("last-modified"),
                    )
                if response.status_code in RETRYABLE_STATUS:
                    wait = _retry_after(response) if response.status_code in (429, 503) else None
                    raise _Retry(f"HTTP {response.status_code}", wait)
                if response.status_code != 200:
                    raise FetchError(f"{current}: HTTP {response.status_code}; expected 200 with the document")
                media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if not media_type:
                    raise FetchError(f"{current}: response has no Content-Type; expected {expected_media_type}")
                if media_type != expected_media_type:
                    raise FetchError(f"{current}: Content-Type {media_type}; expected {expected_media_type}")
                declared = response.headers.get("content-length")
                if declared and declared.isdigit() and int(declared) > policy.max_bytes:
                    raise FetchError(
                        f"{current}: Content-Length {declared} bytes exceeds the limit of {policy.max_bytes} bytes"
                    )
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > policy.max_bytes:
                        raise FetchError(f"{current}: body exceeds the limit of {policy.max_bytes} bytes (decoded)")
                    if time.monotonic() > deadline:
                        raise FetchError(f"{current}: total deadline of {policy.deadline:g}s exceeded while reading")
                    chunks.append(chunk)
                return FetchResult(
                    not_modified=False,
                    data=b"".join(chunks),
                    media_type=media_type,
                    final_url=current,
                    etag=response.headers.get("etag"),
                    last_modified=response.headers.get("last-modified"),
                )
        except httpx.TimeoutException as exc:
            raise _Retry(f"timeout ({type(exc).__name__})") from None
        except httpx.DecodingError as exc:
            raise FetchError(f"{current}: body could not be decoded: {exc}") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise _Retry(f"connection broke off: {exc}") from None
        except httpx.ConnectError as exc:
            raise _Retry(f"cannot connect: {exc}") from None
        except httpx.HTTPError as exc:
            raise FetchError(f"{current}: {type(exc).__name__}: {exc}") from None
    raise FetchError(f"{url}: more than {policy.max_redirects} redirects")
