"""What the structure tests read: each module's imports (function-level ones too), a stage's import closure, and
the stages `dvc repro` runs as dvc.yaml and params.yaml define them. Shared by tests/unit/test_layout.py,
tests/unit/test_dvc_deps.py and tests/e2e/test_stage_audit.py."""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pipeline"


def module_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["fabricref", *parts])


@functools.cache  # a module's file does not change while the tests run; every closure and layout test reads it
def imports(path: Path) -> frozenset[str]:
    """Every fabricref module `path` names in an import statement, wherever it stands (function-level too)."""
    name = module_of(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "fabricref"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "fabricref":
                target = node.module
            else:
                continue
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names if module_exists(f"{target}.{a.name}")}
    return frozenset(found)


def module_exists(module: str) -> bool:
    base = PACKAGE.joinpath(*module.split(".")[1:])
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _substitute(value: Any, key: str, item: Any) -> Any:
    """`${key}`, `${item}` and `${item.<name>}` replaced as DVC's foreach does (the only templating used)."""
    if isinstance(value, str):
        out = value.replace("${key}", key)
        if isinstance(item, dict):
            for name, v in item.items():
                out = out.replace("${item." + name + "}", str(v))
        else:
            out = out.replace("${item}", str(item))
        assert "${" not in out, f"dvc.yaml: {value!r} uses templating this test does not expand"
        return out
    if isinstance(value, list):
        return [_substitute(v, key, item) for v in value]
    if isinstance(value, dict):
        return {_substitute(k, key, item): _substitute(v, key, item) for k, v in value.items()}
    return value


def dvc_stages(root: Path = ROOT) -> dict[str, dict]:
    """Every stage as `dvc repro` runs it: a `foreach` stage expands to one stage per item, named `name@key` (a
    `foreach: ${name}` over params.yaml's `name`)."""
    stages: dict[str, dict] = {}
    params = yaml.safe_load((root / "params.yaml").read_text())
    for name, spec in yaml.safe_load((root / "dvc.yaml").read_text())["stages"].items():
        if "foreach" not in spec:
            stages[name] = spec
            continue
        items = spec["foreach"]
        if isinstance(items, str):
            assert items.startswith("${") and items.endswith("}"), items
            items = params[items[2:-1]]
        pairs = items.items() if isinstance(items, dict) else ((str(i), i) for i in items)
        for key, item in pairs:
            stages[f"{name}@{key}"] = _substitute(spec["do"], str(key), item)
    return stages


def entry_argv(cmd: str) -> tuple[str, list[str]]:
    """`python -m fabricref.<module> [args]` → (module, args)."""
    parts = cmd.split()
    assert parts[:2] == ["python", "-m"] and len(parts) >= 3, f"{cmd!r}: expected `python -m fabricref.<module> ...`"
    return parts[2], parts[3:]


def entry_module(cmd: str) -> str:
    return entry_argv(cmd)[0]


def params_files(spec: dict) -> list[str]:
    """The files a stage's `params:` name (params.yaml unless an entry names its file), read by the stage."""
    files = set()
    for entry in spec.get("params", []):
        files |= set(entry) if isinstance(entry, dict) else {"params.yaml"}
    return sorted(files)


def import_closure(entry: str) -> dict[str, str]:
    """Module file (relative path) → the module that first imported it, from `python -m entry`; a package's
    __init__ files count (Python runs them first)."""

    def file_of(module: str) -> Path | None:
        base = PACKAGE.joinpath(*module.split(".")[1:])
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                return candidate
        return None

    first = file_of(entry)
    assert first is not None, entry
    start = [first] + ([first.parent / "__main__.py"] if first.name == "__init__.py" else [])
    found: dict[str, str] = {}
    todo = [(path, entry) for path in start]
    while todo:
        path, by = todo.pop()
        rel = path.relative_to(ROOT).as_posix()
        if rel in found:
            continue
        found[rel] = by
        if path == PACKAGE / "__init__.py":
            continue  # it loads the API (api.py) only when a notebook asks `fabricref.<name>`, never for a stage
        module = module_of(path)
        parents = [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
        for target in sorted({*imports(path), *parents}):
            nxt = file_of(target)
            if nxt is not None:
                todo.append((nxt, module))
    return found


def covered(path: str, deps: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in deps)
