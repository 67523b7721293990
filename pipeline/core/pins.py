"""Append-only revision history per source: which bytes were pinned, when, from where, and how."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ..errors import FabricrefError, ValidationError
from ..formats.pins import Origin, PinHistory, Revision
from .files import LOCK
from .paths import Layout, check_slug
from .schemas import load_json, load_model, validate
from .store import SnapshotStore, sha256_file

__all__ = ["Origin", "PinHistory", "Revision"]  # re-exported: the stages name them as `pins.Revision`


TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def check_timestamp(value: str, where: str) -> str:
    """A retrieval date must be a real UTC instant in one fixed form (2026-02-30 is not a date)."""
    try:
        parsed = datetime.strptime(value, TIMESTAMP_FORMAT) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.strftime(TIMESTAMP_FORMAT) != value:
        raise ValidationError(f"{where}: {value!r} is not a real UTC time; expected YYYY-MM-DDTHH:MM:SSZ")
    return value


# A retrieval date this far past the clock is a typo or a forged pin (clocks drift by seconds, not a day).
FUTURE_SLACK_SECONDS = 24 * 3600


def check_not_future(value: str, where: str) -> str:
    """A document cannot have been read after now: `9999-12-31T23:59:59Z` is refused (a day's slack for clocks)."""
    when = datetime.strptime(value, TIMESTAMP_FORMAT).replace(tzinfo=UTC)
    if (when - datetime.now(UTC)).total_seconds() > FUTURE_SLACK_SECONDS:
        raise ValidationError(f"{where}: {value!r} is in the future; expected the time the document was read")
    return value


def utc_now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def load(lay: Layout, source_id: str) -> PinHistory | None:
    path = lay.pins_file(source_id)
    if not path.exists():
        return None
    return load_file(path, source_id)


def load_file(path: Path, source_id: str) -> PinHistory:
    data = load_json(path)
    history = load_model(PinHistory, data, "pins.schema.json", path)
    if history.source_id != source_id:
        raise ValidationError(f"{path}: at $.source_id: {history.source_id!r} but the file is for {source_id!r}")
    for index, rev in enumerate(history.revisions, start=1):
        check_timestamp(rev.retrieved_at, f"{path}: at $.revisions[{index - 1}].retrieved_at")
        if rev.revision != index:
            raise ValidationError(f"{path}: at $.revisions[{index - 1}].revision: expected {index}, got {rev.revision}")
    return history


def appended(lay: Layout, source_id: str, revision: Revision) -> dict[str, object]:
    """The pins file with one revision appended, validated, not written; the caller holds the checkout lock."""
    check_slug(source_id, "source id")
    check_timestamp(revision.retrieved_at, f"{lay.relative(lay.pins_file(source_id))}: retrieved_at")
    check_not_future(revision.retrieved_at, f"{lay.relative(lay.pins_file(source_id))}: retrieved_at")
    earlier = history.revisions if (history := load(lay, source_id)) else []
    expected = len(earlier) + 1
    if revision.revision != expected:
        raise ValidationError(f"pins for {source_id}: next revision must be {expected}, got {revision.revision}")
    data = PinHistory(source_id=source_id, revisions=[*earlier, revision]).model_dump(mode="json")
    validate(data, "pins.schema.json", lay.pins_file(source_id))
    return data


def edited_transcription(lay: Layout, source_id: str, current: Revision) -> str | None:
    """Why a source's transcription file no longer matches its current revision, or None."""
    if current.origin != "transcription":
        return None
    transcription = lay.transcription_file(source_id)
    if not transcription.exists():
        return None
    actual = sha256_file(transcription)
    if actual == current.sha256:
        return None
    return (
        f"{lay.relative(transcription)}: edited since it was pinned (pinned {current.sha256}, file hashes to "
        f"{actual}); run `fabricref pin {source_id}` to add it as a new revision"
    )


def lock_path(lay: Layout) -> Path:
    return lay.root / LOCK


def measured_problems(lay: Layout) -> list[str]:
    """One message per measured log's pin (sources/measured/) whose bytes are not sound in the store."""
    directory = lay.measured_dir
    if not directory.is_dir():
        return []
    from ..formats.measured import MeasuredPin

    snapshots, problems = SnapshotStore(lay.store_dir), []
    for path in sorted(directory.glob("*.json")):
        try:
            pin = load_model(MeasuredPin, load_json(path), "measured-pin.schema.json", path)
            snapshots.read(pin.sha256, size=pin.size)
        except FabricrefError as exc:
            problems.append(f"{lay.relative(path)}: measured log {exc}")
    return problems
