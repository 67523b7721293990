"""The field vocabulary (`schemas/vocabulary.json` of the checkout in use), cached by path and content."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..errors import ValidationError
from ..formats.vocabulary import FieldSpec, Vocabulary
from .paths import Layout, layout
from .schemas import load_json, load_model

__all__ = ["FieldSpec", "vocabulary"]

_CACHE: dict[tuple[str, str], dict[str, FieldSpec]] = {}


def vocabulary(lay: Layout | Path | None = None) -> dict[str, FieldSpec]:
    """Every vocabulary key with its spec, sorted by key, of the checkout `lay` (or its root, else found)."""
    if not isinstance(lay, Layout):
        lay = layout(lay)
    path = lay.schemas_dir / "vocabulary.json"
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise ValidationError(f"{path}: file not found (the field vocabulary of {lay.root})") from exc
    key = (str(path.resolve()), hashlib.sha256(raw).hexdigest())
    cached = _CACHE.get(key)
    if cached is None:
        model: Vocabulary = load_model(Vocabulary, load_json(path), "vocabulary.schema.json", path)
        cached = {k: model.fields[k] for k in sorted(model.fields)}
        _CACHE[key] = cached
    return cached
