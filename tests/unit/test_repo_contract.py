"""The repository's promises to a newcomer: the README's commands are the ones CI runs."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT


def _readme_commands() -> list[str]:
    return re.findall(r"```sh\n(.+?)\n```", (ROOT / "README.md").read_text())


def test_readme_starts_with_setup_and_test_commands():
    commands = _readme_commands()
    assert "dvc repro" in commands[0] and "pip install" in commands[0]
    assert "pytest" in commands[1] and ".[test]" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert _readme_commands()[1] in ci.splitlines()


def test_the_tree_is_ruff_clean():
    """`ruff check` and `ruff format --check` are part of the suite, so CI refuses code the linter refuses."""
    ruff = [sys.executable, "-m", "ruff"]
    for args in (["check", "."], ["format", "--check", "."]):
        result = subprocess.run([*ruff, *args], cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0, f"ruff {' '.join(args)}:\n{result.stdout}{result.stderr}"
