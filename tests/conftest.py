"""Shared fixtures: a private copy of the checkout per test, and an in-process CLI runner.

The suite runs under pytest-xdist (`-n 2`, README): the registry built from the shipped data is built once per
run in a directory every worker of that run shares (under a file lock), and so is the whole `dvc repro` clone;
the tests that read that clone share one xdist group (DVC commands in one repository must not run at once), and
the tests that change it work on a private copy of it (`pipeline_copy`), on any worker."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import http.client
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fabricref.core.paths import Layout
from pytest_httpserver import HTTPServer

if TYPE_CHECKING:
    import networkx as nx

# The CLI, networkx and DuckDB are imported where a fixture needs them, not here: pytest's controlling process
# (under xdist) loads this file only for its hooks and runs no test, and it starts the workers only once it has.

# The browser tests' fixtures (base, browser, page, viewport), available to every module that asks for them.
pytest_plugins = ["browser_fixtures"]

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = str(Path(sys.executable).parent)


def form_factor(path: Path) -> str:
    """A reference model's form factor, read from its file (tests discover references by it: adding one needs no
    test edit)."""
    match = re.search(r"^form_factor:\s*(\S+)", path.read_text(), re.MULTILINE)
    assert match, f"{path}: no form_factor"
    return match.group(1)


def references_of(*form_factors: str) -> list[str]:
    """Ids of the shipped reference models of the given form factors, sorted."""
    return sorted(p.stem for p in (ROOT / "models" / "references").glob("*.yaml") if form_factor(p) in form_factors)


# Systems with a topology of their own (servers, racks); cluster-level references are built from their cluster
# model and tested as clusters; switch and NIC references are network products with no system topology.
SYSTEM_REFERENCES = references_of("server", "rack")
CLUSTERS = sorted(p.stem for p in (ROOT / "models" / "clusters").glob("*.yaml"))
# A representative few systems for a sweep over every system that the fast tier runs on a few: a rack of scale-up
# switches, a server of directly linked GPUs, an NVSwitch server, and one whose link bandwidth no source states.
FAST_SYSTEMS = ("amd-helios", "amd-mi300x-pollara400", "nvidia-dgx-h100", "nvidia-vera-rubin-nvl144")
assert set(FAST_SYSTEMS) <= set(SYSTEM_REFERENCES), set(FAST_SYSTEMS) - set(SYSTEM_REFERENCES)
# And for a sweep over every reference: those, a switch, a NIC and a cluster's reference.
FAST_REFERENCES = (*FAST_SYSTEMS, "broadcom-tomahawk-5", "nvidia-connectx-7", "meta-genai-24k-roce")
# Clusters of more than 4,096 building blocks (the 131,072-GPU one): a test over every cluster runs them in the
# whole suite, not the fast tier (`in_fast_tier`).
HUGE_CLUSTERS = sorted(
    p.stem
    for p in (ROOT / "models" / "clusters").glob("*.yaml")
    if (m := re.search(r"^building_blocks: (\d+)$", p.read_text(encoding="utf-8"), re.M)) and int(m.group(1)) > 4096
)


def in_fast_tier(*ids: str, slow: tuple[str, ...] = ()) -> list[Any]:
    """`ids` as parameters, each huge cluster's (and each one in `slow`) marked slow."""
    return [pytest.param(i, marks=pytest.mark.slow) if i in HUGE_CLUSTERS or i in slow else i for i in ids]


