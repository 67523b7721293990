"""Canonical URLs only: a source records the publisher's public address, never a mirror's, a private or a
personal one. A host is judged as the client will reach it (`127.1`, `0x7f.0.0.1` and `2130706433` are what
`inet_aton` makes of them; an IPv6 literal embedding an IPv4 address by the one it embeds); a name is taken
through IDNA and refused when a label mixes scripts (`nvіdia` with a Cyrillic `і`)."""

from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
from urllib.parse import urlsplit

import httpx
import idna

# Carrier-grade NAT space: Tailscale and similar overlay networks hand out addresses here.
_SHARED = ipaddress.ip_network("100.64.0.0/10")
# IPv6 prefixes that carry an IPv4 address in their last 32 bits (RFC 4291 compatible, RFC 6052 NAT64).
_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Host suffixes that name a private or personal network, not a publisher.
_PRIVATE_SUFFIXES = (".ts.net", ".localhost", ".local", ".internal", ".lan", ".home.arpa", ".intranet")
# What a host is made of once IDNA has encoded it: LDH labels, nothing else (no spaces, no `%`, no `_`).
_ASCII_HOST_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$")
# A last label the resolver reads as a number (no top-level domain does): the host is an IPv4 literal.
_NUMERIC_LABEL_RE = re.compile(r"^(?:\d+|0x[0-9a-f]*)$")
# Scripts that one writing system mixes by design (Japanese, Korean): one group each.
_SCRIPT_GROUPS = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "BOPOMOFO": "CJK"}
# A blank anywhere: the address bar shows one percent-encoded, so the canonical URL has none.
_SPACE_RE = re.compile(r"\s")
# Full stops the client (httpx, through idna) splits a host at as at `.`: `127。0。0。1` reaches 127.0.0.1.
_UNICODE_DOTS_RE = re.compile("[\u3002\uff0e\uff61]")


def url_problem(url: str) -> str | None:
    """Why `url` is not a public canonical address (however its host is spelt), or None."""
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
    if parts.port == 0:
        return "names port 0, which no server listens on"
    if _SPACE_RE.search(url):
        return "holds a space or other blank: write it percent-encoded (%20), as the address bar shows it"
    problem = host_problem(host)
    if problem is None:
        try:  # what the fetch will do with it: the client's own parser, stricter in places than urlsplit
            httpx.URL(url)
        except (httpx.InvalidURL, UnicodeError) as exc:
            problem = f"is not a URL the HTTP client can fetch ({exc})"
    return problem


def host_problem(host: str, *, private_ok: bool = False) -> str | None:
    """Why `host` is not a public host spelt canonically, or None; `private_ok`: a private address is fine."""
    if _UNICODE_DOTS_RE.sub(".", host).endswith(".."):  # the resolver refuses an empty last label
        return f"names {host!r}, which ends in an empty label (one trailing dot at most)"
    host = host.rstrip(".").lower()
    ip, problem = _literal(_UNICODE_DOTS_RE.sub(".", host).rstrip("."))
    if problem:
        return problem
    if ip is None:
        return name_problem(host, private_ok=private_ok)
    shown = host if str(ip) == host else f"{host} = {ip}"
    problem = None if private_ok else address_problem(ip, shown)
    if problem is None and str(ip) != host and ip.version == 4:
        problem = f"spells the IPv4 address {ip} as {host!r}: write it as {ip} (dotted decimal)"
    return problem


def address_problem(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, shown: str | None = None) -> str | None:
    """Why a client must not fetch a public document from `ip`, or None; `shown`: how it was written."""
    shown = shown or str(ip)
    embedded = _embedded_v4(ip)
    if embedded is not None:
        inner = address_problem(embedded)
        return f"{inner} (embedded in the IPv6 address {shown})" if inner else None
    if ip.is_loopback:
        return f"names a loopback address ({shown})"
    if ip.is_link_local:
        return f"names a link-local address ({shown})"
    if ip.version == 4 and ip in _SHARED:
        return f"names a shared / tailnet address ({shown}, 100.64.0.0/10)"
    if ip.is_private or ip.is_reserved or ip.is_unspecified or ip.is_multicast:
        return f"names a private or reserved address ({shown})"
    return None


def _embedded_v4(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.version == 4:
        return None
    assert isinstance(ip, ipaddress.IPv6Address)
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]  # the client's address
    if (ip in _COMPATIBLE and int(ip) > 1) or ip in _NAT64:  # `::` and `::1` are IPv6's own
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _literal(host: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address | None, str | None]:
    """(the address a literal host names, None) — (None, None) for a name — (None, why) for a broken literal."""
    if ":" in host:
        try:
            ip = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return None, f"names {host!r}, which is not an IPv6 address"
        if "%" in host:
            return None, f"names an IPv6 address with a zone ({host}): a local interface, not a public host"
        return ip, None
    last = host.rsplit(".", 1)[-1]
    if not _NUMERIC_LABEL_RE.fullmatch(last):
        return None, None
    if not re.fullmatch(r"[0-9a-fx.]+", host):
        return None, f"names {host!r}, which is neither an IPv4 address nor a host name"
    try:
        # The resolver's own reading of a numeric host (shorthand, octal, hex, one 32-bit number).
        return ipaddress.IPv4Address(socket.inet_aton(host)), None
    except OSError:
        return None, f"names {host!r}, which is not an IPv4 address (a resolver would refuse or misread it)"


def name_problem(host: str, *, private_ok: bool = False) -> str | None:
    """Why a host name is not a public one spelt plainly, or None; `private_ok`: a private name is fine."""
    try:
        ascii_host = idna.encode(host, uts46=True).decode("ascii")
        labels = [idna.decode(label) if label.startswith("xn--") else label for label in ascii_host.split(".")]
    except (idna.IDNAError, UnicodeError, ValueError) as exc:
        return f"names {host!r}, which is not a valid host name ({exc})"
    if not _ASCII_HOST_RE.fullmatch(ascii_host):
        return f"names {host!r}, which is not a valid host name (letters, digits, hyphens and dots only)"
    for label in labels:
        scripts = _scripts(label)
        if len(scripts) > 1:
            return (
                f"names {host!r}, whose label {label!r} mixes scripts ({', '.join(sorted(scripts))}): a look-alike "
                "of another name; record the publisher's host as it is spelt"
            )
    if private_ok:
        return None
    if ascii_host == "localhost" or ascii_host.endswith(_PRIVATE_SUFFIXES):
        return f"names a private or personal host ({host}): record the publisher's canonical URL"
    if "." not in ascii_host:
        return f"names a single-label host ({host}), not a public one"
    return None


def _scripts(label: str) -> set[str]:
    """The scripts of a label's letters (digits, hyphens and combining marks belong to none)."""
    found = set()
    for ch in label:
        if not ch.isalpha():
            continue
        name = unicodedata.name(ch, "")
        script = name.split(" ", 1)[0] if name else "UNKNOWN"
        found.add(_SCRIPT_GROUPS.get(script, script))
    return found
