"""Shared fixtures: a private copy of the checkout per test, and an in-process CLI runner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.core.paths import Layout

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = str(Path(sys.executable).parent)


def working_tree_files(root: Path = ROOT) -> list[str]:
    """Files git tracks plus new files it does not ignore: the checkout as a developer has it now."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True, capture_output=True
    ).stdout.decode()
    return sorted(p for p in out.split("\0") if p and (root / p).is_file())


def copy_checkout(dest: Path, with_git: bool = False) -> Path:
    for rel in working_tree_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    if with_git:
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        }
        for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "copy"]):
            subprocess.run(cmd, cwd=dest, check=True, env=env)
    return dest


@pytest.fixture
def repo(tmp_path: Path) -> Layout:
    """A private copy of the checkout (sources, pins, snapshots, models): tests never touch the real one."""
    return Layout(copy_checkout(tmp_path / "repo"))


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    def run(*args: str, root: Path | None = None) -> Result:
        argv = [*args, "--root", str(root)] if root is not None else list(args)
        capsys.readouterr()
        code = main(argv)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def built_registry(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """The shipped data run through retrieve → extract → compile → topology once, in a private copy (traffic
    estimates read the topology stage's outputs)."""
    lay = Layout(copy_checkout(tmp_path_factory.mktemp("built") / "repo"))
    for verb in (["retrieve"], ["extract"], ["compile"], ["topology", "--all"]):
        assert main([*verb, "--root", str(lay.root)]) == 0
    return lay


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


@pytest.fixture(scope="session")
def built_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One git clone of the checkout run through the whole `dvc repro`, shared by every test that only reads it
    (a test that changes it puts it back and reruns, so the next one finds it as built)."""
    root = copy_checkout(tmp_path_factory.mktemp("pipeline") / "clone", with_git=True)
    done = subprocess.run(
        ["dvc", "repro"], cwd=root, env=env_with_venv(), capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, f"dvc repro failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return root
