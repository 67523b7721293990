"""Working as a team: the registry travels through a DVC remote, and every environment knob is documented."""

from __future__ import annotations

import dataclasses
import re
import subprocess
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


@pytest.mark.slow
def test_push_then_a_fresh_clone_pulls_the_registry(built_pipeline: Path, tmp_path: Path) -> None:
    """The team workflow of docs/guide.md through a local-directory remote: push from the built clone, `git clone`
    afresh, pull, and the colleague has every output byte for byte with nothing left to reproduce."""
    remote = tmp_path / "remote"
    _dvc("remote", "add", "--local", "shared", str(remote), cwd=built_pipeline)  # config.local: git-ignored
    try:
        _dvc("push", "-r", "shared", cwd=built_pipeline)
    finally:
        _dvc("remote", "remove", "--local", "shared", cwd=built_pipeline)
    assert any(remote.rglob("*")), "nothing was pushed"

    colleague = tmp_path / "colleague"
    subprocess.run(["git", "clone", "-q", str(built_pipeline), str(colleague)], check=True)
    assert not (colleague / "registry" / "tables").exists()
    _dvc("remote", "add", "--local", "shared", str(remote), cwd=colleague)
    _dvc("pull", "-r", "shared", cwd=colleague)

    pulled, built = _outputs(colleague), _outputs(built_pipeline)
    assert sorted(pulled) == sorted(built)
    assert [k for k in built if pulled[k] != built[k]] == []
    assert "up to date" in _dvc("status", cwd=colleague)
