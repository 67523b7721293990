"""Hostile input, round 3: every command is bounded in time from the moment it starts, and every writer (the
stages too, run by DVC or by hand) takes the one per-checkout lock."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import FEW_SOURCES, copy_checkout_with_sources, env_with_venv
from fabricref.core import files
from fabricref.core.paths import Layout

BIG = "huge-legal"


def tree(root: Path, top: str) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / top).rglob("*")) if p.is_file()}


def big_cluster(root: Path) -> str:
    """A cluster inside every cap (1,024 Helios racks: under 500,000 nodes) that takes seconds to build."""
    src = root / "models" / "clusters" / "amd-helios-vulcano800-2tier-1152.yaml"
    text = src.read_text().replace("building_blocks: 16", "building_blocks: 1024")
    (root / "models" / "clusters" / f"{BIG}.yaml").write_text(
        text.replace("id: amd-helios-vulcano800-2tier-1152", f"id: {BIG}")
    )
    return BIG


def run(args: list[str], root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**env_with_venv(), **env}
    environment.pop("FABRICREF_ROOT", None)
    return subprocess.run(args, cwd=root, env=environment, capture_output=True, text=True, timeout=120)


def test_a_slow_command_stops_at_its_time_limit_naming_it(built_copy):
    """A legal but big cluster took as long as it took: the command stops at the limit, says which limit and how
    to raise it."""
    cluster = big_cluster(built_copy.root)
    done = run(["fabricref", "topology", cluster], built_copy.root, FABRICREF_TIME_LIMIT="0.5")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "stopped at the time limit of 0.5 s (FABRICREF_TIME_LIMIT)" in done.stderr
    assert "FABRICREF_TIME_LIMIT=SECONDS" in done.stderr and "--time-limit SECONDS" in done.stderr
    assert "Traceback" not in done.stderr
    # The option, for one command, is the same limit.
    done = run(["fabricref", "--time-limit", "0.5", "topology", cluster], built_copy.root)
    assert done.returncode == 1 and "time limit of 0.5 s (--time-limit 0.5)" in done.stderr


def test_the_limit_lets_an_import_finish_then_stops(tmp_path, monkeypatch):
    """Seen: the limit rang inside DuckDB's module init (nanobind calling back into Python) and the process
    aborted ("Critical nanobind error", signal 6) instead of stopping with the limit's message. An import is let
    finish; the stop comes right after it."""
    from fabricref.core.deadline import TimeLimitError, bounded

    (tmp_path / "slow_to_import.py").write_text("import time\n\ntime.sleep(0.4)\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FABRICREF_TIME_LIMIT", "0.05")
    monkeypatch.delitem(sys.modules, "slow_to_import", raising=False)
    with pytest.raises(TimeLimitError, match="time limit of 0.05 s"), bounded():
        import slow_to_import  # the alarm rings during its sleep

        assert slow_to_import.DONE
        while True:
            time.sleep(0.01)
    assert "slow_to_import" in sys.modules


@pytest.mark.parametrize(
    "args",
    [["fabricref", "topology", "--all"], [sys.executable, "-m", "fabricref.topology"]],
    ids=["by-hand", "as-dvc-runs-it"],
)
def test_a_writer_stopped_at_its_time_limit_leaves_its_outputs_as_they_were(built_copy, args):
    big_cluster(built_copy.root)
    before = tree(built_copy.root, "registry")
    done = run(args, built_copy.root, FABRICREF_TIME_LIMIT="1", DVC_STAGE="topology")
    assert done.returncode == 1 and "stopped at the time limit of 1 s" in done.stderr, done.stderr
    assert tree(built_copy.root, "registry") == before
    assert not (built_copy.root / files.STAGING).exists() and not (built_copy.root / files.JOURNAL).exists()


@pytest.mark.parametrize("value", ["nan", "0", "-5", "soon", "1e9", "inf"])
def test_a_time_limit_that_is_no_number_of_seconds_is_bad_usage(tmp_path, cli, monkeypatch, value):
    # Refused before the checkout is read: an empty directory is root enough.
    monkeypatch.setenv("FABRICREF_TIME_LIMIT", value)
    result = cli("references", root=tmp_path)
    assert result.code == 2 and f"FABRICREF_TIME_LIMIT={value}: expected a number of seconds" in result.err
    monkeypatch.delenv("FABRICREF_TIME_LIMIT")
    result = cli("--time-limit", value, "references", root=tmp_path)
    assert result.code == 2 and f"--time-limit={value}: expected a number of seconds" in result.err


# The one shipped reference that cites only FEW_SOURCES.
SMALL_REFERENCE = "amd-pensando-pollara-400"


@pytest.fixture(scope="module")
def small_checkout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """A checkout of FEW_SOURCES and the one reference they cite, extracted and compiled once for the module: a
    stage run over it whole (extract, compile, database) succeeds, on two sources rather than every one. Only
    copied (`small_built`)."""
    from fabricref.cli import main

    lay = Layout(copy_checkout_with_sources(tmp_path_factory.mktemp("small") / "repo", *FEW_SOURCES))
    for path in lay.root.glob("models/references/*.yaml"):
        if path.stem != SMALL_REFERENCE:
            path.unlink()
    for verb in ("extract", "compile"):
        assert main([verb, "--root", str(lay.root)]) == 0
    return lay


@pytest.fixture
def small_built(small_checkout: Layout, tmp_path: Path) -> Layout:
    """A private copy of `small_checkout`, for a test that runs a stage in it."""
    return Layout(shutil.copytree(small_checkout.root, tmp_path / "repo"))


HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from fabricref.core import files
    with files.checkout_lock(Path(sys.argv[1])):
        print("held", flush=True)
        sys.stdin.readline()
    """
)


