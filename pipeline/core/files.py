"""Atomic, deterministic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import FabricrefError, UsageError

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where the kernel tells (Linux /proc), else swapped under a
    lock so no other thread of ours creates a file while it is briefly 0."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:
        old = os.umask(0o077)
        os.umask(old)
    return old


def new_file_mode() -> int:
    """The mode open(2) would give a new file: 0o666 less the umask (mkstemp alone gives 0o600)."""
    return 0o666 & ~current_umask()


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write via a temporary file in the same directory and rename it over the target. The file gets `mode`
    if given (the snapshot store passes read-only modes), else the mode the user's umask gives new files."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise FabricrefError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), new_file_mode() if mode is None else mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
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
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path, "a+")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        # A read-only checkout, a full disk or a path that is not a directory: say which and where.
        raise FabricrefError(f"cannot lock {lock_path}: {exc.strerror or exc}") from exc
    with handle:
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


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of `path`, which must be a regular file of at most `limit` bytes whose size is what it reads:
    a FIFO (would block), a device (`/dev/zero` never ends), a directory, or a file the kernel makes up as it
    is read (`/proc/self/environ` says 0 bytes and holds the environment) is refused, naming the file and `what`
    was expected. The content is never put into a message."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UsageError(f"{path}: file not found; expected {what}") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory; expected {what}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}; expected {what}") from None
    info = os.fstat(fd)
    problem = None
    if stat.S_ISDIR(info.st_mode):
        problem = f"is a directory; expected {what}"
    elif not stat.S_ISREG(info.st_mode):
        problem = f"not a regular file (a FIFO, socket or device); expected {what}"
    elif info.st_size > limit:
        problem = f"{info.st_size:,} bytes; {what} is at most {limit:,} bytes"
    if problem:
        os.close(fd)
        raise UsageError(f"{path}: {problem}")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise UsageError(f"{path}: cannot read: {exc.strerror}; expected {what}") from None
    if len(data) > limit:
        raise UsageError(f"{path}: more than {limit:,} bytes; {what} is at most {limit:,} bytes")
    if len(data) != info.st_size:
        raise UsageError(
            f"{path}: read {len(data):,} bytes from a file whose size is {info.st_size:,} (a file the kernel makes "
            f"up as it is read, or one being written); expected {what}"
        )
    return data
