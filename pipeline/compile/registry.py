"""The compile stage's tables: their columns, their row order, and writing them all at once.

Reading and writing Parquet, and the DuckDB views file, live in pipeline/core/registry.py (shared by every stage).
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb

from ..core.deadline import critical
from ..core.files import current_umask
from ..core.paths import Layout
from ..core.registry import remove_leftovers as _remove_leftovers
from ..core.registry import write_table
from ..errors import FabricrefError

# table → (columns with DuckDB types, sort key). The order of columns and rows is part of the contract.
TABLES: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    "reference_models": (
        [
            ("reference_id", "VARCHAR"),
            ("kind", "VARCHAR"),
            ("title", "VARCHAR"),
            ("form_factor", "VARCHAR"),
            ("summary", "VARCHAR"),
            ("model_path", "VARCHAR"),
            ("model_sha256", "VARCHAR"),
        ],
        ["reference_id"],
    ),
    "parameters": (
        [
            ("reference_id", "VARCHAR"),
            ("name", "VARCHAR"),
            ("value", "DOUBLE"),
            ("unit", "VARCHAR"),
            ("direction", "VARCHAR"),
            ("why", "VARCHAR"),
        ],
        ["reference_id", "name"],
    ),
    "model_revisions": (
        [
            ("model", "VARCHAR"),
            ("revision", "INTEGER"),
            ("sha256", "VARCHAR"),
            ("changed_on", "VARCHAR"),
            ("is_current", "BOOLEAN"),
            ("pinned", "BOOLEAN"),
        ],
        ["model", "revision"],
    ),
    "assumptions": (
        [
            ("reference_id", "VARCHAR"),
            ("field", "VARCHAR"),
            ("value", "DOUBLE"),
            ("unit", "VARCHAR"),
            ("direction", "VARCHAR"),
            ("why", "VARCHAR"),
        ],
        ["reference_id", "field"],
    ),
    "fields": (
        [
            ("reference_id", "VARCHAR"),
            ("field", "VARCHAR"),
            ("value_number", "DOUBLE"),
            ("value_text", "VARCHAR"),
            ("unit", "VARCHAR"),
            ("direction", "VARCHAR"),
            ("status", "VARCHAR"),
            ("confidence", "VARCHAR"),
            ("formula", "VARCHAR"),
            ("reason", "VARCHAR"),
            ("evidence_needed", "VARCHAR"),
            ("chosen", "VARCHAR"),
            ("choice_reason", "VARCHAR"),
            ("description", "VARCHAR"),
            # Appended (positional readers keep their columns): the precision views print, whether the cited
            # documents disagree and how that was resolved, and a stated figure's check derivation.
            ("digits", "INTEGER"),
            ("conflict", "BOOLEAN"),
            ("resolved_by", "VARCHAR"),
            ("check_formula", "VARCHAR"),
            ("check_value", "DOUBLE"),
            ("check_digits", "INTEGER"),
            ("check_agrees", "BOOLEAN"),
        ],
        ["reference_id", "field"],
    ),
    "field_citations": (
        [
            ("reference_id", "VARCHAR"),
            ("field", "VARCHAR"),
            ("source_id", "VARCHAR"),
            ("rule_id", "VARCHAR"),
            ("revision", "INTEGER"),
            ("sha256", "VARCHAR"),
            ("retrieved_at", "VARCHAR"),
            ("url", "VARCHAR"),
            ("snapshot_path", "VARCHAR"),
            ("locator", "VARCHAR"),
            ("excerpt", "VARCHAR"),
            ("stated", "VARCHAR"),
            ("origin", "VARCHAR"),
            ("carried_from_revision", "INTEGER"),
            ("chosen", "BOOLEAN"),
            # Appended: each cited claim as the field weighs it (in the field's unit), so SQL sees a conflict's
            # every value with its date, and a citation says what kind of evidence it is and how it was read.
            ("value_number", "DOUBLE"),
            ("value_text", "VARCHAR"),
            ("unit", "VARCHAR"),
            ("direction", "VARCHAR"),
            ("status", "VARCHAR"),
            ("digits", "INTEGER"),
            ("agrees", "BOOLEAN"),
            ("scope", "VARCHAR"),
            ("published_on", "VARCHAR"),
            ("publisher_kind", "VARCHAR"),
            ("read_via", "VARCHAR"),
        ],
        ["reference_id", "field", "source_id", "rule_id"],
    ),
    "field_inputs": (
        [
            ("reference_id", "VARCHAR"),
            ("field", "VARCHAR"),
            ("position", "INTEGER"),
            ("input", "VARCHAR"),
        ],
        ["reference_id", "field", "position"],
    ),
    "sources": (
        [
            ("source_id", "VARCHAR"),
            ("url", "VARCHAR"),
            ("publisher", "VARCHAR"),
            ("title", "VARCHAR"),
            ("document_type", "VARCHAR"),
            ("media_type", "VARCHAR"),
            ("status", "VARCHAR"),
            ("read_on", "VARCHAR"),
            ("rule_count", "INTEGER"),
            ("publisher_kind", "VARCHAR"),
            ("read_via", "VARCHAR"),
            ("published_on", "VARCHAR"),
        ],
        ["source_id"],
    ),
    "snapshots": (
        [
            ("source_id", "VARCHAR"),
            ("revision", "INTEGER"),
            ("retrieved_at", "VARCHAR"),
            ("sha256", "VARCHAR"),
            ("size", "BIGINT"),
            ("media_type", "VARCHAR"),
            ("url", "VARCHAR"),
            ("final_url", "VARCHAR"),
            ("etag", "VARCHAR"),
            ("last_modified", "VARCHAR"),
            ("origin", "VARCHAR"),
            ("snapshot_path", "VARCHAR"),
            ("is_current", "BOOLEAN"),
        ],
        ["source_id", "revision"],
    ),
    "claims": (
        [
            ("source_id", "VARCHAR"),
            ("rule_id", "VARCHAR"),
            ("field", "VARCHAR"),
            ("subject", "VARCHAR"),
            ("value_number", "DOUBLE"),
            ("value_text", "VARCHAR"),
            ("unit", "VARCHAR"),
            ("direction", "VARCHAR"),
            ("status", "VARCHAR"),
            ("revision", "INTEGER"),
            ("sha256", "VARCHAR"),
            ("locator", "VARCHAR"),
            ("excerpt", "VARCHAR"),
        ],
        ["source_id", "rule_id"],
    ),
}


def write_tables(lay: Layout, rows: dict[str, Iterable[Sequence[Any]]]) -> None:
    """Every table built aside in a fresh directory, then switched in with one atomic exchange of directories:
    a crash or kill at any point leaves the old tables or the new ones, never a mix that `query` would serve."""
    final = lay.tables_dir
    _remove_leftovers(final.parent, ".tables.")
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".tables.{os.getpid()}."))
    except OSError as exc:
        raise FabricrefError(f"cannot write {lay.relative(final)}: {exc.strerror}") from exc
    try:
        os.chmod(staging, 0o777 & ~current_umask())
        for name, (columns, order) in TABLES.items():
            write_table(staging, name, columns, order, rows.get(name, []))
        with critical():
            _switch_directories(staging, final)
    except OSError as exc:
        raise FabricrefError(f"cannot write {lay.relative(final)}: {exc.strerror or exc}") from exc
    except duckdb.Error as exc:
        raise FabricrefError(f"cannot write {lay.relative(final)}: {exc}") from exc
    finally:
        # After the exchange this holds the old tables; after a failure, the half-built new ones.
        shutil.rmtree(staging, ignore_errors=True)


_RENAME_EXCHANGE = 2


def _switch_directories(new: Path, final: Path) -> None:
    """Put `new` where `final` is in one step: renameat2(RENAME_EXCHANGE) swaps the two directories atomically
    (the old tables end up at `new`). Where the kernel or file system cannot, two renames: between them
    `final` is briefly absent (a reader sees "missing: run compile"), never mixed."""
    if not final.exists():
        os.rename(new, final)
        return
    if _exchange(new, final):
        return
    aside = new.with_name(new.name + ".old")
    os.rename(final, aside)
    os.rename(new, final)
    os.rename(aside, new)


def _exchange(a: Path, b: Path) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False  # not supported by this kernel or file system: fall back to two renames
    raise OSError(code, os.strerror(code), str(b))
