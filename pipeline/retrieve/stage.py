"""What becomes a revision: pinned-mode verification, refresh over HTTP, and pinning transcriptions."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import pins
from ..core.files import atomic_write_json, checkout_lock, read_bounded, transaction
from ..core.paths import Layout
from ..core.sources import Source
from ..core.store import MAX_UNPINNED_BYTES, SnapshotStore, sha256_bytes
from ..errors import FabricrefError, FetchError, IntegrityError, ValidationError

if TYPE_CHECKING:
    from .fetch import FetchPolicy, FetchResult


# What the manifest keeps of each pin.
MANIFEST_FIELDS = {"revision", "sha256", "size", "media_type", "retrieved_at", "url", "final_url", "origin"}


def store(lay: Layout) -> SnapshotStore:
    return SnapshotStore(lay.store_dir)


def manifest_entry(lay: Layout, source: Source, rev: pins.Revision) -> dict[str, object]:
    """One entry of registry/snapshots.json (written with sorted keys): the pin and where its bytes are stored."""
    pinned = rev.model_dump(include=MANIFEST_FIELDS)
    return {"source_id": source.id, **pinned, "snapshot_path": lay.relative(store(lay).path_for(rev.sha256))}


def verify(lay: Layout, sources: list[Source]) -> list[dict[str, object]]:
    """Pinned mode: every source's current pin re-hashed against the stored bytes. Changes nothing."""
    snapshots = store(lay)
    entries, problems = [], []
    for source in sources:
        try:
            history = pins.load(lay, source.id)
            if history is None:
                raise IntegrityError(
                    f"{lay.relative(lay.pins_file(source.id))}: source {source.id} has no pin; "
                    f"run `fabricref pin {source.id}` (transcription) or "
                    f"`fabricref retrieve --refresh --source {source.id}`"
                )
            current = history.current
            snapshots.read(current.sha256, size=current.size)
            edited = pins.edited_transcription(lay, source.id, current)
            if edited:
                raise IntegrityError(edited)
            entries.append(manifest_entry(lay, source, current))
        except FabricrefError as exc:
            problems.append(str(exc))
    problems += pins.measured_problems(lay)
    if problems:
        raise IntegrityError("\n".join(problems))
    return entries


def write_manifest(lay: Layout, entries: list[dict[str, object]]) -> None:
    atomic_write_json(lay.snapshots_manifest, {"snapshots": sorted(entries, key=lambda e: str(e["source_id"]))})


@dataclass
class RefreshOutcome:
    source_id: str
    action: str  # "new-revision" | "unchanged" | "repaired" | "not-modified" | "failed"
    detail: str
    revision: int | None = None


ProgressFn = Callable[["RefreshOutcome", int, int], None]


def _fetch_one(source: Source, current: pins.Revision | None, mirror: str | None, policy: FetchPolicy, end: float):
    from .fetch import fetch  # only a refresh talks HTTP: the DVC stage verifies pins without importing the client

    left = end - time.monotonic()
    if left <= 0:
        raise FetchError(f"{source.url}: not fetched: the refresh deadline of {policy.refresh_deadline:g}s passed")
    return fetch(
        source.url,
        source.media_type,
        mirror=mirror,
        etag=current.etag if current else None,
        last_modified=current.last_modified if current else None,
        policy=dataclasses.replace(policy, deadline=min(policy.deadline, left)),
    )


def refresh(
    lay: Layout,
    sources: list[Source],
    *,
    mirror: str | None = None,
    policy: FetchPolicy | None = None,
    wait_for_lock: bool = True,
    progress: ProgressFn | None = None,
) -> list[RefreshOutcome]:
    """Fetch each source (a few at a time, under one deadline); changed bytes become a new revision, recorded by
    this thread alone, so pins and store see one writer. `progress` hears of each source as it is settled;
    outcomes come back in the order of `sources`."""
    from .fetch import FetchPolicy, check_mirror

    if mirror is not None:
        check_mirror(mirror)  # bad usage before the lock is taken or a document asked for
    policy = policy or FetchPolicy.from_env()
    outcomes: dict[str, RefreshOutcome] = {}
    end = time.monotonic() + policy.refresh_deadline

    def settle(outcome: RefreshOutcome) -> None:
        outcomes[outcome.source_id] = outcome
        if progress is not None:
            progress(outcome, len(outcomes), len(sources))

    with checkout_lock(lay.root, wait=wait_for_lock):
        currents = {s.id: h.current if (h := pins.load(lay, s.id)) else None for s in sources}
        with ThreadPoolExecutor(max_workers=max(1, min(policy.concurrency, len(sources) or 1))) as pool:
            for source in (s for s in sources if s.url is None):
                # A design statement with no address: its pinned transcription is the statement itself.
                current = currents[source.id]
                why = "no URL to fetch (a design statement): its pinned transcription is the statement"
                settle(RefreshOutcome(source.id, "unchanged", why, current.revision if current else None))
            futures = {
                pool.submit(_fetch_one, s, currents[s.id], mirror, policy, end): s for s in sources if s.url is not None
            }
            for future in as_completed(futures):
                source = futures[future]
                try:
                    result = future.result()
                except FabricrefError as exc:  # this document could not be had: the others go on
                    settle(RefreshOutcome(source.id, "failed", str(exc)))
                else:  # a failure to write (disk, permissions) is not this source's: it stops the refresh
                    settle(_record(lay, source, currents[source.id], result))
    return [outcomes[s.id] for s in sources]


