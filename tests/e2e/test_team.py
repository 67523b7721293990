"""Working as a team: the registry travels through a DVC remote as README.md shows, and every environment knob is
documented."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, env_with_venv
from fabricref.retrieve.fetch import FetchPolicy


def _environment_variables_read() -> set[str]:
    """FABRICREF_* names in the code, plus each FetchPolicy field that FetchPolicy.from_env really reads."""
    names = {m for p in (ROOT / "pipeline").rglob("*.py") for m in re.findall(r"FABRICREF_[A-Z_]*[A-Z]", p.read_text())}
    names -= {"FABRICREF_FETCH"}  # the prefix from_env builds names from (`FABRICREF_FETCH_*`), not a variable
    policy = FetchPolicy()
    for f in dataclasses.fields(FetchPolicy):
        env = f"FABRICREF_FETCH_{f.name.upper()}"
        if not isinstance(getattr(policy, f.name), int | float):
            continue
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(env, "7")
            if getattr(FetchPolicy.from_env(), f.name) == 7:
                names.add(env)
    return names


def test_every_environment_variable_is_documented() -> None:
    names = _environment_variables_read()
    assert {"FABRICREF_ROOT", "FABRICREF_FETCH_DEADLINE", "FABRICREF_FETCH_CONCURRENCY"} <= names
    guide = (ROOT / "docs" / "guide.md").read_text()
    section = guide.split("## Working as a team", 1)[1].split("\n## ", 1)[0]
    assert sorted(n for n in names if f"`{n}`" not in section) == []
    documented = set(re.findall(r"^\| `(FABRICREF_[A-Z_]*[A-Z])`", section, flags=re.M))
    assert sorted(documented - names) == [], "documented but read nowhere"


def test_dvc_s3_extra_is_declared_and_pinned() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("dvc-s3") for req in extras["s3"])
    assert re.search(r"^dvc-s3==\S+$", (ROOT / "constraints.txt").read_text(), flags=re.M)


def _dvc(*args: str, cwd: Path) -> str:
    done = subprocess.run(["dvc", *args], cwd=cwd, env=env_with_venv(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"dvc {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _outputs(root: Path) -> dict[str, bytes]:
    """Every file under the directories and files dvc.lock names as stage outputs."""
    from ruamel.yaml import YAML

    lock = YAML(typ="safe").load((root / "dvc.lock").read_text())
    paths = {o["path"] for stage in lock["stages"].values() for o in stage.get("outs", [])}
    assert "registry/tables" in paths and "registry/topology" in paths
    files: dict[str, bytes] = {}
    for rel in paths:
        p = root / rel
        for f in [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file()):
            files[f.relative_to(root).as_posix()] = f.read_bytes()
    return files


def _blocks(path: Path, lang: str, heading: str) -> list[str]:
    """The ```lang blocks of one section (`## heading`) of a Markdown file, as written."""
    section = path.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)


def _run(script: str, cwd: Path, *argv: str) -> str:
    env = {k: v for k, v in env_with_venv().items() if k not in ("FABRICREF_ROOT", "PYTHONPATH")}
    env |= {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run([*argv, script], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{script}\nfailed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
def test_the_readmes_team_flow_runs_as_written(pipeline_copy: Path, tmp_path: Path) -> None:
    """README's "Working as a team", line by line with only its two paths replaced (the remote: a directory under
    tmp_path; the repository: the built clone): push, `git clone` afresh, pull. The colleague then has every output
    byte for byte with nothing left to reproduce, and the README's Python snippet, the CLI and the guide's direct
    DuckDB reader (after the one command the README names) work there and leave the checkout as pulled."""
    builder, remote = pipeline_copy, tmp_path / "remote"
    (push, pull) = _blocks(ROOT / "README.md", "sh", "Working as a team")[0].strip().splitlines()
    assert "/mnt/team/fabricref-dvc" in push and "/path/to/fabricref" in pull
    _run(push.replace("/mnt/team/fabricref-dvc", str(remote)), builder, "bash", "-ec")
    assert any(remote.rglob("*")), "nothing was pushed"
    out = _run(pull.replace("/path/to/fabricref", str(builder)), tmp_path, "bash", "-ec")
    assert "up to date" in out and "nvidia-dgx-h100: 900 GB/s bidirectional (published)" in out.splitlines()

    colleague = tmp_path / "colleague"
    pulled, built = _outputs(colleague), _outputs(builder)
    assert sorted(pulled) == sorted(built)
    assert [k for k in built if pulled[k] != built[k]] == []
    (snippet,) = _blocks(ROOT / "README.md", "python", "From Python")
    shown = _run(snippet, colleague, sys.executable, "-c")
    assert shown and out.endswith(shown)  # what examples/notebook.py printed
    assert "nvidia-dgx-h100" in _run("fabricref references", colleague, "bash", "-ec")
    assert not (colleague / "registry" / "registry.duckdb").exists()  # no reader above needed or wrote it
    assert _run("git status --porcelain --ignored=no", colleague, "bash", "-ec") == ""

    _run("python -m fabricref.database", colleague, "bash", "-ec")  # the README's one command for direct readers
    (direct,) = _blocks(ROOT / "docs" / "guide.md", "python", "DuckDB directly")
    assert "llama70b" in _run(direct, colleague, sys.executable, "-c")
    assert "up to date" in _dvc("status", cwd=colleague)
    assert _run("git status --porcelain --ignored=no", colleague, "bash", "-ec") == ""
