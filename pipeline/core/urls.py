"""Canonical URLs only: a source records the publisher's public address, never a mirror's, a private or a
personal one (a link no one else can open is dead in the report and in every refresh)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

# Carrier-grade NAT space: Tailscale and similar overlay networks hand out addresses here.
_SHARED = ipaddress.ip_network("100.64.0.0/10")
# Host suffixes that name a private or personal network, not a publisher.
_PRIVATE_SUFFIXES = (".ts.net", ".localhost", ".local", ".internal", ".lan", ".home.arpa", ".intranet")


def url_problem(url: str) -> str | None:
    """Why `url` is not a public canonical address (user info, or a private, loopback, link-local or tailnet
    host), or None when it is one."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 — raises on a malformed port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"has scheme {parts.scheme!r}: expected http or https"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "carries user info (user:password@): record the public address only"
    if not host:
        return "has no host"
    host = host.rstrip(".").lower()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if host == "localhost" or host.endswith(_PRIVATE_SUFFIXES):
            return f"names a private or personal host ({host}): record the publisher's canonical URL"
        if "." not in host:
            return f"names a single-label host ({host}), not a public one"
        return None
    if ip.is_loopback:
        return f"names a loopback address ({host})"
    if ip.is_link_local:
        return f"names a link-local address ({host})"
    if ip.version == 4 and ip in _SHARED:
        return f"names a shared / tailnet address ({host}, 100.64.0.0/10)"
    if ip.is_private or ip.is_reserved or ip.is_unspecified or ip.is_multicast:
        return f"names a private or reserved address ({host})"
    return None
