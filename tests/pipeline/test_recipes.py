"""The recipes of docs/development.md, run as written: a recipe a newcomer follows must work on the checkout."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable

import pytest
from conftest import ROOT
from fabricref.core.paths import Layout

DEVELOPMENT = ROOT / "docs" / "development.md"
HAND_WRITTEN_AT_MOST = 3


def _recipe(title: str) -> str:
    text = DEVELOPMENT.read_text()
    assert f"## Recipe: {title}\n" in text, f"docs/development.md has no recipe {title!r}"
    return text.split(f"## Recipe: {title}\n", 1)[1].split("\n## ", 1)[0]


def _steps(recipe: str) -> list[tuple[str, str]]:
    """('file', path + NUL + body) for each file the reader writes, ('sh', line) for each command, in order."""
    pattern = re.compile(r"File\s+`(?P<path>[^`]+)`:\s*\n\n```\w+\n(?P<body>.*?)```|```sh\n(?P<sh>.*?)```", re.S)
    steps: list[tuple[str, str]] = []
    for m in pattern.finditer(recipe):
        if m["path"]:
            steps.append(("file", f"{m['path']}\0{m['body']}"))
        else:
            steps += [("sh", line) for line in m["sh"].splitlines() if line.strip()]
    return steps


@pytest.mark.slow
def test_add_a_reference_works_as_written(repo: Layout, cli: Callable[..., object]) -> None:
    """Every file of the recipe written, every command run (`dvc repro` as its stages, in-process), and the
    outcome the recipe promises: five published fields, one unknown, an audit to a verified hash, a clean status."""
    steps = _steps(_recipe("add a reference"))
    files = [s for kind, s in steps if kind == "file"]
    assert 0 < len(files) <= HAND_WRITTEN_AT_MOST, "a recipe asks for at most three hand-written files"
    for kind, step in steps:
        if kind == "file":
            path, body = step.split("\0")
            (repo.root / path).parent.mkdir(parents=True, exist_ok=True)
            (repo.root / path).write_text(body)
            continue
        argv = shlex.split(step)
        if argv == ["dvc", "repro"]:  # what it reruns for a new network product, in-process
            for verb in ("retrieve", "extract", "compile"):
                done = cli(verb, root=repo.root)
                assert done.code == 0, f"{verb}: {done.err}"
            continue
        assert argv[0] == "fabricref", step
        done = cli(*argv[1:], root=repo.root)
        assert done.code == 0, f"{step}: {done.out}{done.err}"

    shown = cli("show", "acme-n400", "--json", root=repo.root)
    assert sorted(f["status"] for f in json.loads(shown.out)) == ["published"] * 5 + ["unknown"]
    (leaf,) = json.loads(cli("audit", "acme-n400", "nic.speed", "--json", root=repo.root).out)["provenance"]
    assert leaf["source_id"] == "acme-n400-datasheet" and leaf["verified"] is True
