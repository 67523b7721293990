"""Where things live in a fabricref checkout. Every path the pipeline touches is built here."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError, ValidationError

SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,78}[a-z0-9])?$")


def check_slug(value: str, what: str = "id") -> str:
    """Refuse ids that could escape a directory before any path is built from them."""
    if not isinstance(value, str) or not SLUG_RE.fullmatch(value) or "--" in value:
        raise ValidationError(
            f"invalid {what} {value!r}: expected a slug of lowercase letters, digits and single hyphens "
            "(no '/', '..', spaces or leading/trailing hyphen), at most 80 characters"
        )
    return value


def _below(*parts: str) -> property:
    """A Layout property: the path `parts` below the checkout root."""
    return property(lambda lay: lay.root.joinpath(*parts))


@dataclass(frozen=True)
class Layout:
    root: Path

    sources_dir = _below("sources")
    pins_dir = _below("sources", "pins")
    store_dir = _below("sources", "snapshots")
    transcriptions_dir = _below("sources", "transcriptions")
    measured_dir = _below("sources", "measured")  # pins of measured logs (`fabricref measured import`)
    schemas_dir = _below("schemas")
    registry_dir = _below("registry")
    claims_dir = _below("registry", "claims")
    tables_dir = _below("registry", "tables")
    snapshots_manifest = _below("registry", "snapshots.json")
    duckdb_path = _below("registry", "registry.duckdb")
    queries_dir = _below("registry", "queries")
    references_dir = _below("models", "references")
    plans_dir = _below("plans")  # `fabricref plan`'s tables: git-ignored, outside every DVC output

    def source_file(self, source_id: str) -> Path:
        return self.sources_dir / f"{check_slug(source_id, 'source id')}.yaml"

    def pins_file(self, source_id: str) -> Path:
        return self.pins_dir / f"{check_slug(source_id, 'source id')}.json"

    def transcription_file(self, source_id: str) -> Path:
        return self.transcriptions_dir / f"{check_slug(source_id, 'source id')}.html"

    def relative(self, path: Path) -> str:
        """A path relative to the checkout, with forward slashes, for records and messages: the file as named (a
        link is named, not where it points), its folders resolved."""
        try:
            named = path.absolute()
            if named.name in ("", "..") or named == self.root.absolute():
                named = named.resolve()
            else:
                named = named.parent.resolve() / named.name
            return named.relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path)


ROOT_ENV = "FABRICREF_ROOT"
# What makes a directory a fabricref checkout: the declared sources, and the vocabulary figures are read against.
MARKERS = {"sources/": Path("sources"), "schemas/vocabulary.json": Path("schemas") / "vocabulary.json"}
_VOCABULARY_BYTES = 4 * 1024 * 1024


def _missing(path: Path, read: bool = True) -> list[str]:
    """What keeps `path` from being a checkout (when `read`, the vocabulary must also hold `fields`)."""
    out = [] if (path / "sources").is_dir() else ["no sources/"]
    vocabulary = path / MARKERS["schemas/vocabulary.json"]
    if vocabulary.is_symlink():
        return [*out, "schemas/vocabulary.json is a symbolic link, not the checkout's own file"]
    if not vocabulary.exists():
        return [*out, "no schemas/vocabulary.json"]
    if not vocabulary.is_file():
        return [*out, "schemas/vocabulary.json is not a regular file"]
    if not read:
        return out
    try:
        with vocabulary.open("rb") as handle:
            data = json.loads(handle.read(_VOCABULARY_BYTES + 1))
    except (OSError, ValueError) as exc:
        return [*out, f"schemas/vocabulary.json is not JSON ({exc})"]
    if not isinstance(data, dict) or not isinstance(data.get("fields"), dict) or not data["fields"]:
        return [*out, "schemas/vocabulary.json holds no `fields`"]
    return out


def check_checkout(path: Path, how: str, read: bool = True) -> Path:
    """`path` resolved, when it is a checkout; else UsageError starting with `how` (what named it) saying why."""
    expected = f"expected a fabricref checkout (a directory with {' and '.join(MARKERS)})"
    if not path.exists():
        raise UsageError(f"{how}: does not exist; {expected}")
    if not path.is_dir():
        raise UsageError(f"{how}: is not a directory; {expected}")
    missing = _missing(path, read)
    if missing:
        raise UsageError(f"{how}: is not a fabricref checkout ({'; '.join(missing)}); {expected}")
    return path.resolve()


def _search(here: Path, read: bool = True) -> Path:
    for candidate in (here, *here.parents):
        if not _missing(candidate, read):
            return candidate
    raise UsageError(
        f"no fabricref checkout found at or above {here}: expected a directory with {' and '.join(MARKERS)} "
        f"(or set {ROOT_ENV})"
    )


def find_root(start: Path | None = None) -> Path:
    """The checkout root: the one the running command settled on; in a DVC stage, the checkout DVC runs it in
    (a FABRICREF_ROOT naming another is refused: it would let one `dvc repro` rewrite another's outputs); else
    $FABRICREF_ROOT; else the nearest checkout at or above the working directory."""
    if _IN_USE:
        return _IN_USE[-1]
    env = os.environ.get(ROOT_ENV)
    if os.environ.get("DVC_STAGE"):
        dvc_root = os.environ.get("DVC_ROOT")
        here = (start or Path.cwd()).resolve()
        # The vocabulary is read by the stages that declare it, not by every stage to find the root.
        root = (
            check_checkout(Path(dvc_root), f"DVC_ROOT={dvc_root}", read=False)
            if dvc_root
            else _search(here, read=False)
        )
        if env and Path(env).resolve() != root:
            raise UsageError(
                f"{ROOT_ENV}={env} names another directory than the checkout DVC runs this stage in ({root}); a "
                f"stage works only on its own checkout: unset {ROOT_ENV} for `dvc repro` (or point it at {root})"
            )
        return root
    if env:
        return check_checkout(Path(env), f"{ROOT_ENV}={env}")
    return _search((start or Path.cwd()).resolve())


# The roots of the commands running in this process (pushed by `settle`).
_IN_USE: list[Path] = []


@contextlib.contextmanager
def command() -> Iterator[None]:
    """One command: a root it `settle`s on is forgotten when the block ends."""
    depth = len(_IN_USE)
    try:
        yield
    finally:
        del _IN_USE[depth:]


def settle(lay: Layout) -> Layout:
    """Until the running `command()` block ends, `find_root` answers `lay.root`."""
    _IN_USE.append(lay.root)
    return lay


def contained(path: Path, root: Path | None = None, *, strict: bool = False) -> Path:
    """`path`, once it is known to stay inside the checkout (`root`, else the settled one) with every symbolic
    link resolved; a link out is refused naming where it leads. A path not starting inside is a file the user
    named and is left alone, unless `strict` (a path a document holds)."""
    base = root if root is not None else (_IN_USE[-1] if _IN_USE else None)
    if base is None:
        return path
    base = base.resolve()
    target = path if path.is_absolute() else base / path
    lexical = Path(os.path.normpath(target))
    if not strict and not (lexical.is_relative_to(base) or target.is_relative_to(base)):
        return path
    try:
        resolved = target.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise ValidationError(
            f"{path}: cannot be resolved ({exc}); expected a file inside the checkout {base}"
        ) from None
    if not resolved.is_relative_to(base) and not any(resolved.is_relative_to(c) for c in dvc_caches(base)):
        how = "climbs out of" if not lexical.is_relative_to(base) else "is a symbolic link out of"
        raise ValidationError(
            f"{path}: {how} the checkout {base} (it leads to {resolved}); every file a command reads or writes "
            "stays inside its checkout"
        )
    return path


@functools.cache
def dvc_caches(root: Path) -> tuple[Path, ...]:
    """The checkout's DVC cache directories: with `cache.type = symlink` outputs link there."""
    import configparser

    found = [root / ".dvc" / "cache"]
    for name in ("config", "config.local"):
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read(root / ".dvc" / name, encoding="utf-8")
            value = parser.get("cache", "dir", fallback=None)
        except (configparser.Error, UnicodeDecodeError):
            continue
        if value:
            found.append((root / ".dvc" / value.strip()) if not Path(value.strip()).is_absolute() else Path(value))
    return tuple(c.resolve() for c in found)


def layout(root: Path | None = None) -> Layout:
    """The Layout of `root` (checked to be a checkout), else of the one `find_root` finds."""
    return Layout(check_checkout(root, f"--root {root}") if root else find_root())


PARAMS_FILE = "params.yaml"


def checkout_params(path: Path, folder: str) -> Path | None:
    """The checkout's params.yaml for <root>/models/<folder>/<file>; None for a file elsewhere or none."""
    if path.parent.name != folder or path.parent.parent.name != "models":
        return None
    params = path.parent.parent.parent / PARAMS_FILE
    return params if params.is_file() else None


def workload_paths(lay: Layout) -> list[Path]:
    """Every shipped workload file, in id order."""
    return sorted((lay.root / "models" / "workloads").glob("*.yaml"))
