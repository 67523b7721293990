"""Model revisions: every reference and cluster model's content hash and date of change, append-only, so a
model id's history is kept next to the registry (like the pins of a source)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import UsageError, ValidationError
from .files import checkout_lock, transaction
from .paths import Layout
from .schemas import load_json, validate
from .store import sha256_bytes, sha256_file

KINDS = ("references", "clusters")


def model_files(lay: Layout) -> list[tuple[str, Path]]:
    return [(f"{kind}/{p.stem}", p) for kind in KINDS for p in sorted((lay.root / "models" / kind).glob("*.yaml"))]


def revisions_file(lay: Layout, model: str) -> Path:
    return lay.root / "models" / "revisions" / f"{model}.json"


def history(lay: Layout, model: str) -> list[dict[str, Any]]:
    path = revisions_file(lay, model)
    if not path.exists():
        return []
    data = load_json(path)
    validate(data, "model-revisions.schema.json", path)
    if data["model"] != model:
        raise ValidationError(f"{path}: at $.model: {data['model']!r} but the file is for {model!r}")
    return data["revisions"]


def revised(lay: Layout, model: str, content: bytes, today: str | None = None) -> dict[str, Any] | None:
    """The model's revisions file with a revision for `content` appended (validated, not written), or None when
    its last revision already pins that content."""
    revs = history(lay, model)
    sha = sha256_bytes(content)
    if revs and revs[-1]["sha256"] == sha:
        return None
    day = today or datetime.now(UTC).date().isoformat()
    data = {"model": model, "revisions": [*revs, {"revision": len(revs) + 1, "sha256": sha, "changed_on": day}]}
    validate(data, "model-revisions.schema.json", revisions_file(lay, model))
    return data


def pin(lay: Layout, only: list[str] | None = None, today: str | None = None) -> list[tuple[str, int]]:
    """Append a revision for every model whose content changed, as one transaction under the checkout's lock."""
    with checkout_lock(lay.root), transaction(lay.root) as tx:
        pinned = []
        files = model_files(lay)
        names = {name for model, _path in files for name in (model, model.split("/", 1)[1])}
        unknown = sorted(set(only or []) - names)
        if unknown:  # a model id that does not exist is bad usage, never "already pinned"
            known = ", ".join(sorted(m for m, _p in files))
            raise UsageError(f"no model {', '.join(map(repr, unknown))}; known: {known}")
        for model, path in files:
            if only and model.split("/", 1)[1] not in only and model not in only:
                continue
            data = revised(lay, model, path.read_bytes(), today)
            if data is not None:
                tx.write_json(revisions_file(lay, model), data)
                pinned.append((model, len(data["revisions"])))
        return pinned


def rows(lay: Layout) -> list[tuple[Any, ...]]:
    """Every pinned revision, plus an unpinned row when a model's current content was never pinned."""
    out = []
    for model, path in model_files(lay):
        revs = history(lay, model)
        sha = sha256_file(path)
        for r in revs:
            out.append((model, r["revision"], r["sha256"], r["changed_on"], r["sha256"] == sha, True))
        if not revs or revs[-1]["sha256"] != sha:
            out.append((model, None, sha, None, True, False))
    return out
