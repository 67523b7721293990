"""The content-addressed snapshot store: bytes named by their SHA-256, written once, never rewritten."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from .errors import IntegrityError
from .files import atomic_write_bytes

SHA_RE = re.compile(r"^[0-9a-f]{64}$")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class SnapshotStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, sha256: str) -> Path:
        if not SHA_RE.fullmatch(sha256):
            raise IntegrityError(f"{sha256!r} is not a SHA-256 hex digest (64 lowercase hex characters)")
        return self.root / "sha256" / sha256[:2] / sha256

    def put(self, data: bytes) -> str:
        """Store bytes; a snapshot already present is verified, never overwritten."""
        sha = sha256_bytes(data)
        path = self.path_for(sha)
        if path.exists():
            self.verify(sha)
            return sha
        atomic_write_bytes(path, data, mode=0o444)
        return sha

    def read(self, sha256: str) -> bytes:
        """The stored bytes, re-hashed now: a missing or altered snapshot is an error naming the file."""
        path = self.path_for(sha256)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise IntegrityError(f"{path}: snapshot missing from the store (pinned sha256 {sha256})") from None
        actual = sha256_bytes(data)
        if actual != sha256:
            raise IntegrityError(f"{path}: hash mismatch: pinned sha256 {sha256}, stored bytes hash to {actual}")
        return data

    def verify(self, sha256: str) -> bool:
        self.read(sha256)
        return True
