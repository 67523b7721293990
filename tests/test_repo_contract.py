"""The repository's promises to a newcomer: the README's commands are the ones CI runs."""

from __future__ import annotations

import re

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
