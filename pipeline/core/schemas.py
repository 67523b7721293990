"""Loading declarative files and validating them, with errors that name the file, line and JSON path."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from .errors import ValidationError

SCHEMAS_DIR = Path(__file__).resolve().parents[2] / "schemas"


def json_path(parts: list[Any] | tuple[Any, ...]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _line_of(doc: Any, parts: list[Any]) -> int | None:
    """1-based line of the value at `parts` in a ruamel document, or of its nearest ancestor."""
    node, line = doc, None
    for part in parts:
        try:
            if isinstance(node, CommentedMap) and part in node:
                line = node.lc.key(part)[0] + 1
                node = node[part]
            elif isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node):
                line = node.lc.item(part)[0] + 1
                node = node[part]
            else:
                break
        except (KeyError, IndexError, TypeError, AttributeError):
            break
    if line is None and hasattr(doc, "lc"):
        line = (doc.lc.line or 0) + 1
    return line


def to_plain(node: Any) -> Any:
    """ruamel's commented containers and scalar subclasses turned into plain JSON-like Python."""
    if isinstance(node, dict):
        return {str(k): to_plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [to_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    # dates and other YAML scalars become their ISO text: the schemas speak JSON.
    return node.isoformat() if hasattr(node, "isoformat") else str(node)


def load_yaml(path: Path) -> tuple[Any, Any]:
    """Returns (plain data, ruamel document for line lookups). Malformed YAML names file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ValidationError(f"{path}: file not found") from exc
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        doc = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ValidationError(f"{where}: malformed YAML: {exc.problem or exc.context}") from exc
    except YAMLError as exc:
        raise ValidationError(f"{path}: malformed YAML: {exc}") from exc
    return to_plain(doc), doc


def load_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ValidationError(f"{path}: file not found") from exc
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    except ValueError as exc:
        raise ValidationError(f"{path}: invalid JSON: {exc}") from exc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


@cache
def schema(name: str) -> dict[str, Any]:
    path = SCHEMAS_DIR / name
    data = load_json(path)
    Draft202012Validator.check_schema(data)
    return data


@cache
def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(schema(name), format_checker=Draft202012Validator.FORMAT_CHECKER)


def _find_non_finite(value: Any, parts: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    if isinstance(value, float) and not math.isfinite(value):
        return parts
    if isinstance(value, dict):
        for key, item in value.items():
            found = _find_non_finite(item, (*parts, key))
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _find_non_finite(item, (*parts, index))
            if found is not None:
                return found
    return None


def validate(instance: Any, schema_name: str, where: Path | str, doc: Any = None) -> None:
    """Validate against schemas/<schema_name>; every error gives file[:line], JSON path and expectation."""
    bad = _find_non_finite(instance)
    if bad is not None:
        line = _line_of(doc, list(bad)) if doc is not None else None
        loc = f"{where}:{line}" if line else f"{where}"
        raise ValidationError(f"{loc}: at {json_path(bad)}: NaN or infinite number; expected a finite number")
    errors = sorted(_validator(schema_name).iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        return
    lines = []
    for error in errors[:10]:
        parts = list(error.absolute_path)
        line = _line_of(doc, parts) if doc is not None else None
        loc = f"{where}:{line}" if line else f"{where}"
        lines.append(f"{loc}: at {json_path(parts)}: {_explain(error)}")
    more = f"\n(and {len(errors) - 10} more)" if len(errors) > 10 else ""
    raise ValidationError("\n".join(lines) + more)


def _explain(error: Any) -> str:
    """jsonschema's message, plus what the schema expected where that is short enough to say."""
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        return f"{error.message}; expected only {', '.join(allowed)}" if allowed else error.message
    if error.validator == "enum":
        return f"{error.instance!r} is not one of {', '.join(map(repr, error.validator_value))}"
    if error.validator == "pattern":
        return f"{error.instance!r} does not match the expected pattern {error.validator_value}"
    if error.validator in {"oneOf", "anyOf"}:
        return f"{error.message} (expected exactly one of the declared forms)"
    return error.message
