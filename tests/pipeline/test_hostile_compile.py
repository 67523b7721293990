"""Hostile compile, round 2: the registry's tables are switched in all at once (a kill leaves the old tables or
the new ones, never a mix `query` would serve), a killed DuckDB build leaves no temp files behind, and a
read-only checkout or a full disk is a clear error with the registry unchanged."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest
from fabricref.compile import registry
from fabricref.core import registry as views
from fabricref.core.files import exclusive_lock
from fabricref.core.paths import Layout
from fabricref.errors import FabricrefError
from test_robustness import env_with_venv

# A child process that runs one registry write slowly, so the test can kill it in the middle.
SLOW_CHILD = textwrap.dedent(
    """
    import sys, time
    import duckdb
    from fabricref.compile import registry
    from fabricref.core import registry as views
    from fabricref.core.paths import Layout

    from pathlib import Path
    lay = Layout(Path(sys.argv[2]))
    if sys.argv[1] == "tables":
        real = registry.write_table
        def slow(*args, **kwargs):
            out = real(*args, **kwargs)
            time.sleep(0.5)
            return out
        registry.write_table = slow
        registry.write_tables(lay, {})  # every table emptied: a mix would show at once
    else:
        real_connect = duckdb.connect
        class Slow:
            def __init__(self, con):
                self.con = con
            def execute(self, *args):
                out = self.con.execute(*args)
                time.sleep(0.5)
                return out
            def close(self):
                self.con.close()
        views.duckdb.connect = lambda *a, **k: Slow(real_connect(*a, **k))
        views.build_database(lay)
    """
)


@pytest.fixture
def tables(built_registry: Layout, tmp_path: Path) -> Layout:
    """A private registry: the shipped compile's Parquet tables, nothing else."""
    lay = Layout(tmp_path / "repo")
    shutil.copytree(built_registry.tables_dir, lay.tables_dir)
    return lay


def _snapshot(lay: Layout) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(lay.tables_dir.glob("*.parquet"))}


def _kill_when(proc: subprocess.Popen[bytes], ready) -> None:
    deadline = time.monotonic() + 30
    while not ready():
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "the child never got there"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def _child(kind: str, lay: Layout) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_CHILD, kind, str(lay.root)],
        env=env_with_venv(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_compile_killed_between_tables_leaves_the_old_registry_whole(tables):
    before = _snapshot(tables)
    assert len(before) >= 5
    proc = _child("tables", tables)

    def two_tables_written() -> bool:
        return any(len(list(d.glob("*.parquet"))) >= 2 for d in tables.registry_dir.glob(".tables.*"))

    _kill_when(proc, two_tables_written)
    assert _snapshot(tables) == before  # not one table of the killed compile was switched in
    leftovers = list(tables.registry_dir.glob(".tables.*"))
    assert leftovers
    # The next compile removes what the killed one left and switches every table at once.
    registry.write_tables(tables, {})
    assert list(tables.registry_dir.glob(".tables.*")) == []
    after = _snapshot(tables)
    assert sorted(after) == sorted(before) and all(after[name] != before[name] for name in before)
    con = duckdb.connect(str(views.build_database(tables)), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM fields").fetchone() == (0,)
    finally:
        con.close()


def _duckdb_started(lay: Layout) -> bool:
    """DuckDB has written the temp database's header: the name alone exists for an instant before, empty, while the
    build reserves it (mkstemp, then unlink), and a kill then would leave nothing behind."""
    for path in lay.registry_dir.glob(".registry.*.duckdb"):
        try:
            if path.stat().st_size > 0:
                return True
        except FileNotFoundError:
            continue
    return False


def test_a_killed_duckdb_build_leaves_no_temp_files(tables):
    proc = _child("duckdb", tables)
    _kill_when(proc, lambda: _duckdb_started(tables))
    assert list(tables.registry_dir.glob(".registry.*"))  # what SIGKILL left behind
    path = views.build_database(tables)
    assert [p.name for p in tables.registry_dir.iterdir() if p.name.startswith(".")] == []
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert con.execute("SELECT count(*) > 0 FROM fields").fetchone() == (True,)
    finally:
        con.close()


def test_leftovers_of_a_live_process_are_left_alone(tables):
    live = tables.registry_dir / f".registry.{os.getppid()}.abc.duckdb"
    live.write_bytes(b"another build in progress")
    views.build_database(tables)
    assert live.exists()


def _fail_with(monkeypatch: pytest.MonkeyPatch, target: object, name: str, code: int) -> None:
    def fail(*_args: object, **_kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(target, name, fail)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_full_disk_or_read_only_checkout_during_compile_is_a_clear_error(tables, monkeypatch, code):
    before = _snapshot(tables)
    _fail_with(monkeypatch, registry.os, "replace", code)
    with pytest.raises(FabricrefError, match=rf"^cannot write registry/tables: {os.strerror(code)}$"):
        registry.write_tables(tables, {})
    assert _snapshot(tables) == before
    assert list(tables.registry_dir.glob(".tables.*")) == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_full_disk_or_read_only_checkout_during_the_duckdb_rebuild_is_a_clear_error(tables, monkeypatch, code):
    _fail_with(monkeypatch, views.tempfile, "mkstemp", code)
    with pytest.raises(FabricrefError, match=rf"^cannot build registry/registry\.duckdb: {os.strerror(code)}$"):
        views.build_database(tables)
    monkeypatch.undo()

    def disk_full(*_args: object, **_kwargs: object) -> None:
        raise duckdb.IOException("could not write file: No space left on device")

    monkeypatch.setattr(views.duckdb, "connect", disk_full)
    with pytest.raises(FabricrefError, match=r"^cannot build registry/registry\.duckdb: .*No space left on device"):
        views.build_database(tables)
    assert [p.name for p in tables.registry_dir.iterdir() if p.name.startswith(".registry.")] == []


def test_a_lock_that_cannot_be_created_is_a_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with (
        pytest.raises(FabricrefError, match=r"^cannot lock .*not-a-dir/\.fabricref\.lock: "),
        exclusive_lock(blocker / ".fabricref.lock"),
    ):
        pass
    import builtins

    _fail_with(monkeypatch, builtins, "open", errno.EROFS)
    with (
        pytest.raises(FabricrefError, match=r"^cannot lock .*: Read-only file system$"),
        exclusive_lock(tmp_path / ".fabricref.lock"),
    ):
        pass
