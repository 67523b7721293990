"""Hostile input, round 3: one root per process. The checkout is found once, must be a fabricref checkout (not
merely a directory, never created), and a stage DVC runs works in the checkout DVC runs it in."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, bare_checkout, env_with_venv
from fabricref.core import paths
from fabricref.core.paths import Layout


def tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("nonexist/deeper", "does not exist"),
        ("a-file", "is not a directory"),
        ("plain-dir", "is not a fabricref checkout (no sources/; no schemas/vocabulary.json)"),
        ("empty-folders", "is not a fabricref checkout (no schemas/vocabulary.json)"),
        ("vocabulary-a-folder", "is not a fabricref checkout (schemas/vocabulary.json is not a regular file)"),
        ("vocabulary-empty", "is not a fabricref checkout (schemas/vocabulary.json is not JSON"),
        ("vocabulary-other-json", "is not a fabricref checkout (schemas/vocabulary.json holds no `fields`)"),
        ("vocabulary-a-link", "is not a fabricref checkout (schemas/vocabulary.json is a symbolic link"),
    ],
)
@pytest.mark.parametrize("verb", [["retrieve"], ["status"], ["compile"], ["measured", "compare", "--topology", "x"]])
def test_a_fabricref_root_that_is_no_checkout_is_bad_usage_and_creates_nothing(
    tmp_path, cli, monkeypatch, name, said, verb
):
    (tmp_path / "a-file").write_text("root:x:0:0::/root:/bin/sh\n")
    (tmp_path / "plain-dir").mkdir()
    # The folders of a checkout, not what they hold: no vocabulary, or a file of that name that is not it.
    for folder in ("empty-folders", "vocabulary-a-folder", "vocabulary-empty", "vocabulary-other-json"):
        (tmp_path / folder / "sources").mkdir(parents=True)
        (tmp_path / folder / "schemas").mkdir()
    (tmp_path / "vocabulary-a-folder" / "schemas" / "vocabulary.json").mkdir()
    (tmp_path / "vocabulary-empty" / "schemas" / "vocabulary.json").write_text("")
    (tmp_path / "vocabulary-other-json" / "schemas" / "vocabulary.json").write_text('{"description": "x"}')
    linked = bare_checkout(tmp_path / "vocabulary-a-link") / "schemas" / "vocabulary.json"
    linked.unlink()
    linked.symlink_to(ROOT / "schemas" / "vocabulary.json")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FABRICREF_ROOT", str(tmp_path / name))
    result = cli(*verb)
    assert result.code == 2, (result.out, result.err)
    assert f"FABRICREF_ROOT={tmp_path / name}: {said}" in result.err
    assert "verified 0" not in result.out and "dvc repro" not in result.err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing created


def test_etc_passwd_as_the_root_is_named_as_not_a_directory(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FABRICREF_ROOT", "/etc/passwd")
    result = cli("show", "nvidia-dgx-h100")
    assert result.code == 2 and "FABRICREF_ROOT=/etc/passwd: is not a directory" in result.err


def test_a_root_option_that_is_no_checkout_is_bad_usage(tmp_path, cli):
    result = cli("retrieve", root=tmp_path / "missing")
    assert result.code == 2 and "does not exist" in result.err
    assert not (tmp_path / "missing").exists()


def test_a_stage_run_by_dvc_refuses_a_fabricref_root_naming_another_checkout(few_sources, tmp_path):
    """DVC runs `python -m fabricref.<stage>` in the checkout with DVC_STAGE set: a FABRICREF_ROOT left in the
    environment must not send its reads and writes to another checkout."""
    repo = few_sources
    other = Layout(tmp_path / "other")
    bare_checkout(other.root)
    (other.root / "registry").mkdir()
    before_other, before_here = tree(other.root), tree(repo.root)
    env = {**env_with_venv(), "DVC_STAGE": "retrieve", "FABRICREF_ROOT": str(other.root)}
    env.pop("DVC_ROOT", None)
    done = subprocess.run(
        [sys.executable, "-m", "fabricref.retrieve"], cwd=repo.root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert "names another directory than the checkout DVC runs this stage in" in done.stderr
    assert str(repo.root.resolve()) in done.stderr
    assert tree(other.root) == before_other and tree(repo.root) == before_here
    # The same variable naming this checkout is no contradiction.
    env["FABRICREF_ROOT"] = str(repo.root)
    done = subprocess.run(
        [sys.executable, "-m", "fabricref.retrieve"], cwd=repo.root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_the_root_is_found_once_per_command(no_sources, tmp_path, monkeypatch):
    """Inside a command, whatever looks for the checkout itself gets the one the command settled on, not one
    found again from a changed environment or working directory."""
    other = tmp_path / "other"
    bare_checkout(other)
    monkeypatch.setenv("FABRICREF_ROOT", str(other))
    with paths.command():
        paths.settle(paths.layout(no_sources.root))
        assert paths.find_root() == no_sources.root.resolve()
        monkeypatch.chdir(tmp_path)
        assert paths.layout().root == no_sources.root.resolve()
    assert paths.find_root() == other.resolve()  # the next command finds its own
