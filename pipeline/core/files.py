"""Atomic, deterministic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import FabricrefError, UsageError
from .deadline import critical
from .paths import contained

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, from /proc where it can (setting it to read it races with other threads)."""
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
    """Write via a temporary file in the same directory renamed over the target, with `mode` or the umask's."""
    contained(path)
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
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the renames into `directory` durable, where the file system can."""
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
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
    """An advisory lock on `lock_path`; without `wait`, an error when another process holds it."""
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path, "a+")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
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


def read_bounded(path: Path, limit: int, what: str, error: type[FabricrefError] = UsageError) -> bytes:
    """The bytes of a regular file of at most `limit` bytes whose size is what it reads: a FIFO, a device, a
    directory or a file the kernel makes up (`/proc/self/environ`) is refused with `error`, naming `what`."""
    contained(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{path}: file not found; expected {what}") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory; expected {what}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}; expected {what}") from None
    info = os.fstat(fd)
    problem = None
    if stat.S_ISDIR(info.st_mode):
        problem = f"is a directory; expected {what}"
    elif not stat.S_ISREG(info.st_mode):
        problem = f"not a regular file (a FIFO, socket or device); expected {what}"
    elif info.st_size > limit:
        problem = f"larger than {limit} bytes ({info.st_size:,}); {what} is at most {limit:,} bytes"
    if problem:
        os.close(fd)
        raise error(f"{path}: {problem}")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise error(f"{path}: cannot read: {exc.strerror}; expected {what}") from None
    if len(data) > limit:
        raise error(f"{path}: larger than {limit} bytes; {what} is at most {limit:,} bytes")
    if len(data) != info.st_size:
        raise error(
            f"{path}: read {len(data):,} bytes from a file whose size is {info.st_size:,} (a file the kernel makes "
            f"up as it is read, or one being written); expected {what}"
        )
    return data


# Several files replaced as one (`transaction`): each is staged in `.fabricref-staging/<pid>.<n>/` and the journal
# naming every staged file and its target is written last, as the commit point. A failure before it leaves every
# target as it was; after it, the renames are finished by the next writer if this one is killed (`recover`).
JOURNAL = ".fabricref.journal"
LOCK = ".fabricref.lock"
STAGING = ".fabricref-staging"
_HELD: dict[Path, int] = {}


class Transaction:
    """The files one command writes, staged until `commit` (see `transaction`)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.staged: list[tuple[Path, Path]] = []  # (staged file, target), both absolute
        self.directory: Path | None = None

    def _stage(self, path: Path) -> tuple[Path, Path]:
        target = self._inside(path)
        try:
            if self.directory is None:
                (self.root / STAGING).mkdir(exist_ok=True)
                self.directory = Path(tempfile.mkdtemp(dir=self.root / STAGING, prefix=f"{os.getpid()}."))
            staged = self.directory / str(len(self.staged))
        except OSError as exc:
            raise FabricrefError(f"cannot write {path}: {exc.strerror}") from exc
        self.staged.append((staged, target))
        return staged, target

    def write(self, path: Path, data: bytes, mode: int | None = None) -> None:
        """Stage `data` for `path`: written and fsynced now, in place at commit."""
        staged, _target = self._stage(path)
        try:
            with open(staged, "xb") as handle:
                os.fchmod(handle.fileno(), new_file_mode() if mode is None else mode)
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise FabricrefError(f"cannot write {path}: {exc.strerror}") from exc

    def write_json(self, path: Path, data: Any) -> None:
        self.write(path, canonical_json(data))

    def scratch(self) -> Path:
        """An empty directory in the staging area for a library that writes its file itself: `place` the result."""
        self._stage(self.root / STAGING / "scratch")  # makes the staging directory
        self.staged.pop()
        assert self.directory is not None
        scratch = Path(tempfile.mkdtemp(dir=self.directory, prefix="scratch."))
        return scratch

    def place(self, path: Path, built: Path) -> None:
        """Stage for `path` a file built elsewhere in the checkout."""
        staged, _target = self._stage(path)
        try:
            os.replace(built, staged)
        except OSError as exc:
            raise FabricrefError(f"cannot write {path}: {exc.strerror}") from exc

    def _inside(self, path: Path) -> Path:
        target = path if path.is_absolute() else self.root / path
        target = target.parent.resolve() / target.name
        if not target.is_relative_to(self.root):
            raise FabricrefError(f"{path}: outside the checkout {self.root}; refused")
        return target

    def commit(self) -> None:
        if not self.staged:
            return
        rel = [[s.relative_to(self.root).as_posix(), t.relative_to(self.root).as_posix()] for s, t in self.staged]
        try:
            for _staged, target in self.staged:
                target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FabricrefError(f"cannot write {self.root / JOURNAL}: {exc.strerror}") from exc
        with critical():  # the commit point and the renames after it: a time limit waits for them
            atomic_write_bytes(self.root / JOURNAL, canonical_json({"rename": rel}))
            self.staged = []
            _finish(self.root, rel)

    def abort(self) -> None:
        self.staged = []
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


@contextlib.contextmanager
def transaction(root: Path) -> Iterator[Transaction]:
    """Stage the command's files (`tx.write`, `tx.place`), replaced all at once when the block ends without an
    error; a failure inside it leaves the checkout as it was. The caller holds `checkout_lock`."""
    tx = Transaction(root)
    try:
        yield tx
        tx.commit()
    finally:
        tx.abort()


def _finish(root: Path, entries: list[list[str]]) -> None:
    for staged, target in entries:
        if (root / staged).exists():
            os.replace(root / staged, root / target)
    for directory in sorted({(root / target).parent for _staged, target in entries}):
        _fsync_directory(directory)
    os.unlink(root / JOURNAL)


def recover(root: Path) -> None:
    """Finish what a killed process committed, remove what killed ones staged (under `checkout_lock`)."""
    journal = root / JOURNAL
    if journal.exists():
        try:
            entries = json.loads(journal.read_text(encoding="utf-8"))["rename"]
            for pair in entries:
                for part in pair:
                    if not isinstance(part, str) or part.startswith("/") or ".." in Path(part).parts:
                        raise ValueError(f"{part!r} is not a path inside the checkout")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FabricrefError(
                f"{journal}: an interrupted write left a journal that cannot be read ({exc}); compare the files it "
                "names with git and remove it"
            ) from exc
        with critical():
            _finish(root, entries)
    staging = root / STAGING
    if staging.is_dir():
        for leftover in staging.iterdir():
            pid = leftover.name.split(".", 1)[0]
            if pid.isdigit() and not process_alive(int(pid)):
                shutil.rmtree(leftover, ignore_errors=True)
        with contextlib.suppress(OSError):
            staging.rmdir()  # only when empty


def process_alive(pid: int) -> bool:
    """Whether another process `pid` runs (this one counts as not: what it left from a failed call is stale)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def checkout_lock(root: Path, wait: bool = True) -> Iterator[None]:
    """The per-checkout writer lock, re-entrant within a process; an interrupted transaction is `recover`ed first."""
    key = root.resolve()
    if _HELD.get(key):
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    with exclusive_lock(key / LOCK, wait=wait):
        _HELD[key] = 1
        try:
            recover(key)
            yield
        finally:
            _HELD.pop(key, None)
