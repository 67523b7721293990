"""The content-addressed snapshot store: bytes named by their SHA-256, written once, never rewritten."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from pathlib import Path

from ..errors import IntegrityError
from .files import atomic_write_bytes
from .paths import contained

SHA_RE = re.compile(r"^[0-9a-f]{64}$")
# A snapshot is a document, not a data set: reading more than this without a pinned size is refused.
MAX_UNPINNED_BYTES = 256 * 1024 * 1024


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    contained(path)
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


class SnapshotStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, sha256: str) -> Path:
        if not SHA_RE.fullmatch(sha256):
            raise IntegrityError(f"{sha256!r} is not a SHA-256 hex digest (64 lowercase hex characters)")
        return self.root / "sha256" / sha256[:2] / sha256

    def put(self, data: bytes) -> str:
        """Store bytes; one already present is verified, never overwritten unless corrupt (these bytes repair it)."""
        sha = sha256_bytes(data)
        if not self.holds(sha, len(data)):
            self.repair(sha, data)
        return sha

    def repair(self, sha256: str, data: bytes) -> None:
        """Replace a missing or corrupt copy with bytes proven to hash to its name."""
        if sha256_bytes(data) != sha256:
            raise IntegrityError(f"refusing to repair snapshot {sha256} with bytes that hash differently")
        path = self.path_for(sha256)
        with contextlib.suppress(FileNotFoundError):
            if path.is_symlink() or not path.is_file():
                path.unlink()
        atomic_write_bytes(path, data, mode=0o444)

    def read(self, sha256: str, size: int | None = None) -> bytes:
        """The stored bytes, re-hashed now, from a regular file of the pinned size read with a bound."""
        path = contained(self.path_for(sha256))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise IntegrityError(f"{path}: snapshot missing from the store (pinned sha256 {sha256})") from None
        except OSError as exc:
            what = "a symbolic link" if path.is_symlink() else (exc.strerror or "unreadable")
            raise IntegrityError(f"{path}: store entry is {what}; expected a regular file") from None
        info = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(info.st_mode):
            problem = "store entry is not a regular file; expected the pinned snapshot"
        elif size is not None and info.st_size != size:
            problem = f"size mismatch: {size} bytes pinned, {info.st_size} stored"
        if problem:
            os.close(fd)
            raise IntegrityError(f"{path}: {problem}")
        limit = size if size is not None else MAX_UNPINNED_BYTES
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise IntegrityError(f"{path}: store entry is larger than {limit} bytes; expected the pinned snapshot")
        actual = sha256_bytes(data)
        if actual != sha256:
            raise IntegrityError(f"{path}: hash mismatch: pinned sha256 {sha256}, stored bytes hash to {actual}")
        return data

    def holds(self, sha256: str, size: int | None = None) -> bool:
        """True when a sound copy of these bytes is stored (a missing or damaged one is False: write it)."""
        try:
            self.read(sha256, size)
        except IntegrityError:
            return False
        return True
