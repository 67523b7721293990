"""The folder layout is the architecture: one import name, floors imported only downward, no cycle, no stage
importing another stage (../shared/DESIGN.md "The package")."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

import pytest
from closure import PACKAGE, ROOT, imports, module_exists, module_of

STAGES = ("retrieve", "extract", "compile", "database", "topology", "traffic", "validate", "report")
# Floors, lowest first: a module may import its own floor's package or any lower floor, never a higher one.
FLOORS: list[tuple[str, ...]] = [
    ("errors",),
    ("formats",),
    ("core",),
    ("estimate",),
    # What the explorer and the report both show (drawings, templates): below every stage, above the library.
    ("views",),
    (*STAGES, "plan", "inspect"),
    ("api",),
    # The web application sits just under the CLI: `fabricref explore` starts it, and it never imports the CLI.
    ("explore",),
    ("cli",),
    ("__init__",),
]


# The inspect verbs and the planner read through a stage's small library modules, never its entry points.
READERS = ("inspect", "plan")


def entry_point(module: str) -> bool:
    return module.rsplit(".", 1)[-1] in ("stage", "__main__") or module.count(".") == 1


def top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def floor(module: str) -> int:
    name = top(module)
    return next(i for i, names in enumerate(FLOORS) if name in names)


def graph() -> dict[str, set[str]]:
    return {
        module_of(p): {m for m in imports(p) if module_exists(m) or m == "fabricref"} for p in PACKAGE.rglob("*.py")
    }


def test_every_top_level_name_has_a_floor() -> None:
    names = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()}
    names.discard("__pycache__")
    known = {n for f in FLOORS for n in f}
    assert names <= known, f"pipeline/{sorted(names - known)}: give it a floor in tests/unit/test_layout.py"


def test_imports_go_downward_only_and_no_stage_imports_another() -> None:
    wrong = []
    for module, targets in sorted(graph().items()):
        for target in sorted(targets):
            a, b = top(module), top(target)
            if target == "fabricref" or a == b:
                continue
            sideways = floor(target) == floor(module)
            reads_a_library = a in READERS and b in STAGES and not entry_point(target)
            if floor(target) > floor(module) or (sideways and not reads_a_library):
                wrong.append(f"{module} imports {target}")
    assert not wrong, "imports that run up or sideways:\n" + "\n".join(wrong)


def test_no_import_cycle() -> None:
    """Between modules, wherever the import stands (a function-level import closes a cycle as surely)."""
    edges = graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt == node or nxt not in edges:
                continue
            # A package's __init__ is imported before its modules: the edge module → its own package is not a cycle.
            if node.startswith(nxt + "."):
                continue
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_pyproject_installs_every_subpackage_under_one_name() -> None:
    """A subpackage missing from pyproject's explicit list would be missing from a non-editable install."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    subpackages = sorted(module_of(p) for p in PACKAGE.rglob("__init__.py"))
    assert sorted(config["packages"]) == subpackages
    assert config["package-dir"] == {"fabricref": "pipeline"}


@pytest.mark.parametrize(
    "argv",
    [["-c", "import pipeline"], ["-c", "import pipeline.core.paths"], ["-m", "pipeline.traffic"]],
)
def test_the_folder_name_is_refused_with_the_replacement(argv: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, env=env)
    assert r.returncode != 0
    assert "imported as `fabricref`" in r.stderr and "python -m fabricref." in r.stderr, r.stderr