def waiting_on(lock: Path, pid: int) -> bool:
    """Whether process `pid` waits for the flock on `lock` (a blocked request: `->` in /proc/locks)."""
    inode = f":{lock.stat().st_ino} "
    return any(
        "->" in line and line.split()[-4] == str(pid) and inode in line
        for line in Path("/proc/locks").read_text().splitlines()
    )


@pytest.mark.parametrize(
    ("args", "stage"),
    [
        ([sys.executable, "-m", "fabricref.compile"], "compile"),
        ([sys.executable, "-m", "fabricref.database"], "database"),
        pytest.param(["fabricref", "compile"], "", marks=pytest.mark.slow),  # by hand: extract-by-hand in the fast tier
        (["fabricref", "extract"], ""),
    ],
    ids=["compile-as-dvc-runs-it", "database-as-dvc-runs-it", "compile-by-hand", "extract-by-hand"],
)
def test_a_stage_waits_for_the_checkout_lock_another_writer_holds(small_built, args, stage):
    """`measured import`, `pin`, `new` and `retrieve --refresh` hold the checkout lock while they write; a
    stage (compile, every DVC stage) ran beside them unlocked, so the two could interleave. Two real
    processes: one holds the lock; the stage must wait for it (seen in /proc/locks), then run."""
    env = env_with_venv()
    env.pop("FABRICREF_ROOT", None)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(small_built.root)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    writer = subprocess.Popen(
        args,
        cwd=small_built.root,
        env={**env, "DVC_STAGE": stage} if stage else env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lock = small_built.root / files.LOCK
    try:
        deadline = time.monotonic() + 90
        while not waiting_on(lock, writer.pid):
            assert writer.poll() is None, f"the stage ran while another writer held the lock: {writer.communicate()}"
            assert time.monotonic() < deadline, "the stage never asked for the checkout lock"
            time.sleep(0.05)
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
    _out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err


def test_a_limit_reached_inside_duckdb_is_still_the_time_limit(monkeypatch):
    """The stop is raised while DuckDB runs Python (a scan of Python objects, here a Python function in a query):
    DuckDB hands it back as its own error ("Query interrupted", "Python exception occurred"), which must still
    read as the time limit that stopped the command, not a traceback of an internal error."""
    duckdb = pytest.importorskip("duckdb")
    from duckdb.sqltypes import BIGINT
    from fabricref.core import deadline

    def slow(x: int) -> int:
        time.sleep(0.001)
        return x

    monkeypatch.setenv("FABRICREF_TIME_LIMIT", "0.2")
    con = duckdb.connect(config={"threads": 1})  # the function runs on the thread that waits for the query
    con.create_function("slow", slow, [BIGINT], BIGINT)
    with pytest.raises(deadline.TimeLimitError, match="stopped at the time limit of 0.2 s"), deadline.bounded():
        con.execute("SELECT sum(slow(i)) FROM range(100000) r(i)").fetchall()
    # Without the limit reached, DuckDB's own errors stay what they are.
    with pytest.raises(duckdb.Error), deadline.bounded():
        con.execute("SELECT no_such_function(1)")
