"""A small, safe formula language for derived fields: numbers, field names, + - * /, parentheses,
min() and max(). Formulas are parsed with Python's `ast` and walked node by node; nothing is ever
executed. Every value carries its unit dimension and bandwidth direction, so adding GB/s to Gb/s
without conversion, or a per-direction figure to a bidirectional one, is an error.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import ValidationError
from .units import DIMENSIONLESS, Dims, unit_info

NAME_RE = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*$")
FUNCTIONS = ("min", "max")
MAX_LITERAL = 2**53


@dataclass(frozen=True)
class Value:
    """A number in base units (bytes, seconds, watts) with its dimensions and direction."""

    base: float
    dims: Dims = DIMENSIONLESS
    direction: str | None = None

    @classmethod
    def of(cls, value: float, unit: str, direction: str | None = None) -> Value:
        factor, dims = unit_info(unit)
        return cls(value * factor, dims, direction)

    def in_unit(self, unit: str) -> float:
        factor, dims = unit_info(unit)
        if dims != self.dims:
            raise ValidationError(f"result has dimensions {_dims_text(self.dims)}, but the field takes {unit}")
        return self.base / factor


def _dims_text(dims: Dims) -> str:
    names = ("B", "s", "W")
    parts = [f"{n}^{e}" if e != 1 else n for n, e in zip(names, dims, strict=True) if e]
    return "·".join(parts) or "dimensionless"


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def parse(formula: str) -> ast.Expression:
    """Parse and check a formula against the language; returns the tree. Errors say what is allowed."""
    if not isinstance(formula, str) or not formula.strip():
        raise ValidationError("empty formula: expected an expression over field names and numbers")
    if len(formula) > 500:
        raise ValidationError("formula longer than 500 characters")
    if "\x00" in formula:  # ast.parse raises ValueError for it before Python 3.11.4, SyntaxError after
        raise ValidationError(f"formula {formula!r}: a NUL character is not allowed")
    try:
        tree = ast.parse(formula, mode="eval")
    except SyntaxError as exc:
        raise ValidationError(f"formula {formula!r}: syntax error at column {exc.offset}: {exc.msg}") from None
    _check(tree.body, formula)
    return tree


def _check(node: ast.AST, formula: str) -> None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Div):
        _check(node.left, formula)
        _check(node.right, formula)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        _check(node.operand, formula)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        # A 401-digit literal would overflow when turned into a float; 1e999 is already infinite.
        if not abs(node.value) <= MAX_LITERAL:
            raise ValidationError(
                f"formula {formula!r}: number {_short_number(node.value)} is out of range; "
                f"expected a finite magnitude of at most 2**53"
            )
    elif isinstance(node, ast.Name | ast.Attribute):
        name = _dotted(node)
        if name is None or not NAME_RE.fullmatch(name):
            raise ValidationError(f"formula {formula!r}: {ast.unparse(node)!r} is not a field name")
    elif isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS) or node.keywords or not node.args:
            raise ValidationError(
                f"formula {formula!r}: call {ast.unparse(node.func)!r} is not allowed; only min(...) and max(...)"
            )
        for arg in node.args:
            _check(arg, formula)
    else:
        raise ValidationError(
            f"formula {formula!r}: {type(node).__name__} {ast.unparse(node)!r} is outside the formula language "
            "(numbers, field names, + - * /, parentheses, min, max)"
        )


def _short_number(value: float) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"of {len(text.lstrip('-'))} digits"


def names(formula: str) -> list[str]:
    """The field names a formula reads, in order of first use."""
    out: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Name | ast.Attribute):
            name = _dotted(node)
            if name and name not in out:
                out.append(name)
            return
        if isinstance(node, ast.Call):
            for arg in node.args:
                visit(arg)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(parse(formula).body)
    return out


def evaluate(formula: str, lookup: Mapping[str, Value] | Callable[[str], Value]) -> Value:
    tree = parse(formula)
    get = lookup if callable(lookup) else lookup.__getitem__

    def ev(node: ast.AST) -> Value:
        if isinstance(node, ast.Constant):
            return Value(float(node.value))
        if isinstance(node, ast.Name | ast.Attribute):
            name = _dotted(node)
            assert name is not None
            try:
                return get(name)
            except KeyError:
                raise ValidationError(f"formula {formula!r}: unknown name {name!r}") from None
        if isinstance(node, ast.UnaryOp):
            inner = ev(node.operand)
            return Value(-inner.base, inner.dims, inner.direction) if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.Call):
            args = [ev(a) for a in node.args]
            for other in args[1:]:
                _same_kind(args[0], other, formula, node.func.id)  # type: ignore[attr-defined]
            pick = min if node.func.id == "min" else max  # type: ignore[attr-defined]
            return pick(args, key=lambda v: v.base)
        if isinstance(node, ast.BinOp):
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add | ast.Sub):
                op = "+" if isinstance(node.op, ast.Add) else "-"
                _same_kind(left, right, formula, op)
                base = left.base + right.base if op == "+" else left.base - right.base
                return Value(base, left.dims, left.direction)
            if left.direction and right.direction:
                raise ValidationError(
                    f"formula {formula!r}: multiplying or dividing two directional bandwidths is not meaningful"
                )
            direction = left.direction or right.direction
            if isinstance(node.op, ast.Mult):
                dims = tuple(a + b for a, b in zip(left.dims, right.dims, strict=True))
                return Value(left.base * right.base, dims, direction)  # type: ignore[arg-type]
            if right.base == 0:
                raise ValidationError(f"formula {formula!r}: division by zero")
            dims = tuple(a - b for a, b in zip(left.dims, right.dims, strict=True))
            return Value(left.base / right.base, dims, direction)  # type: ignore[arg-type]
        raise ValidationError(f"formula {formula!r}: unsupported expression")  # pragma: no cover - parse() checks

    result = ev(tree.body)
    if not math.isfinite(result.base):
        raise ValidationError(f"formula {formula!r}: the result is not a finite number (overflow)")
    return result


def _same_kind(a: Value, b: Value, formula: str, op: str) -> None:
    if a.dims != b.dims:
        raise ValidationError(
            f"formula {formula!r}: unit mismatch in {op!r}: {_dims_text(a.dims)} vs {_dims_text(b.dims)}"
        )
    if a.direction != b.direction:
        raise ValidationError(
            f"formula {formula!r}: direction mismatch in {op!r}: {a.direction or 'none'} vs {b.direction or 'none'}"
        )