def _record(lay: Layout, source: Source, current: pins.Revision | None, result: FetchResult) -> RefreshOutcome:
    """What one fetched document becomes: nothing, a repair of the stored copy, or a new revision."""
    snapshots = store(lay)
    if result.not_modified:
        return RefreshOutcome(
            source.id, "not-modified", "HTTP 304: unchanged, no new revision", current.revision if current else None
        )
    sha = sha256_bytes(result.data)
    if current is not None and sha == current.sha256:
        try:
            snapshots.read(sha, size=current.size)
        except IntegrityError as exc:
            # The server's bytes hash to the pinned name: they are the pinned document, so they mend it.
            snapshots.repair(sha, result.data)
            return RefreshOutcome(
                source.id,
                "repaired",
                f"same bytes ({sha[:12]}); the stored copy was corrupt and is repaired: {exc}",
                current.revision,
            )
        return RefreshOutcome(source.id, "unchanged", f"same bytes ({sha[:12]}), no new revision", current.revision)
    return _new_revision(
        lay,
        source.id,
        current,
        result.data,
        retrieved_at=pins.utc_now(),
        media_type=result.media_type,
        url=source.url,
        final_url=result.final_url,
        etag=result.etag,
        last_modified=result.last_modified,
        origin="retrieved",
    )


def _new_revision(
    lay: Layout, source_id: str, current: pins.Revision | None, data: bytes, **fields: str | None
) -> RefreshOutcome:
    """`data` as the revision after `current`: the bytes and the pin naming them, validated, then written as one
    transaction (both or neither)."""
    sha = sha256_bytes(data)
    number = (current.revision + 1) if current else 1
    revision = pins.Revision(revision=number, sha256=sha, size=len(data), **fields)  # type: ignore[arg-type]
    record = pins.appended(lay, source_id, revision)
    snapshots = store(lay)
    with transaction(lay.root) as tx:
        if not snapshots.holds(sha, len(data)):
            tx.write(snapshots.path_for(sha), data, mode=0o444)
        tx.write_json(lay.pins_file(source_id), record)
    return RefreshOutcome(source_id, "new-revision", f"{sha[:12]}, {len(data)} bytes", number)


def pin_file(lay: Layout, source: Source, file: Path | None = None, retrieved_at: str | None = None) -> RefreshOutcome:
    """Pin a project-written transcription of a document (origin: transcription) as the next revision."""
    path = file or lay.transcription_file(source.id)
    when = retrieved_at or (f"{source.read_on}T00:00:00Z" if source.read_on else None)
    if when is None:
        raise ValidationError(
            f"{lay.relative(source.path) if source.path else source.id}: at $.read_on: a transcription needs the "
            "date its facts were read (read_on: YYYY-MM-DD) or --retrieved-at"
        )
    pins.check_timestamp(when, f"{path}: retrieved_at")  # before anything is written: no orphan snapshot
    pins.check_not_future(when, f"{path}: retrieved_at")
    data = read_bounded(path, MAX_UNPINNED_BYTES, f"the transcription of source {source.id} to pin", ValidationError)
    with checkout_lock(lay.root):
        history = pins.load(lay, source.id)
        current = history.current if history else None
        if current is not None and current.sha256 == sha256_bytes(data):
            return RefreshOutcome(
                source.id, "unchanged", f"already pinned as revision {current.revision}", current.revision
            )
        return _new_revision(
            lay,
            source.id,
            current,
            data,
            retrieved_at=when,
            media_type=source.media_type,
            url=source.url,
            final_url=source.url,
            origin="transcription",
            note="Project transcription of the document's facts in its own labels; not the vendor's bytes.",
        )