def working_tree_files(root: Path = ROOT) -> list[str]:
    """Files git tracks plus new files it does not ignore: the checkout as a developer has it now."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True, capture_output=True
    ).stdout.decode()
    return sorted(p for p in out.split("\0") if p and (root / p).is_file())


# What a copy without git leaves out: the code and its tests. Such a copy is run in-process (`main([...,
# "--root", copy])`, the stage functions), by the installed package, never by the copy's own code; a DVC clone
# (with_git) has everything, since its stages declare pipeline/'s folders as deps.
CODE_DIRS = ("pipeline/", "tests/")


# A file above this is copied from disk each time rather than held in memory (the checkout's largest is ~80 KB;
# an untracked file that git does not ignore is copied too, whatever its size).
HELD_BYTES = 1024 * 1024


@functools.cache
def _checkout_contents(whole: bool) -> tuple[tuple[str, bytes | None, int, int], ...]:
    """(path, bytes or None when large, mode, mtime in ns) of each file a copy takes, read once per process:
    every later copy only writes (the checkout does not change while the tests run)."""
    contents = []
    for rel in working_tree_files():
        if not whole and rel.startswith(CODE_DIRS):
            continue
        info = (ROOT / rel).stat()
        data = (ROOT / rel).read_bytes() if info.st_size <= HELD_BYTES else None
        contents.append((rel, data, stat.S_IMODE(info.st_mode), info.st_mtime_ns))
    return tuple(contents)


def copy_checkout(dest: Path, with_git: bool = False, keep: Callable[[str], bool] | None = None) -> Path:
    """A copy of the checkout at `dest`, modes and modification times kept (as shutil.copy2 keeps them). Without
    git, the code and its tests are left out (CODE_DIRS); `keep(relative path)` false leaves a file out too."""
    made: set[Path] = set()
    for rel, data, mode, mtime in _checkout_contents(whole=with_git):
        if keep is not None and not keep(rel):
            continue
        target = dest / rel
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        if data is None:
            shutil.copyfile(ROOT / rel, target)
            os.chmod(target, mode)
        else:
            with open(target, "xb") as out:
                out.write(data)
                os.fchmod(out.fileno(), mode)  # exact, whatever the umask
        os.utime(target, ns=(mtime, mtime))
    if with_git:
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        }
        # An identity of the clone's own: `dvc exp run` commits and refuses to start without one (a clean CI
        # machine has no global git identity).
        for cmd in (
            ["git", "init", "-q", "-b", "main"],
            ["git", "config", "user.name", "t"],
            ["git", "config", "user.email", "t@t"],
            ["git", "add", "-A"],
            ["git", "commit", "-q", "-m", "copy"],
        ):
            subprocess.run(cmd, cwd=dest, check=True, env=env)
    return dest


def bare_checkout(dest: Path) -> Path:
    """The least a directory needs to be a checkout: sources/ (empty) and the vocabulary."""
    (dest / "sources").mkdir(parents=True)
    (dest / "schemas").mkdir()
    shutil.copyfile(ROOT / "schemas" / "vocabulary.json", dest / "schemas" / "vocabulary.json")
    return dest


def copy_checkout_with_sources(dest: Path, *source_ids: str) -> Path:
    """`copy_checkout(dest)` holding only the named sources (none: no source at all): their declarations, pins,
    transcriptions and every snapshot their pins name, for a test of a stage's handling of the checkout rather
    than of the shipped data. The other sources' ~250 files are never written (most of a whole copy)."""
    import json

    here = Layout(ROOT)
    sources, store = here.relative(here.sources_dir) + "/", here.relative(here.store_dir) + "/"
    snapshots: set[str] = set()
    for pin in sorted(here.sources_dir.glob("pins/*.json")):
        if pin.stem in source_ids:
            snapshots.update(r["sha256"] for r in json.loads(pin.read_text())["revisions"])

    def keep(rel: str) -> bool:
        name = rel.rsplit("/", 1)[-1]
        if rel.startswith(store):
            return name in snapshots
        return not rel.startswith(sources) or name.split(".")[0] in source_ids

    copy_checkout(dest, keep=keep)
    Layout(dest).sources_dir.mkdir(exist_ok=True)  # a checkout declaring no source is still one
    assert sorted(p.stem for p in Layout(dest).sources_dir.glob("*.yaml")) == sorted(source_ids)
    return dest


