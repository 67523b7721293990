"""`python -m pipeline.core.code`: the code each stage runs, one small file per entry point (registry/code/).

Why: a stage's output depends on exactly the modules its `python -m` entry point imports (its import closure,
function-level imports included) and the data files of its own package (the report's templates). Listing those
modules one by one in dvc.yaml made dvc.lock ~2,000 lines, and DVC re-parses and re-dumps the whole lock after
every stage it runs: most of its own cost per stage (issue 16). Instead the `code` stage (deps: all of
pipeline/) writes registry/code/<entry>.txt, one `sha256  path` line per file of that closure, and each stage
declares that one file. An edit reruns `code` (a fraction of a second) and then exactly the stages whose closure
holds the edited file: a stage whose list is byte-identical is skipped by DVC, as before.

The closure is static (ast): every `import` / `from` anywhere in a module, within the `pipeline` package.
tests/test_dvc_deps.py checks, by running each stage under an audit hook, that a stage loads nothing else.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .paths import Layout

# Every `python -m` entry point a dvc.yaml stage runs (tests/test_dvc_deps.py checks the two agree).
ENTRIES = (
    "pipeline.retrieve",
    "pipeline.extract",
    "pipeline.compile",
    "pipeline.topology",
    "pipeline.traffic",
    "pipeline.report",
    "pipeline.core.registry",
)
STAGE_PACKAGES = frozenset({"retrieve", "extract", "compile", "topology", "traffic", "report"})
# The package's __init__ loads the notebook API (pipeline/api.py) inside a function, only when a notebook asks
# `fabricref.registry` & co.; no stage touches those names (the slow test checks what a stage really loads).
LAZY = frozenset({("pipeline/__init__.py", "pipeline.api")})


def code_dir(lay: Layout) -> Path:
    return lay.registry_dir / "code"


def code_file(lay: Layout, entry: str) -> Path:
    return code_dir(lay) / f"{entry}.txt"


def module_file(name: str, root: Path) -> Path | None:
    """The file `import name` runs under root (a package's __init__.py), or None."""
    base = root.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# The fields of a node that hold statements (bodies of modules, classes, functions, with, for, while, if, try,
# except handlers and match cases): an import is a statement, so these reach every one without visiting the
# expressions, which are most of a tree's nodes.
_BODIES = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """The statements (and except handlers, match cases) of a tree, in the order `ast.walk` meets them:
    breadth first, fields in their declared order. The order decides which module a closure says first imported
    a file, so it is kept."""
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        yield node
        for name in node._fields:
            if name in _BODIES:
                inner = getattr(node, name)
                if type(inner) is list:
                    todo.extend(inner)


@functools.cache
def import_statements(source: str, filename: str) -> tuple[tuple[int, str | None, tuple[str, ...]], ...]:
    """(level, module, names) of every import statement in `source`, wherever it stands; level -1 for a plain
    `import`. Parsed once per distinct text: the closures of all the entry points walk mostly the same modules."""
    found: list[tuple[int, str | None, tuple[str, ...]]] = []
    for node in _statements(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found.append((-1, None, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module, tuple(a.name for a in node.names)))
    return tuple(found)


class ImportMemo:
    """Each module text's import statements by the SHA-256 of the text, kept by a caller across runs (parsing is
    most of a closure's cost; pipeline/traffic/batch.py keeps one in its cache): a text looked up is parsed only
    if it was never seen, so the closure is the one parsing would give. `used`: the texts looked up since made."""

    def __init__(self, known: dict[str, Any] | None = None) -> None:
        self.known: dict[str, Any] = dict(known or {})
        self.used: set[str] = set()

    def statements(self, source: str, filename: str) -> Any:
        """`import_statements(source, filename)`, JSON-shaped (lists)."""
        digest = hashlib.sha256(source.encode()).hexdigest()
        self.used.add(digest)
        if digest not in self.known:
            found = import_statements(source, filename)
            self.known[digest] = [[level, module, list(names)] for level, module, names in found]
        return self.known[digest]

    def kept(self) -> dict[str, Any]:
        """The entries looked up since made (the ones to keep: the texts of the code as it is now)."""
        return {d: self.known[d] for d in sorted(self.used)}


class _Scan:
    """What one computation of closures (one `write`, one `fingerprint`) has already looked up under one root:
    module files by name, and the modules each file imports. Fresh per computation, so a file created, removed
    or edited between two calls is seen."""

    def __init__(self, root: Path, memo: ImportMemo | None = None) -> None:
        self.root = root
        self.files: dict[str, Path | None] = {}
        self.imports: dict[Path, list[str]] = {}
        self.memo = memo

    def module_file(self, name: str) -> Path | None:
        if name not in self.files:
            self.files[name] = module_file(name, self.root)
        return self.files[name]

    def imported(self, path: Path) -> list[str]:
        if path not in self.imports:
            self.imports[path] = imported(path, self.root, self)
        return self.imports[path]


def imported(path: Path, root: Path, scan: _Scan | None = None) -> list[str]:
    """Every module of the `pipeline` package `path` imports, wherever the import statement stands."""
    exists = scan.module_file if scan is not None else functools.partial(module_file, root=root)
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[str] = []
    source = path.read_text(encoding="utf-8")
    memo = scan.memo if scan is not None else None
    statements = memo.statements(source, str(path)) if memo is not None else import_statements(source, str(path))
    for level, module, names in statements:
        if level < 0:
            found += names
            continue
        if level:
            base = package.split(".")[: len(package.split(".")) - level + 1]
            full = ".".join(base + ([module] if module else []))
        else:
            full = module or ""
        found.append(full)
        if full == "pipeline" or full.startswith("pipeline."):  # no module of the package under another one
            found += [f"{full}.{a}" for a in names if exists(f"{full}.{a}")]
    return [m for m in found if m == "pipeline" or m.startswith("pipeline.")]


def import_closure(entry: str, root: Path, scan: _Scan | None = None) -> dict[str, str]:
    """Module file (relative POSIX path) → the module that first imported it, from `python -m entry`."""
    scan = scan if scan is not None else _Scan(root)
    first = scan.module_file(entry)
    if first is None:
        raise ValueError(f"no module {entry} under {root}")
    if first.name == "__init__.py" and (first.parent / "__main__.py").is_file():
        first = first.parent / "__main__.py"
    seen: dict[Path, str] = {}
    todo = [(first, "python -m " + entry)]
    while todo:
        path, by = todo.pop()
        if path in seen:
            continue
        seen[path] = by
        name = module_name(path, root)
        parts = name.split(".")
        for i in range(1, len(parts)):  # importing a.b.c runs a/__init__.py and a/b/__init__.py first
            parent = scan.module_file(".".join(parts[:i]))
            if parent is not None:
                todo.append((parent, name))
        for mod in scan.imported(path):
            if (path.relative_to(root).as_posix(), mod) in LAZY:
                continue
            target = scan.module_file(mod)
            if target is None:
                raise ValueError(f"{path.relative_to(root)} imports {mod}, which does not exist")
            todo.append((target, name))
    return {p.relative_to(root).as_posix(): by for p, by in seen.items()}


def own_package(entry: str) -> str | None:
    """pipeline/<stage> for an entry point inside a stage package, else None."""
    parts = entry.split(".")
    return f"pipeline/{parts[1]}" if len(parts) > 1 and parts[1] in STAGE_PACKAGES else None


def code_files(entry: str, root: Path, scan: _Scan | None = None) -> list[str]:
    """What the entry point's outputs can depend on among the code: its import closure, plus every file of its
    own package that is not Python (templates it reads at run time). Sorted relative POSIX paths."""
    files = set(import_closure(entry, root, scan))
    own = own_package(entry)
    if own is not None:
        for path in (root / own).rglob("*"):
            if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts:
                files.add(path.relative_to(root).as_posix())
    return sorted(files)


def fingerprint(
    entry: str,
    root: Path,
    scan: _Scan | None = None,
    digests: dict[str, str] | None = None,
    memo: ImportMemo | None = None,
) -> bytes:
    """`sha256  path` per code file of the entry point, sorted by path (the format of `sha256sum`). `scan` and
    `digests` (relative path → sha256) carry what one `write` already read over to the next entry point; `memo`
    the import statements earlier runs parsed (for a fresh scan)."""
    digests = digests if digests is not None else {}
    scan = scan if scan is not None else _Scan(root, memo)
    lines = []
    for f in code_files(entry, root, scan):
        if f not in digests:
            digests[f] = hashlib.sha256((root / f).read_bytes()).hexdigest()
        lines.append(f"{digests[f]}  {f}\n")
    return "".join(lines).encode()


def write(lay: Layout) -> int:
    """Every entry point's list into registry/code/ (only those: a stale one is removed)."""
    from .files import atomic_write_bytes

    out = code_dir(lay)
    out.mkdir(parents=True, exist_ok=True)
    scan, digests = _Scan(lay.root), {}
    for entry in ENTRIES:
        atomic_write_bytes(code_file(lay, entry), fingerprint(entry, lay.root, scan, digests))
    wanted = {code_file(lay, e).name for e in ENTRIES}
    for stale in out.iterdir():
        if stale.name not in wanted and stale.is_file():
            stale.unlink()
    return len(ENTRIES)


def _main(lay: Layout) -> str:
    return f"code of {write(lay)} entry points into {lay.relative(code_dir(lay))}/"


if __name__ == "__main__":
    from .entry import run_stage

    run_stage(_main)
