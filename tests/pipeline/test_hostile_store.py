"""Hostile store and pin cases, round 2: store entries must be regular files of the pinned size, reads are
bounded, a corrupt copy is repaired from good bytes or flagged, and `pin` validates before it writes."""

from __future__ import annotations

import os
import stat

import pytest
from fabricref.core import pins
from fabricref.core.sources import load_sources
from fabricref.core.store import SnapshotStore, sha256_bytes
from fabricref.errors import FabricrefError, IntegrityError
from fabricref.retrieve import stage
from fabricref.retrieve.fetch import FetchPolicy
from test_retrieve import DOC_PATH, PAGE_V1, add_source, state

FAST = FetchPolicy(connect_timeout=1, read_timeout=2, deadline=5, attempts=1, backoff=0.01)


def _replace(path, make) -> None:
    os.chmod(path.parent, 0o755)
    path.unlink()
    make(path)


def test_a_fifo_in_the_store_is_refused_not_waited_on(tmp_path):
    snapshots = SnapshotStore(tmp_path)
    sha = snapshots.put(b"<html>doc</html>")
    _replace(snapshots.path_for(sha), os.mkfifo)
    with pytest.raises(IntegrityError, match="not a regular file"):
        snapshots.read(sha, size=16)


def test_a_symlink_to_dev_zero_is_refused(tmp_path):
    snapshots = SnapshotStore(tmp_path)
    sha = snapshots.put(b"<html>doc</html>")
    _replace(snapshots.path_for(sha), lambda p: p.symlink_to("/dev/zero"))
    with pytest.raises(IntegrityError, match="symbolic link|not a regular file"):
        snapshots.read(sha, size=16)


def test_the_pinned_size_is_checked_before_hashing(tmp_path):
    snapshots = SnapshotStore(tmp_path)
    data = b"<html>doc</html>"
    sha = snapshots.put(data)
    with pytest.raises(IntegrityError, match=r"17 bytes pinned, 16 stored"):
        snapshots.read(sha, size=17)
    assert snapshots.read(sha, size=len(data)) == data


def test_refresh_with_identical_bytes_repairs_a_corrupt_stored_copy(few_sources, httpserver):
    add_source(few_sources)
    (source,) = load_sources(few_sources, "example-doc")
    httpserver.expect_request(DOC_PATH).respond_with_data(PAGE_V1, content_type="text/html")
    (first,) = stage.refresh(few_sources, [source], mirror=httpserver.url_for("/"), policy=FAST)
    assert first.action == "new-revision"
    path = SnapshotStore(few_sources.store_dir).path_for(sha256_bytes(PAGE_V1))
    os.chmod(path, 0o644)
    path.write_bytes(b"<html>tampered</html>")
    (again,) = stage.refresh(few_sources, [source], mirror=httpserver.url_for("/"), policy=FAST)
    assert again.action == "repaired", again.detail
    assert "corrupt" in again.detail
    assert path.read_bytes() == PAGE_V1
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert len(pins.load(few_sources, "example-doc").revisions) == 1  # no new revision for the same bytes


@pytest.mark.parametrize("when", ["2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "yesterday", "2026-01-01"])
def test_pin_refuses_an_impossible_date_before_writing_anything(few_sources, tmp_path, when):
    add_source(few_sources)
    (source,) = load_sources(few_sources, "example-doc")
    doc = tmp_path / "doc.html"
    doc.write_bytes(PAGE_V1)
    before = state(few_sources)
    with pytest.raises(FabricrefError, match=r"retrieved_at.*YYYY-MM-DDTHH:MM:SSZ"):
        stage.pin_file(few_sources, source, doc, when)
    assert state(few_sources) == before  # no orphan snapshot, no pin


def test_pin_of_a_directory_or_unreadable_file_is_a_clear_error(few_sources, tmp_path):
    add_source(few_sources)
    (source,) = load_sources(few_sources, "example-doc")
    with pytest.raises(FabricrefError, match="is a directory"):
        stage.pin_file(few_sources, source, tmp_path, "2026-11-29T00:00:00Z")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(FabricrefError, match="not a regular file"):
        stage.pin_file(few_sources, source, fifo, "2026-11-29T00:00:00Z")
