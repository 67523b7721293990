"""Hostile input, round 3: every path stays inside the root. A file or directory of the checkout that is a
symbolic link out of it, or a path that climbs out with `..`, is refused before anything is read, written or
removed through it (pipeline/core/paths.py `contained`, called by every reader and writer of pipeline/core)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import env_with_venv
from fabricref.core import paths
from fabricref.errors import ValidationError


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_declarative_file_linked_out_of_the_checkout_is_refused(built_copy, cli, tmp_path):
    """models/references/evil.yaml → a file outside: compile read it as part of the checkout."""
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copyfile(built_copy.references_dir / "nvidia-dgx-h100.yaml", outside / "evil.yaml")
    (built_copy.references_dir / "evil.yaml").symlink_to(outside / "evil.yaml")
    before = tree(built_copy.tables_dir)
    result = cli("compile", root=built_copy.root)
    assert result.code == 1, (result.out, result.err)
    assert "evil.yaml: is a symbolic link out of the checkout" in result.err
    assert f"it leads to {(outside / 'evil.yaml').resolve()}" in result.err
    assert tree(built_copy.tables_dir) == before


def test_an_output_directory_linked_out_of_the_checkout_is_neither_written_nor_emptied(built_copy, cli, tmp_path):
    """registry/report → a directory outside: `fabricref report` removed its old pages there and wrote new
    ones."""
    outside = tmp_path / "outside-report"
    (outside / "reference").mkdir(parents=True)
    (outside / "reference" / "keep.html").write_text("someone else's file\n")
    report = built_copy.registry_dir / "report"
    if report.exists():
        shutil.rmtree(report)
    report.symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    result = cli("report", root=built_copy.root)
    assert result.code == 1 and "is a symbolic link out of the checkout" in result.err, result.err
    assert tree(outside) == before


def test_a_stage_run_by_dvc_refuses_a_store_linked_out_of_the_checkout(few_sources, tmp_path):
    """sources/snapshots → another checkout's store: the retrieve stage hashed and trusted those bytes."""
    repo = few_sources
    elsewhere = tmp_path / "elsewhere"
    shutil.move(repo.store_dir, elsewhere)
    repo.store_dir.symlink_to(elsewhere, target_is_directory=True)
    env = {**env_with_venv(), "DVC_STAGE": "retrieve"}
    env.pop("FABRICREF_ROOT", None)
    done = subprocess.run(
        [sys.executable, "-m", "fabricref.retrieve"], cwd=repo.root, env=env, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "is a symbolic link out of the checkout" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("strict", [False, True])
def test_a_path_that_climbs_out_with_dot_dot_is_refused(no_sources, strict):
    root = no_sources.root.resolve()
    with pytest.raises(ValidationError, match=r"climbs out of the checkout .* \(it leads to /etc/passwd\)"):
        paths.contained(root.joinpath("registry", *[".."] * 40, "etc", "passwd"), root)
    with pytest.raises(ValidationError, match="climbs out of the checkout"):
        paths.contained(Path("sources/../../outside.yaml"), root, strict=strict)
    # A file the user names outside the checkout is theirs to name; a path a document holds is not.
    assert paths.contained(Path("/etc/hostname"), root) == Path("/etc/hostname")
    with pytest.raises(ValidationError, match="climbs out of the checkout"):
        paths.contained(Path("/etc/hostname"), root, strict=True)
    assert paths.contained(Path("registry/tables"), root, strict=strict) == Path("registry/tables")


def test_a_citation_whose_snapshot_path_climbs_out_is_not_verified(built_registry):
    """A table's `snapshot_path` is data: `../../etc/passwd` there must not be opened and hashed."""
    from fabricref.inspect import audit

    problem = audit._problem(built_registry, "x", "../../../../../../etc/passwd", "0" * 64)
    assert problem is not None and "climbs out of the checkout" in problem


def test_a_link_into_the_checkouts_dvc_cache_is_the_checkouts_own(no_sources, tmp_path):
    """With `cache.type = symlink`, DVC links every output into its cache, which may be configured elsewhere."""
    cache = tmp_path / "dvc-cache"
    (cache / "files" / "md5").mkdir(parents=True)
    (cache / "files" / "md5" / "ab").write_bytes(b"table")
    (no_sources.root / ".dvc").mkdir(exist_ok=True)
    (no_sources.root / ".dvc" / "config.local").write_text(f"[cache]\n    dir = {cache}\n")
    link = no_sources.root / "registry" / "linked.parquet"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(cache / "files" / "md5" / "ab")
    assert paths.contained(link, no_sources.root) == link


def test_a_path_is_named_as_given_relative_to_the_checkout_even_through_a_linked_root(tmp_path: Path):
    """Messages and records name a file as the user or the document named it, not where a link leads."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    lay = paths.Layout(tmp_path / "link")
    assert lay.relative(tmp_path / "link") == "." and lay.relative(tmp_path / "link" / "a.json") == "a.json"
    (tmp_path / "real" / "target.json").write_text("{}")
    (tmp_path / "real" / "named.json").symlink_to(tmp_path / "real" / "target.json")
    assert lay.relative(tmp_path / "link" / "named.json") == "named.json"
