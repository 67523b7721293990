"""Where things live in a fabricref checkout. Every path the pipeline touches is built here."""

from __future__ import annotations

import os
import re
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


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def sources_dir(self) -> Path:
        return self.root / "sources"

    @property
    def pins_dir(self) -> Path:
        return self.sources_dir / "pins"

    @property
    def store_dir(self) -> Path:
        return self.sources_dir / "snapshots"

    @property
    def transcriptions_dir(self) -> Path:
        return self.sources_dir / "transcriptions"

    @property
    def schemas_dir(self) -> Path:
        return self.root / "schemas"

    @property
    def registry_dir(self) -> Path:
        return self.root / "registry"

    @property
    def claims_dir(self) -> Path:
        return self.registry_dir / "claims"

    @property
    def tables_dir(self) -> Path:
        return self.registry_dir / "tables"

    @property
    def snapshots_manifest(self) -> Path:
        return self.registry_dir / "snapshots.json"

    @property
    def duckdb_path(self) -> Path:
        return self.registry_dir / "registry.duckdb"

    @property
    def queries_dir(self) -> Path:
        return self.registry_dir / "queries"

    @property
    def cache_dir(self) -> Path:
        return self.root / ".fabricref-cache"

    @property
    def references_dir(self) -> Path:
        return self.root / "models" / "references"

    @property
    def plans_dir(self) -> Path:
        """`fabricref plan`'s tables (git-ignored, outside every DVC output): read as `plans` by `fabricref query`."""
        return self.root / "plans"

    def source_file(self, source_id: str) -> Path:
        return self.sources_dir / f"{check_slug(source_id, 'source id')}.yaml"

    def pins_file(self, source_id: str) -> Path:
        return self.pins_dir / f"{check_slug(source_id, 'source id')}.json"

    def transcription_file(self, source_id: str) -> Path:
        return self.transcriptions_dir / f"{check_slug(source_id, 'source id')}.html"

    def relative(self, path: Path) -> str:
        """A path relative to the checkout, with forward slashes, for records and messages."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path)


def find_root(start: Path | None = None) -> Path:
    """The checkout root: $FABRICREF_ROOT, else the nearest ancestor holding `sources/` and `schemas/`."""
    env = os.environ.get("FABRICREF_ROOT")
    if env:
        return Path(env).resolve()
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "sources").is_dir() and (candidate / "schemas").is_dir():
            return candidate
    raise UsageError(
        f"no fabricref checkout found at or above {here}: expected a directory with sources/ and schemas/ "
        "(or set FABRICREF_ROOT)"
    )


def layout(root: Path | None = None) -> Layout:
    return Layout(root.resolve() if root else find_root())


PARAMS_FILE = "params.yaml"


def checkout_params(path: Path, folder: str) -> Path | None:
    """The checkout's params.yaml for <root>/models/<folder>/<file>: the one home of the knobs people vary. None
    for a file elsewhere (a copy outside a checkout states its values itself) or no params.yaml."""
    if path.parent.name != folder or path.parent.parent.name != "models":
        return None
    params = path.parent.parent.parent / PARAMS_FILE
    return params if params.is_file() else None


def workload_paths(lay: Layout) -> list[Path]:
    """Every shipped workload file, in id order."""
    return sorted((lay.root / "models" / "workloads").glob("*.yaml"))
