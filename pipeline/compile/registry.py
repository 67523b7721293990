"""The compile stage's tables: their columns, their row order, and writing them all at once (Parquet itself is
pipeline/core/registry.py's)."""

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
from ..core.registry import columns, write_table
from ..core.registry import remove_leftovers as _remove_leftovers
from ..errors import FabricrefError

# A column's DuckDB type: VARCHAR but for these (a name has one type in every table; `chosen` is the cited claim's
# id in `fields`, a flag in `field_citations`).
TYPES = {
    **dict.fromkeys(("value", "value_number", "check_value"), "DOUBLE"),
    **dict.fromkeys(
        ("revision", "digits", "check_digits", "carried_from_revision", "position", "rule_count"), "INTEGER"
    ),
    **dict.fromkeys(("is_current", "pinned", "conflict", "check_agrees", "agrees"), "BOOLEAN"),
    "size": "BIGINT",
}


def _table(names: str, key: str, **types: str) -> tuple[list[tuple[str, str]], list[str]]:
    return columns(names, TYPES, **types), key.split()


# table → (columns with DuckDB types, sort key). The order of columns and rows is part of the contract; columns
# added later are appended (positional readers keep theirs).
TABLES: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    "reference_models": _table("reference_id kind title form_factor summary model_path model_sha256", "reference_id"),
    "parameters": _table("reference_id name value unit direction why", "reference_id name"),
    "model_revisions": _table("model revision sha256 changed_on is_current pinned", "model revision"),
    "assumptions": _table("reference_id field value unit direction why", "reference_id field"),
    # Appended after `description`: the precision views print, whether the cited documents disagree and how that
    # was resolved, and a stated figure's check derivation.
    "fields": _table(
        "reference_id field value_number value_text unit direction status confidence formula reason evidence_needed "
        "chosen choice_reason description digits conflict resolved_by check_formula check_value check_digits "
        "check_agrees",
        "reference_id field",
    ),
    # Appended after `chosen`: each cited claim as the field weighs it (in the field's unit), so SQL sees a
    # conflict's every value with its date, and a citation says what kind of evidence it is and how it was read.
    "field_citations": _table(
        "reference_id field source_id rule_id revision sha256 retrieved_at url snapshot_path locator excerpt stated "
        "origin carried_from_revision chosen value_number value_text unit direction status digits agrees scope "
        "published_on publisher_kind read_via",
        "reference_id field source_id rule_id",
        chosen="BOOLEAN",
    ),
    "field_inputs": _table("reference_id field position input", "reference_id field position"),
    "sources": _table(
        "source_id url publisher title document_type media_type status read_on rule_count publisher_kind read_via "
        "published_on",
        "source_id",
    ),
    "snapshots": _table(
        "source_id revision retrieved_at sha256 size media_type url final_url etag last_modified origin "
        "snapshot_path is_current",
        "source_id revision",
    ),
    "claims": _table(
        "source_id rule_id field subject value_number value_text unit direction status revision sha256 locator excerpt",
        "source_id rule_id",
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
