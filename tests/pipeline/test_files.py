"""Atomic writes: new files get the mode the user's umask gives (mkstemp alone would give 0600)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from fabricref.core.files import atomic_write_bytes, atomic_write_json, current_umask


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664), (0o027, 0o640)])
def test_new_files_follow_the_umask(tmp_path, umask, mask, expected):
    os.umask(mask)
    assert current_umask() == mask
    atomic_write_bytes(tmp_path / "a.bin", b"x")
    atomic_write_json(tmp_path / "sub" / "b.json", {"k": 1})
    assert mode_of(tmp_path / "a.bin") == expected
    assert mode_of(tmp_path / "sub" / "b.json") == expected
    assert os.umask(mask) == mask  # reading the umask left it as it was


def test_an_explicit_mode_wins_over_the_umask(tmp_path, umask):
    """The snapshot store writes read-only files whatever the umask."""
    os.umask(0o022)
    atomic_write_bytes(tmp_path / "snap", b"x", mode=0o444)
    assert mode_of(tmp_path / "snap") == 0o444


def test_a_rewrite_gets_the_umask_mode_too(tmp_path, umask):
    os.umask(0o077)
    atomic_write_bytes(tmp_path / "f", b"old")
    os.umask(0o022)
    atomic_write_bytes(tmp_path / "f", b"new")
    assert (tmp_path / "f").read_bytes() == b"new" and mode_of(tmp_path / "f") == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["f"]  # no temporary file left behind


@pytest.mark.slow
def test_compile_outputs_are_readable_by_others_under_umask_022(repo, cli, umask):
    """Issue case 7: every file `extract` and `compile` write under registry/ is 0644 with umask 022."""
    os.umask(0o022)
    for verb in ("retrieve", "extract", "compile"):
        assert cli(verb, root=repo.root).code == 0
    written = sorted(p for p in (repo.root / "registry").rglob("*") if p.is_file())
    assert len(written) > 10
    assert {str(p.relative_to(repo.root)): oct(mode_of(p)) for p in written if mode_of(p) != 0o644} == {}
