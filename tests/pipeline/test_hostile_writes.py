"""Hostile input, round 3: validate completely, then write atomically, under a per-checkout lock. A refused
import, a full disk, a kill or eight writers at once leave sources, pins, store, models and tables either as
they were or with every file of the command written, never half of it."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import env_with_venv
from fabricref.core import files
from test_measured import FIXTURES, RING

LOG = FIXTURES / "dgx-h100-8gpu-all-reduce-ring.log"
WATCHED = ("sources", "models", "registry/measurements")


def state(root: Path) -> dict[str, bytes]:
    """Every byte of what a writer may touch: sources (pins, store, measured pins), models, the measurements."""
    found = {}
    for top in WATCHED:
        for p in sorted((root / top).rglob("*")):
            if p.is_file():
                found[p.relative_to(root).as_posix()] = p.read_bytes()
    return found


def leftovers(root: Path) -> list[str]:
    staging = root / files.STAGING
    return [p.name for p in staging.iterdir()] if staging.exists() else []


def _row_replaced(text: str, index: int, column: int, value: str) -> str:
    lines = text.splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    cells = lines[rows[index]].split()
    cells[column] = value
    lines[rows[index]] = "  " + "  ".join(cells) + "\n"
    return "".join(lines)


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [(0, str(10**20), "size and count must be whole numbers from 0 to 2**53"), (4, str(2**40), "root must be")],
)
def test_an_import_duckdb_could_not_table_is_refused_before_anything_is_written(
    built_copy, cli, tmp_path, column, value, said
):
    """A row of 10^20 bytes or a root of 2^40 failed in DuckDB after the snapshot and the pin were written, and
    every later import and `dvc repro` failed with it."""
    log = tmp_path / "huge.log"
    log.write_text(_row_replaced(RING, 3, column, value))
    before = state(built_copy.root)
    result = cli("measured", "import", str(log), "--topology", "nvidia-dgx-h100", root=built_copy.root)
    assert result.code == 1 and said in result.err and "huge.log:" in result.err, result.err
    assert state(built_copy.root) == before
    ok = cli("measured", "import", str(LOG), "--topology", "nvidia-dgx-h100", root=built_copy.root)
    assert ok.code == 0, ok.err


def test_a_full_disk_while_the_table_is_built_leaves_the_import_undone(built_copy, cli, monkeypatch):
    from fabricref.estimate import measured

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    before = state(built_copy.root)
    monkeypatch.setattr(measured, "_write_rows", full)
    result = cli("measured", "import", str(LOG), "--topology", "nvidia-dgx-h100", root=built_copy.root)
    assert result.code != 0 and "No space left on device" in result.err
    assert "Traceback" not in result.err
    assert state(built_copy.root) == before and leftovers(built_copy.root) == []
    monkeypatch.undo()
    ok = cli("measured", "import", str(LOG), "--topology", "nvidia-dgx-h100", root=built_copy.root)
    assert ok.code == 0, ok.err


def test_a_full_disk_at_the_commit_point_leaves_the_import_undone(built_copy, cli, monkeypatch):
    real = files.atomic_write_bytes

    def journal_fails(path, data, mode=None):
        if path.name == files.JOURNAL:
            raise files.FabricrefError(f"cannot write {path}: {os.strerror(errno.ENOSPC)}")
        return real(path, data, mode)

    before = state(built_copy.root)
    monkeypatch.setattr(files, "atomic_write_bytes", journal_fails)
    result = cli("measured", "import", str(LOG), "--topology", "nvidia-dgx-h100", root=built_copy.root)
    assert result.code == 1 and "No space left on device" in result.err
    assert state(built_copy.root) == before and leftovers(built_copy.root) == []


KILL_AT = """
import os, signal, sys
from fabricref.core import files
from fabricref.cli import main

where = sys.argv[1]
if where == "commit":  # after the journal is written, before any staged file is renamed
    files._finish = lambda root, entries: os.kill(os.getpid(), signal.SIGKILL)