# A valid field record and its provenance, shared by the schema tests (one copy, not one per test module).
PROVENANCE = {
    "source_id": "demo-doc",
    "rule_id": "gpus",
    "revision": 1,
    "sha256": "a" * 64,
    "retrieved_at": "2026-01-01T00:00:00Z",
    "url": "https://example.test/demo.html",
    "snapshot_path": "sources/snapshots/sha256/aa/" + "a" * 64,
    "locator": "table row 'GPUs'",
    "excerpt": "8",
    "origin": "transcription",
}
STATED = {
    "record": "field",
    "reference_id": "demo",
    "field": "accelerator.count",
    "value_number": 8.0,
    "value_text": "8",
    "unit": "count",
    "direction": None,
    "status": "published",
    "confidence": "published",
    "provenance": [PROVENANCE],
}


def document_paths(value: Any, parts: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a parsed JSON / YAML document (keys and indexes), the root first, parents before children."""
    out = [parts]
    if isinstance(value, dict):
        for key, item in value.items():
            out += document_paths(item, (*parts, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += document_paths(item, (*parts, index))
    return out


def ensure_database(lay: Layout) -> Path:
    """registry.duckdb, rewritten first if it is missing, damaged or its views do not match the Parquet tables
    present (a copied checkout's names the original's files); the tests' way to open it as a person would."""
    import duckdb
    from fabricref.core.registry import BUILD_TABLE, _views, build_database, verify_file
    from fabricref.errors import IntegrityError

    path = lay.duckdb_path
    try:
        verify_file(path)
        con = duckdb.connect(str(path), read_only=True)
        try:
            built = con.execute(f"SELECT view, parquet_path FROM {BUILD_TABLE} ORDER BY view").fetchall()
        finally:
            con.close()
        if [tuple(r) for r in built] == sorted(_views(lay)):
            return path
    except (IntegrityError, duckdb.Error):
        pass
    return build_database(lay)


def db_rows(lay: Layout, sql: str, *params: Any) -> list[dict[str, Any]]:
    """The rows of `sql` over the registry's database (read-only), as dicts by column name."""
    import duckdb

    con = duckdb.connect(str(ensure_database(lay)), read_only=True)
    try:
        cur = con.execute(sql, list(params))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


@pytest.fixture
def repo(tmp_path: Path) -> Layout:
    """A private copy of the checkout's data (sources, pins, snapshots, models, params; not the code: CODE_DIRS):
    tests never touch the real one."""
    return Layout(copy_checkout(tmp_path / "repo"))


# Two sources, one fetched and one a design statement (no URL), for `few_sources`.
FEW_SOURCES = ("amd-pensando-pollara-400", "fabricref-design-statement-amd-scale-out")


@pytest.fixture
def few_sources(tmp_path: Path) -> Layout:
    """A private copy of the checkout's data holding only FEW_SOURCES (`copy_checkout_with_sources`): a stage run
    over it as a whole (retrieve, extract) reads two sources rather than every one, and a test that declares a
    source of its own and fetches it meets other sources beside it without a copy of every one."""
    return Layout(copy_checkout_with_sources(tmp_path / "repo", *FEW_SOURCES))


@pytest.fixture
def no_sources(tmp_path: Path) -> Layout:
    """A private copy of the checkout's data without any source (`copy_checkout_with_sources` of none): models,
    params and schemas, for a test of what reads those alone (a model, a knob, a default) and edits one."""
    return Layout(copy_checkout_with_sources(tmp_path / "repo"))


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def said(self) -> str:
        """Everything printed with its line breaks as single spaces: a message wraps between words at the console
        width, where a long path puts the breaks anywhere."""
        return " ".join((self.out + self.err).split())


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    from fabricref.cli import main

    def run(*args: str, root: Path | None = None) -> Result:
        argv = [*args, "--root", str(root)] if root is not None else list(args)
        capsys.readouterr()
        code = main(argv)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def printed(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Result]:
    """`printed(*args, root=...)`: what the in-process CLI prints, run once per test run for each argv, root,
    working directory and the environment the CLI reads (COLUMNS, NO_COLOR, TERM, FABRICREF_*: a command's output
    is a function of those), for the tests that read one command's output several
    ways. Only for commands that change nothing; `cli` runs one afresh. Every xdist worker of the run shares the
    outputs (files under the run's directory, written under a lock): the tests reading one command's output land
    on different workers, and a step estimate of a 4,096-GPU cluster costs a CPU second each time."""
    import contextlib
    import io
    import json

    from fabricref.cli import main

    store = shared_base(tmp_path_factory) / "printed"
    store.mkdir(exist_ok=True)
    seen: dict[str, Result] = {}

    def run(*args: str, root: Path | None = None) -> Result:
        env = sorted((k, v) for k, v in os.environ.items() if k in ("COLUMNS", "NO_COLOR", "TERM") or "FABRICREF" in k)
        key = json.dumps([args, str(root) if root else None, os.getcwd(), env])
        if key not in seen:
            name = hashlib.sha256(key.encode()).hexdigest()
            done = store / f"{name}.json"
            with open(store / f"{name}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not done.exists():
                    out, err = io.StringIO(), io.StringIO()
                    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                        code = main([*args, "--root", str(root)] if root is not None else list(args))
                    tmp = done.with_suffix(".tmp")
                    tmp.write_text(json.dumps([code, out.getvalue(), err.getvalue()]))
                    tmp.replace(done)
            seen[key] = Result(*json.loads(done.read_text()))
        return seen[key]

    return run


def shared_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run's directory: under xdist, the parent of every worker's basetemp (one per run, never shared with
    another run); otherwise the basetemp."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_once(base: Path, name: str, build: Callable[[Path], None]) -> Path:
    """`build(base / name)` run once per test run, however many xdist workers ask: a file lock makes the others
    wait for the first. A build that failed is started afresh by the next asker (and fails there the same way)."""
    target, done = base / name, base / f"{name}.done"
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            build(target)
            done.touch()
    return target


def _build_registry(target: Path) -> None:
    from fabricref.cli import main

    lay = Layout(copy_checkout(target / "repo"))
    for verb in (["retrieve"], ["extract"], ["compile"], ["topology", "--all"]):
        assert main([*verb, "--root", str(lay.root)]) == 0
    ensure_database(lay)  # written once here, so readers in parallel workers never rewrite it


@pytest.fixture(scope="session")
def built_registry(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """The shipped data run through retrieve → extract → compile → topology once per run, shared by every test
    (and every xdist worker) that only reads it; a test that writes uses `built_copy`."""
    return Layout(build_once(shared_base(tmp_path_factory), "built", _build_registry) / "repo")


@pytest.fixture(scope="session", autouse=True)
def _registry_built_in_the_background(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Under xdist, the first worker starts building the shared registry in a separate process as soon as its
    session starts, when any selected test needs it: both cores keep running tests meanwhile, instead of one
    building and the other waiting at the lock. `built_registry` waits for that build (the same lock)."""
    wanted = any("built_registry" in getattr(item, "fixturenames", ()) for item in request.session.items)
    if os.environ.get("PYTEST_XDIST_WORKER") != "gw0" or not wanted:
        yield
        return
    base = shared_base(tmp_path_factory)
    with open(base / "built.log", "w") as log:
        proc = subprocess.Popen([sys.executable, __file__, str(base)], stdout=log, stderr=subprocess.STDOUT)
    yield
    try:
        proc.wait(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def built_graph(built_registry: Layout) -> Callable[[str], nx.Graph]:
    """`built_graph(id)`: the topology stage's graph of a reference or cluster, built from the shared registry
    once per worker and frozen, so a test that tried to change it fails. No xdist group: building is cheap (every
    topology well under 2 CPU s, the 24,576-GPU cluster ~0.7), so its tests balance over the workers."""
    import networkx as nx
    from fabricref.topology import stage

    graphs: dict[str, nx.Graph] = {}

    def get(topology_id: str) -> nx.Graph:
        if topology_id not in graphs:
            graphs[topology_id] = nx.freeze(stage.build(built_registry, topology_id))
        return graphs[topology_id]

    return get


def _build_extracted(target: Path) -> None:
    from fabricref.core.sources import load_sources
    from fabricref.extract.stage import run as extract

    lay = Layout(copy_checkout(target / "repo"))
    extract(lay, load_sources(lay))


@pytest.fixture(scope="session")
def extracted_checkout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """The checkout's data copied and run through extract once per run (every xdist worker shares it): its claims
    as a first `extract` of the shipped data leaves them. Only read; a test that changes it uses `extracted`."""
    return Layout(build_once(shared_base(tmp_path_factory), "extracted", _build_extracted) / "repo")


@pytest.fixture
def extracted(extracted_checkout: Layout, tmp_path: Path) -> Layout:
    """A private copy of the extracted checkout, for a test that edits models or claims and runs compile."""
    return Layout(shutil.copytree(extracted_checkout.root, tmp_path / "repo"))


@pytest.fixture(scope="session")
def validated_registry(built_registry: Layout, tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """A copy of the session's built registry with the validate stage run on it (registry/validation/: every
    published result estimated, the suite's costliest read), once per run for every xdist worker, its database
    written there so that readers never rewrite it. Only read."""

    def build(target: Path) -> None:
        from fabricref.validate.stage import run

        root = target / "repo"
        shutil.copytree(built_registry.root, root, ignore=shutil.ignore_patterns(".venv", ".git"))
        lay = Layout(root)
        run(lay)
        ensure_database(lay)

    return Layout(build_once(shared_base(tmp_path_factory), "validated", build) / "repo")


@pytest.fixture
def built_copy(built_registry: Layout, tmp_path: Path) -> Layout:
    """A private copy of the session's built registry (retrieve → extract → compile already run), for a test
    that changes inputs and reruns a stage: the shared one stays as built."""
    root = tmp_path / "repo"
    shutil.copytree(built_registry.root, root, ignore=shutil.ignore_patterns(".venv", ".git"))
    return Layout(root)


def env_with_venv() -> dict[str, str]:
    return {**os.environ, "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", "")}


@pytest.fixture(scope="session")
def httpserver_listen_address() -> tuple[str, int]:
    """pytest-httpserver on 127.0.0.1 (any free port): tests talk only to loopback."""
    return ("127.0.0.1", 0)


class QuickHTTPServer(HTTPServer):
    """pytest-httpserver's server, stopped within 0.05 s: its serve loop looks for a stop request every 0.5 s by
    default, and every stop (each worker's session server, a test's own server) would wait for that."""

    def thread_target(self) -> None:
        assert self.server is not None
        self.server.serve_forever(poll_interval=0.05)


@pytest.fixture(scope="session")
def make_httpserver(httpserver_listen_address: tuple[str, int]) -> Iterator[HTTPServer]:
    """The session's server (pytest-httpserver's fixture of that name, on QuickHTTPServer)."""
    server = QuickHTTPServer(*httpserver_listen_address)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


@pytest.fixture
def httpserver(make_httpserver: HTTPServer) -> Iterator[HTTPServer]:
    """pytest-httpserver's per-test server, which also waits, when the test ends, until the server has answered
    every request already sent to it. It answers one at a time: a slow handler, or a retry the client abandoned
    on a timeout, would otherwise be answered during the next test, from that test's expectations."""
    make_httpserver.clear()
    yield make_httpserver
    conn = http.client.HTTPConnection(make_httpserver.host, make_httpserver.port, timeout=60)
    try:
        conn.request("GET", "/.conftest-drain")  # answered (no handler: 500) only after everything queued before
        conn.getresponse().read()
    finally:
        conn.close()
    make_httpserver.clear()


@pytest.fixture
def hold(httpserver: HTTPServer) -> Iterator[Callable[[float], bool]]:
    """`hold(seconds)` in a request handler: waits that long, or less if the test ends first; True once it has
    ended. A handler that must outlast the client's timeout holds rather than sleeps: the client's timeout still
    decides when it gives up, and the server then answers what the client abandoned as soon as the test ends, not
    a fixed sleep later (the `httpserver` fixture waits for those answers). Set up after `httpserver`, so the end
    of the hold comes before that wait."""
    ended = threading.Event()
    yield ended.wait
    ended.set()


def _temp_root_of_this_checkout(config: pytest.Config) -> None:
    """The run's temporary directories under a root of this checkout's own (one per checkout path, in the system
    temporary directory), unless --basetemp or PYTEST_DEBUG_TEMPROOT says where. Why: at its end a run deletes
    every finished run's directories but the newest three under its root; in the shared default root
    (/tmp/pytest-of-USER) that is every other checkout's runs too, and deleting their tens of thousands of files
    took the end of a run 7-40 s on a shared machine. Here a run deletes only this checkout's old runs.

    Under PYTHONDONTWRITEBYTECODE (kept out of the checkout and the virtualenv), every process of a run, each
    xdist worker and each `fabricref` or `dvc` a test starts, compiled every module it imported afresh: ~8 of a
    worker's 12 CPU s of collecting. The run's processes keep their bytecode under that root instead, still out
    of both (PYTHONPYCACHEPREFIX), and the next run reads it back."""
    digest = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"fabricref-tests-{digest}"
    root.mkdir(mode=0o700, exist_ok=True)
    if root.is_symlink() or root.stat().st_uid != os.getuid():  # not ours (a shared /tmp): the default root
        return
    if sys.dont_write_bytecode:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = str(root / "bytecode")
        sys.dont_write_bytecode = False
    if not (config.option.basetemp or os.environ.get("PYTEST_DEBUG_TEMPROOT")):
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(root)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns `-n auto` into a number of workers
def pytest_cmdline_main(config: pytest.Config) -> None:
    """In parallel by default: one pytest-xdist worker per core plus one (at most 4) with `--dist loadgroup` (the
    groups below), unless -n is given (`-n 0`: one process) or --pdb. The extra worker keeps the cores busy while
    a test waits on a subprocess, a server, a lock or a time limit. Done here rather than in pyproject's addopts
    so that a virtualenv without pytest-xdist still runs the suite, in one process."""
    if hasattr(config, "workerinput"):  # an xdist worker: it re-parses the command line, where no --dist stands
        config.option.loadgroup = config.option.loadgroup or config.workerinput.get("fabricref_loadgroup", False)
        return
    _temp_root_of_this_checkout(config)
    if not config.pluginmanager.hasplugin("xdist"):
        return
    if config.option.numprocesses is None and not config.getoption("usepdb", False):
        config.option.numprocesses = min(len(os.sched_getaffinity(0)) + 1, config.option.maxprocesses or 4)
    if config.option.dist == "no":
        config.option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)  # an xdist hook: absent without pytest-xdist
def pytest_configure_node(node: Any) -> None:  # xdist's WorkerController
    """Tell each worker that the groups apply. A worker sets up its options from the command line alone, so the
    `--dist loadgroup` chosen above never reaches it: without this its tests carry no group, every test is
    scheduled on its own, and two DVC commands could run in the shared `built_pipeline` clone at once."""
    node.workerinput["fabricref_loadgroup"] = node.config.option.dist == "loadgroup"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups (`--dist loadgroup`)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that reads the shared `built_pipeline` clone joins one xdist group: one worker runs them all, so
    no two DVC commands run in that repository at once. A test that changes the clone (`pipeline_copy`) is not in
    the group: it has a copy of its own. The `built_graph` tests are not grouped either: each worker builds the
    few graphs it needs (cheap), and the long read-backs of the large clusters' exports run on both workers.

    The order (the same in every worker, as xdist requires) puts the longest chain first, the `dvc repro` clone's
    tests, then the other slow tests (a long test started last keeps one worker busy while the other idles), the
    ones on a copy of the clone last among them (the other worker builds the clone meanwhile), and the tests that
    read the shared registry after the others, so the workers run those while it is built in the
    background (`_registry_built_in_the_background`). xdist then sends the groups first, the largest first (its
    `--loadscope-reorder`), and the ungrouped tests in this order. Tests do not depend on their order."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "built_pipeline" in names and "pipeline_copy" not in names:
            item.add_marker(pytest.mark.xdist_group("built_pipeline"))

    def rank(item: pytest.Item) -> tuple[bool, bool, bool, bool]:
        names = getattr(item, "fixturenames", ())
        grouped = "built_pipeline" in names and "pipeline_copy" not in names
        slow = item.get_closest_marker("slow") is not None
        return not grouped, not slow, "pipeline_copy" in names, "built_registry" in names

    items.sort(key=rank)  # stable: collection order within each rank


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under `--dist loadgroup`, xdist marks a grouped test by appending `@group` to its id, in the worker, after
    the hook above. pytest-xdist 3.8 does that by a write that pytest 9.2 no longer reads (pytest-xdist issue
    #1386), so the groups are silently lost: constraints.txt pins pytest below 9.2; this says so if it moves."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if lost:
        warnings.warn(
            pytest.PytestWarning(
                f"pytest-xdist dropped the xdist_group of {len(lost)} tests (e.g. {lost[0]}): each worker builds "
                "its own shared fixtures; install the pinned versions (pip install -c constraints.txt -e '.[test]')"
            ),
            stacklevel=1,
        )


def stage_audit_dir(pipeline_root: Path) -> Path:
    """Where the cold `dvc repro` of `built_pipeline` left one record per stage process (tests/stage_audit)."""
    return pipeline_root.parent / "stage-audit"


def stage_audit_env(audit: Path) -> dict[str, str]:
    """The environment under which a `python -m fabricref.…` process with DVC_STAGE set records what it touched
    into `audit` (tests/stage_audit/sitecustomize.py)."""
    env = env_with_venv()
    hook = str(Path(__file__).resolve().parent / "stage_audit")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (hook, env.get("PYTHONPATH")) if p)
    env["FABRICREF_STAGE_AUDIT"] = str(audit)
    return env


def _build_pipeline(target: Path) -> None:
    """The cold `dvc repro` of `built_pipeline`, then a pristine copy of the built clone that no test touches,
    from which `pipeline_copy` copies."""
    root = copy_checkout(target / "clone", with_git=True)
    audit = stage_audit_dir(root)
    audit.mkdir()
    env = stage_audit_env(audit)
    done = subprocess.run(["dvc", "repro"], cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"dvc repro failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    _copy_clone(root, target / "pristine")


def _copy_clone(src: Path, dest: Path) -> Path:
    """A copy of a built clone: working tree, git history, DVC cache and run cache.
    DVC's own scratch (.dvc/tmp: locks, hash index, experiment queue) is left behind; DVC starts it afresh."""
    scratch = src / ".dvc"
    shutil.copytree(src, dest, symlinks=True, ignore=lambda d, names: ["tmp"] if Path(d) == scratch else [])
    return dest


@pytest.fixture(scope="session")
def built_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One git clone of the checkout run through the whole `dvc repro` once per run (any xdist worker may ask: a
    file lock makes the others wait), shared by every test that only reads it. On that cold run every stage
    process records what it read and wrote (tests/stage_audit, `stage_audit_dir`): test_dvc_deps checks those
    records rather than running every stage again. A test that changes the clone uses `pipeline_copy`."""
    return build_once(shared_base(tmp_path_factory), "pipeline", _build_pipeline) / "clone"


@pytest.fixture
def pipeline_copy(built_pipeline: Path, tmp_path: Path) -> Path:
    """A private copy of the built clone as the cold `dvc repro` left it, for a test that changes inputs and runs
    DVC again (`dvc exp run`, `dvc repro`): nothing to put back afterwards, and it runs on any xdist worker, beside
    the tests reading the shared clone."""
    return _copy_clone(built_pipeline.parent / "pristine", tmp_path / "clone")


if __name__ == "__main__":  # `python tests/conftest.py BASE`: the background build started above
    build_once(Path(sys.argv[1]), "built", _build_registry)
