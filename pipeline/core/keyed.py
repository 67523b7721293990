"""Results reused across runs: one file per entry under `.fabricref-cache/<area>/`, found by a key of everything
that shapes the result (project rule: a cache keyed by less is not a cache).

Why: a stage that does many independent pieces of work (the traffic stage: one per workload, one per sharing pair)
runs as one DVC stage, so DVC reruns it whole when any input moves; the pieces whose inputs did not move are read
back from here instead of being computed again. The caller builds the key (a JSON-able value: the inputs' bytes
hashed, the parameters, the code fingerprint, the library versions); this module only stores and checks.

An entry is one file: a JSON line (the full key and the payload's SHA-256), then the payload. It is used only if
it stores exactly the key asked for and the payload still matches its digest; anything else (another key under a
colliding name, an edited, truncated or torn file) is a miss, computed again and replaced. Writes go to a
temporary file renamed over the entry, so a reader never sees half an entry. Entries are never required: a cold
run (CI's, the benchmark's) computes everything, and a checkout whose cache cannot be written computes everything
each time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

ENTRY_SUFFIX = ".entry"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(value: Any) -> str:
    """The digest of `value` as canonical JSON (sorted keys, no spaces, ASCII): equal values, equal digests."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    return sha256_bytes(text.encode())


def file_digests(root: Path, paths: Iterable[Path]) -> dict[str, str]:
    """Relative POSIX path → SHA-256 of the bytes, for each file (a directory: every file under it, recursively).
    A missing path is keyed as missing (None), so that creating it changes the key."""
    out: dict[str, Any] = {}
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            rel = f.relative_to(root).as_posix()
            try:
                out[rel] = sha256_bytes(f.read_bytes())
            except FileNotFoundError:
                out[rel] = None
    return dict(sorted(out.items()))


def library_versions(distributions: Iterable[str]) -> dict[str, str | None]:
    """The installed version of each distribution (None if absent) and Python's own: what a cached result computed
    with other libraries must not be mistaken for. Read from the package metadata, without importing them."""
    found: dict[str, str | None] = {"python": ".".join(map(str, sys.version_info[:3])) + f" {sys.implementation.name}"}
    for name in sorted(distributions):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


class KeyedCache:
    """Payloads (bytes) stored under keys (JSON-able values) in one directory; `hits` / `misses` count the reads."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.hits = 0
        self.misses = 0
        self._used: set[str] = set()

    def path(self, key: Any) -> Path:
        return self.directory / f"{sha256_json(key)[:40]}{ENTRY_SUFFIX}"

    def read(self, key: Any) -> bytes | None:
        """The stored payload if the entry holds exactly this key and matches its digest; else None (a miss)."""
        path = self.path(key)
        self._used.add(path.name)
        payload = self._read(path, key)
        if payload is None:
            self.misses += 1
        else:
            self.hits += 1
        return payload

    @staticmethod
    def _read(path: Path, key: Any) -> bytes | None:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        head, sep, payload = data.partition(b"\n")
        try:
            header = json.loads(head)
        except ValueError:
            return None
        if not sep or not isinstance(header, dict):
            return None
        # Compared as canonical JSON: the key as stored went through JSON, the one asked for did not.
        if sha256_json(header.get("key")) != sha256_json(key) or header.get("sha256") != sha256_bytes(payload):
            return None
        return payload

    def write(self, key: Any, payload: bytes) -> None:
        """Store an entry (a temporary file renamed over it); an unwritable cache is not an error."""
        head = json.dumps({"key": key, "sha256": sha256_bytes(payload)}, sort_keys=True, allow_nan=True).encode()
        path = self.path(key)
        self._used.add(path.name)
        with contextlib.suppress(OSError):
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".entry.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(head + b"\n" + payload)
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)

    def prune(self, keep_unused: int = 64) -> None:
        """Remove the entries this run neither read nor wrote, but the `keep_unused` most recently written (a
        reverted knob finds its old results): the directory stays bounded however many variants are tried."""
        with contextlib.suppress(OSError):
            unused = []
            for entry in self.directory.glob(f"*{ENTRY_SUFFIX}"):
                if entry.name not in self._used:
                    with contextlib.suppress(OSError):
                        unused.append((entry.stat().st_mtime_ns, entry.name, entry))
            for _, _, entry in sorted(unused, reverse=True)[keep_unused:]:
                entry.unlink(missing_ok=True)


def package_sha256(root: Path | None = None) -> str:
    """SHA-256 over every source file of the package (path and bytes), in path order."""
    import hashlib

    base = root if root is not None else Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in (".py", ".j2")):
        h.update(path.relative_to(base).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()