else:  # while staging: after the first file, before the commit point
    real = files.Transaction.write
    def write(self, path, data, mode=None):
        real(self, path, data, mode)
        os.kill(os.getpid(), signal.SIGKILL)
    files.Transaction.write = write
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["staging", "commit"])
def test_a_killed_import_is_undone_or_finished_by_the_next_writer(built_copy, cli, where):
    before = state(built_copy.root)
    args = ["measured", "import", str(LOG), "--topology", "nvidia-dgx-h100", "--root", str(built_copy.root)]
    done = subprocess.run(
        [sys.executable, "-c", KILL_AT, where, *args], env=env_with_venv(), capture_output=True, text=True
    )
    assert done.returncode == -9, done.stderr
    assert state(built_copy.root) == before  # killed before or at the commit point: nothing moved yet
    # The next writer takes the lock, finishes a committed transaction or drops an uncommitted one, then works.
    again = cli("measured", "import", str(LOG), "--topology", "nvidia-dgx-h100", root=built_copy.root)
    assert again.code == 0, again.err
    assert ("already pinned" in again.out) == (where == "commit")
    assert not (built_copy.root / files.JOURNAL).exists() and leftovers(built_copy.root) == []
    pins = list((built_copy.root / "sources" / "measured").glob("*.json"))
    assert len(pins) == 1
    shown = cli("measured", "compare", "--topology", "nvidia-dgx-h100", "--json", root=built_copy.root)
    assert shown.code == 0 and json.loads(shown.out)["rows"]


def test_a_full_disk_during_new_reference_writes_none_of_its_files_and_the_retry_works(no_sources, cli, monkeypatch):
    real = files.Transaction.write
    calls = []

    def third_fails(self, path, data, mode=None):
        calls.append(path)
        if len(calls) == 3:
            raise files.FabricrefError(f"cannot write {path}: {os.strerror(errno.ENOSPC)}")
        return real(self, path, data, mode)

    before = state(no_sources.root)
    monkeypatch.setattr(files.Transaction, "write", third_fails)
    args = ("new", "reference", "acme-full", "--form-factor", "nic", "--title", "Acme Full")
    result = cli(*args, root=no_sources.root)
    assert result.code == 1 and "No space left on device" in result.err
    assert state(no_sources.root) == before and leftovers(no_sources.root) == []
    monkeypatch.undo()
    retry = cli(*args, root=no_sources.root)
    assert retry.code == 0, retry.err  # not "id already in use"
    for path in ("models/identities.json", "models/references/acme-full.yaml"):
        assert "acme-full" in (no_sources.root / path).read_text() or path.endswith(".yaml")
    assert (no_sources.root / "models" / "revisions" / "references" / "acme-full.json").is_file()


@pytest.mark.slow
def test_eight_parallel_new_references_all_survive(no_sources):
    """Each run reads models/identities.json, adds its id and writes it back: without the lock four of eight
    were lost."""
    env = env_with_venv()

    def make(i: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["fabricref", "new", "reference", f"acme-par{i}", "--form-factor", "nic", "--title", f"Acme Par {i}"],
            cwd=no_sources.root,
            env=env,
            capture_output=True,
            text=True,
        )

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(make, range(8)))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    identities = json.loads((no_sources.root / "models" / "identities.json").read_text())["references"]
    assert {f"acme-par{i}" for i in range(8)} <= set(identities)
    for i in range(8):
        assert (no_sources.root / "models" / "references" / f"acme-par{i}.yaml").is_file()
        assert (no_sources.root / "models" / "revisions" / "references" / f"acme-par{i}.json").is_file()


def test_a_retrieval_date_in_the_future_is_refused(few_sources, cli):
    before = state(few_sources.root)
    source = sorted(p.stem for p in (few_sources.root / "sources" / "transcriptions").glob("*.html"))[0]
    transcription = few_sources.root / "sources" / "transcriptions" / f"{source}.html"
    transcription.write_text(transcription.read_text() + "\n<!-- edited -->\n")
    result = cli("pin", source, "--retrieved-at", "9999-12-31T23:59:59Z", root=few_sources.root)
    assert result.code != 0 and "is in the future" in result.err
    after = state(few_sources.root)
    after.pop(f"sources/transcriptions/{source}.html")
    before.pop(f"sources/transcriptions/{source}.html")
    assert after == before


def test_the_transaction_helper_refuses_a_path_outside_the_checkout(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(files.FabricrefError, match="outside the checkout"), files.transaction(root) as tx:
        tx.write(root / ".." / "escape.txt", b"x")
    assert not (tmp_path / "escape.txt").exists() and leftovers(root) == []


def test_a_journal_left_by_a_killed_writer_is_finished_under_the_lock(tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "old.txt").write_text("old")
    staged = root / files.STAGING / "1.x"
    staged.mkdir(parents=True)
    (staged / "0").write_text("new")
    (root / files.JOURNAL).write_text(json.dumps({"rename": [[f"{files.STAGING}/1.x/0", "a/old.txt"]]}))
    with files.checkout_lock(root):
        pass
    assert (root / "a" / "old.txt").read_text() == "new"
    assert not (root / files.JOURNAL).exists()
    (root / files.JOURNAL).write_text(textwrap.dedent('{"rename": [["../x", "a/old.txt"]]}'))
    with pytest.raises(files.FabricrefError, match="cannot be read"), files.checkout_lock(root):
        pass
