"""Atomic, deterministic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import FabricrefError


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise FabricrefError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise FabricrefError(f"cannot write {path}: {exc.strerror}") from exc
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def canonical_json(data: Any) -> bytes:
    """Sorted keys, fixed separators, trailing newline: the same data always gives the same bytes."""
    return (json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_bytes(path, canonical_json(data))


@contextlib.contextmanager
def exclusive_lock(lock_path: Path, wait: bool = True) -> Iterator[None]:
    """An advisory lock so two refreshes never interleave writes to the store and the pins."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as handle:
        flags = fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB
        try:
            fcntl.flock(handle.fileno(), flags)
        except BlockingIOError as exc:
            raise FabricrefError(
                f"another fabricref process holds {lock_path}; try again when it has finished"
            ) from exc
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
