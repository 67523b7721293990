"""The `code` stage's import scan (pipeline/core/code.py) visits statements only: it must find every import
`ast.walk` finds, in the same order (the order decides which module a closure says first imported a file)."""

from __future__ import annotations

import ast
from pathlib import Path

from pipeline.core.code import _statements, import_statements

ROOT = Path(__file__).resolve().parents[1]

NESTED = """\
import a
if x:
    import b
else:
    from . import c
try:
    import d
except ImportError:
    import e
else:
    import f
finally:
    import g
def h():
    from .i import j
    class K:
        import l
    with m:
        import n
    for o in p:
        import q
    else:
        import r
    while s:
        import t
    else:
        import u
    async def v():
        async with w:
            import x
match y:
    case 1:
        import z
    case _:
        from ..aa import bb, cc
lam = lambda: __import__("not_a_statement")
"""


def _walked(tree: ast.AST) -> list[ast.AST]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def _scanned(tree: ast.AST) -> list[ast.AST]:
    return [node for node in _statements(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def test_every_import_statement_is_found_in_walk_order():
    tree = ast.parse(NESTED)
    assert _scanned(tree) == _walked(tree)
    names = [n for _, module, found in import_statements(NESTED, "nested.py") for n in (module, *found) if n]
    # breadth first: the module's own body, then everything one block deep (try's fields in their order: body,
    # handlers, orelse, finalbody), then two blocks deep, ...
    depth1, depth2 = ["a"], ["b", "c", "d", "f", "g", "i", "j"]
    depth3, depth4 = ["e", "l", "n", "q", "r", "t", "u", "z", "aa", "bb", "cc"], ["x"]
    assert names == depth1 + depth2 + depth3 + depth4


def test_the_package_scans_as_ast_walk_does():
    files = sorted((ROOT / "pipeline").rglob("*.py"))
    assert len(files) > 50
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert _scanned(tree) == _walked(tree), path
