"""One evidence policy: only a vendor's own documents make a field `published`; a relay, a measurement or a
maintainer's statement makes it `preliminary` at most (README, "Evidence policy")."""

from __future__ import annotations

from pathlib import Path

from ..errors import CompileError
from ..formats.source import PublisherKind

# publisher_kind → the statuses a fact taken from such a source may carry.
MAY_STATE: dict[PublisherKind, tuple[str, ...]] = {
    "vendor-document": ("published", "preliminary"),
    "vendor-press-release": ("published", "preliminary"),
    "press": ("preliminary",),
    "reseller": ("preliminary",),
    "measured": ("preliminary",),
    "maintainer-statement": ("preliminary",),
    # A design statement says what a deployment selects (a logical design, a protocol), on its author's word:
    # a selection, never a property of the product, so never published.
    "design-statement": ("preliminary",),
}


def check_source(source: object, path: Path | str) -> None:
    """Refuse a source whose status (or a rule's status) its publisher kind may not give, naming the JSON path."""
    kind = source.publisher_kind  # type: ignore[attr-defined]
    allowed = MAY_STATE[kind]
    places = [("$.status", source.status)]  # type: ignore[attr-defined]
    places += [(f"$.rules[{i}].status", r.status) for i, r in enumerate(source.rules) if r.status]  # type: ignore[attr-defined]
    for where, status in places:
        if status not in allowed:
            raise CompileError(
                f"{path}: at {where}: {status!r}, but a source with publisher_kind {kind!r} may make a field "
                f"only {' or '.join(allowed)} (README, Evidence policy); cite a vendor document for a published figure"
            )
    if source.document_type == "press-coverage" and kind != "press":  # type: ignore[attr-defined]
        raise CompileError(f"{path}: at $.publisher_kind: {kind!r}, but document_type press-coverage is press")
    if (source.document_type == "design-statement") != (kind == "design-statement"):  # type: ignore[attr-defined]
        raise CompileError(
            f"{path}: at $.publisher_kind: {kind!r} with document_type {source.document_type!r}: a design statement "  # type: ignore[attr-defined]
            "is publisher_kind design-statement and document_type design-statement, both or neither"
        )
