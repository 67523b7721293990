"""Loading declarative files and validating them, with errors that name the file, line and JSON path."""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
from collections.abc import Callable
from datetime import date
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from ..errors import ValidationError, did_you_mean
from ..formats.common import PATTERN_WORDS
from .paths import PARAMS_FILE, checkout_params
from .text import control_problem

if TYPE_CHECKING:
    from ruamel.yaml import YAML


def json_path(parts: list[Any] | tuple[Any, ...]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class Lines:
    """A YAML file's round-trip document (which records lines), composed only when a line is asked for: the
    C-parsed data carries none and the pure-Python round trip is slow."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._doc: Any = None

    def document(self) -> Any:
        if self._doc is None:
            from ruamel.yaml import YAML
            from ruamel.yaml.error import YAMLError

            try:
                self._doc = YAML(typ="rt").load(self._text)
            except (YAMLError, ValueError, OverflowError, RecursionError, IndexError):
                self._doc = {}  # libyaml took what the pure parser refuses (a tab as a separator): lines unknown
        return self._doc


def _line_of(doc: Any, parts: list[Any]) -> int | None:
    """1-based line of the value at `parts` in a ruamel document (or `Lines`), or of its nearest ancestor."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(doc, Lines):
        doc = doc.document()
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
        out = {str(k): to_plain(v) for k, v in node.items()}
        if len(out) < len(node):  # 1 and '1' (or a date and its text): one would silently replace the other
            seen: dict[str, Any] = {}
            for k in node:
                if str(k) in seen:
                    raise ValueError(
                        f"duplicate key {str(k)!r} (written as {seen[str(k)]!r} and as {k!r}); each key may appear once"
                    )
                seen[str(k)] = k
        return out
    if isinstance(node, list):
        return [to_plain(v) for v in node]
    if node is None:
        return None
    for kind in (bool, int, float, str):  # ruamel's scalar subclasses become the plain type
        if isinstance(node, kind):
            return kind(node)
    # dates and other YAML scalars become their ISO text: the schemas speak JSON.
    return node.isoformat() if hasattr(node, "isoformat") else str(node)


# Limits on declarative files (the largest shipped is ~15 KB, ~8 levels deep): ample room, bounded time and memory.
MAX_DECLARATIVE_BYTES = 1 << 20
MAX_NESTING = 64
# No quantity of this registry is beyond 2**53 (floats stay exact below it) or this close to 0 but not 0 (the
# smallest shipped is ~0.02); such numbers only overflow later (1e-300 divides to infinity).
MAX_MAGNITUDE = 2**53
MIN_MAGNITUDE = 1e-12
ACCEPTED = f"0, or a magnitude from {MIN_MAGNITUDE:g} to 2**53 ({MAX_MAGNITUDE})"


def number_problem(value: Any) -> str | None:
    """Why a declared value or knob is no acceptable number (not finite, or not 0 and outside [MIN_MAGNITUDE,
    MAX_MAGNITUDE]), naming the accepted range; None for a sound one, a boolean or a non-number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"NaN or infinite number; expected a finite number: {ACCEPTED}"
    if abs(value) > MAX_MAGNITUDE:
        text = str(value) if isinstance(value, int) else f"{value:g}"
        shown = text if len(text) <= 24 else f"a {len(text.lstrip('-'))}-digit number"
        return f"{shown} is too large; expected {ACCEPTED}"
    if value != 0 and abs(value) < MIN_MAGNITUDE:
        kind = " (a subnormal number)" if abs(value) < sys.float_info.min else ""
        return f"{value!r}{kind} is too close to 0: dividing by it overflows; expected {ACCEPTED}"
    return None


_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[Tt ].*)?")


def _read_text(path: Path, what: str) -> str:
    """The file's UTF-8 text, at most MAX_DECLARATIVE_BYTES, from a regular file (`read_bounded`)."""
    from .files import read_bounded

    raw = read_bounded(path, MAX_DECLARATIVE_BYTES, f"a declarative {what} file", ValidationError)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _screen_yaml_events(yaml: YAML, text: str, path: Path) -> None:
    """Screen the parser's events before anything is composed: no anchors or aliases (an alias bomb expands
    exponentially), bounded nesting, and an unquoted date must be a real one (2026-02-30)."""
    from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, NodeEvent, ScalarEvent

    depth = 0
    for event in yaml.parse(text):
        mark = event.start_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        if isinstance(event, AliasEvent) or (isinstance(event, NodeEvent) and event.anchor):
            raise ValidationError(
                f"{where}: YAML anchors and aliases (&name, *name) are not allowed in declarative files; "
                "write the value out"
            )
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_NESTING:
                raise ValidationError(f"{where}: nested deeper than {MAX_NESTING} levels; expected a flat document")
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
        elif isinstance(event, ScalarEvent) and not event.style and event.tag is None:  # plain: None or ""
            value = event.value
            if found := _DATE.fullmatch(value):
                try:
                    date(*map(int, found.groups()))
                except ValueError:
                    raise ValidationError(
                        f"{where}: {value!r} is not a real date; expected YYYY-MM-DD (quote it if it is text)"
                    ) from None


def load_yaml(path: Path) -> tuple[Any, Lines]:
    """(plain data, its `Lines` for `_line_of`); malformed YAML names file and line."""
    text = _read_text(path, "YAML")
    data = _parse_yaml(text, path)
    doc = Lines(text)
    if path.name == PARAMS_FILE:
        # params.yaml has no schema of its own (each reader takes its block), so its numbers and text get the
        # checks every validated document gets, here, where every reader passes.
        bad = _find_bad_number(data)
        if bad is not None:
            line = _line_of(doc, list(bad[0]))
            raise ValidationError(f"{path}:{line}: at {json_path(bad[0])}: {bad[1]}" if line else f"{path}: {bad[1]}")
    return data, doc


def dump_yaml(data: Any) -> str:
    """`data` as block YAML, keys in their order, in YAML 1.2 as `load_yaml` reads it (a title `1e1` is quoted)."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.width = 120
    yaml.allow_unicode = True
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()


def _parse_yaml(text: str, path: Path) -> Any:
    """The document as plain data, screened first; parsed by libyaml with ruamel's YAML 1.2 resolver."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    # libyaml drops a byte-order mark anywhere; YAML 1.2 skips one only at the start and reads any other as text.
    yaml = YAML(typ="safe", pure="\ufeff" in text[1:])
    yaml.allow_duplicate_keys = False
    try:
        _screen_yaml_events(yaml, text, path)
        data = to_plain(yaml.load(text))
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ValidationError(f"{where}: malformed YAML: {exc.problem or exc.context}") from exc
    except YAMLError as exc:
        raise ValidationError(f"{path}: malformed YAML: {exc}") from exc
    except (ValueError, OverflowError, RecursionError, IndexError) as exc:
        # Scalars the screen let through but the constructor cannot build (an out-of-range time; `+_`, which
        # ruamel's integer constructor indexes past the end of).
        raise ValidationError(f"{path}: malformed YAML: {exc}") from exc
    return data


def load_json(path: Path) -> Any:
    """A declarative JSON file: UTF-8, bounded size and depth, no NaN, no duplicate keys."""
    text = _read_text(path, "JSON")
    deep = ValidationError(f"{path}: nested deeper than {MAX_NESTING} levels; expected a flat document")
    try:
        data = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    except _DuplicateKey as exc:
        line = _line_of_key(text, exc.key)
        loc = f"{path}:{line}" if line else str(path)
        raise ValidationError(f"{loc}: invalid JSON: duplicate key {exc.key!r}; each key may appear once") from exc
    except RecursionError as exc:  # the decoder's own bound on nesting, far below what would exhaust the stack
        raise deep from exc
    except ValueError as exc:
        raise ValidationError(f"{path}: invalid JSON: {exc}") from exc
    if _depth(data) > MAX_NESTING:
        raise deep
    return data


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _line_of_key(text: str, key: str) -> int | None:
    """The line of the second occurrence of a key (only on the error path)."""
    needle = json.dumps(key) + ":"
    squeezed = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line.replace('" :', '":')]
    return squeezed[1] if len(squeezed) > 1 else (squeezed[0] if squeezed else None)


def _depth(value: Any) -> int:
    """Deepest nesting of arrays and objects (1 for `[]`), walked without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            stack.extend((item, depth + 1) for item in (node.values() if isinstance(node, dict) else node))
    return deepest


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _find_bad_number(value: Any, parts: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], str] | None:
    """(path, problem) of the first bad number (`number_problem`) or text or key holding a control character."""
    if isinstance(value, str):
        problem = control_problem(value)
        return None if problem is None else (parts, f"{_short(value)} {problem}")
    problem = number_problem(value)
    if problem is not None:
        return parts, problem
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        problem = control_problem(key) if isinstance(key, str) else None  # list indices are ints
        if problem is not None:
            return (*parts, key), f"the key {_short(key)} {problem}"
        found = _find_bad_number(item, (*parts, key))
        if found is not None:
            return found
    return None


def validate(instance: Any, schema_name: str, where: Path | str, doc: Any = None) -> Any:
    """The typed object schemas/<schema_name>'s format builds; errors give file[:line], JSON path, what was expected."""
    from ..formats import adapter

    return _checked(adapter(schema_name), instance, schema_name, where, doc)


class Merged(NamedTuple):
    """A value params.yaml sets, laid into the document it belongs to."""

    parts: tuple[str, ...]  # its JSON path in the document
    value: Any
    at: Callable[[], str]  # where params.yaml writes it: `params.yaml:LINE: at $.<its path there>` (a line is
    # looked up only for an error: it needs the slow round-trip document)


# `place(document, path under the block, value)`: the value's JSON path in the document, or ValueError saying why not.
Place = Callable[[dict[str, Any], tuple[str, ...], Any], list[str]]


def params_overlay(data: Any, doc: Any, path: Path, block: tuple[str, ...], place: Place) -> list[Merged]:
    """Lay into the document of <root>/models/<folder>/<file> the numbers params.yaml sets under `block`
    (`(folder,)` or `(folder, file id)`): their one home, so `dvc exp run -S` varies them. A non-number, one
    `place` refuses and one the document also states are refused naming params.yaml's line and path."""
    params = checkout_params(path, block[0])
    if params is None or not isinstance(data, dict):
        return []
    pdata, pdoc = load_yaml(params)

    def line(parts: tuple[Any, ...]) -> str:
        return f"{params}:{_line_of(pdoc, list(parts))}"

    node = pdata
    for i in range(len(block) + 1):
        if node is None:
            return []
        if not isinstance(node, dict):
            raise ValidationError(f"{line(block[:i])}: at {json_path(block[:i])}: expected a mapping")
        if i == 1 and len(block) == 2:  # one block per file: a misspelt id (`dvc exp run -S`) would vary nothing
            known = sorted(p.stem for p in path.parent.glob("*.yaml"))
            for name in map(str, node):
                if name not in known:
                    close = did_you_mean(name, known)
                    raise ValidationError(
                        f"{line((block[0], name))}: at $.{block[0]}.{name}: no file models/{block[0]}/{name}.yaml"
                        + (f"; did you mean {' or '.join(close)}?" if close else "")
                        + f" (expected one of: {', '.join(known) or 'none'})"
                    )
        if i < len(block):
            node = node.get(block[i])
    merged: list[Merged] = []

    def walk(node: dict[Any, Any], parts: tuple[str, ...]) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, (*parts, str(key)))
                continue
            dotted = ".".join((*block, *parts, str(key)))
            at = (*block, *parts, key)

            def where(at: tuple[Any, ...] = at, dotted: str = dotted) -> str:
                return f"{line(at)}: at $.{dotted}"

            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValidationError(f"{where()}: expected a number, got {value!r}")
            try:
                target = place(data, (*parts, str(key)), value)
            except ValueError as e:
                raise ValidationError(f"{where()}: {e}") from None
            parent = data
            for k in target[:-1]:
                parent = parent.setdefault(k, {})
                if not isinstance(parent, dict):
                    raise ValidationError(f"{path}:{_line_of(doc, target)}: at {json_path(target)}: expected a mapping")
            if target[-1] in parent:
                raise ValidationError(
                    f"{path}:{_line_of(doc, target)}: at {json_path(target)}: also set in {line(at)} ({dotted}); "
                    f"a value lives in one place: remove it from {path.name}"
                )
            parent[target[-1]] = value
            merged.append(Merged(tuple(target), value, where))

    walk(node, ())
    return merged


def params_text(path: Path, block: tuple[str, ...], place: Place) -> str:
    """The file as it reads outside a checkout: the numbers params.yaml sets written into it."""
    text = path.read_text(encoding="utf-8")
    data, doc = load_yaml(path)
    lines = text.splitlines(keepends=True)
    inserts: dict[int, str] = {}
    for m in params_overlay(data, doc, path, block, place):
        i = (_line_of(doc, list(m.parts[:-1])) or 1) - 1
        if lines[i].rstrip().endswith(":"):
            below = lines[i + 1]
            inserts[i] = inserts.get(i, "") + f"{below[: len(below) - len(below.lstrip())]}{m.parts[-1]}: {m.value}\n"
        else:
            lines[i] = lines[i].replace("{", f"{{{m.parts[-1]}: {m.value}, ", 1)
    return "".join(line + inserts.get(i, "") for i, line in enumerate(lines))


def at_params(e: ValidationError, path: Path, merged: list[Merged]) -> ValidationError:
    """A document's error re-pointed at params.yaml's line when the value at fault was merged in from there."""
    where = {json_path(m.parts): m.at for m in merged}
    m = re.match(rf"^{re.escape(str(path))}(?::\d+)?: at (\$[\w.\[\]-]+): (.*)$", str(e), re.S)
    if m is None or m.group(1) not in where:
        return e
    return ValidationError(f"{where[m.group(1)]()}: {m.group(2)} (merged into {path} as {m.group(1)})")


def load_model(model: Any, instance: Any, schema_name: str, where: Path | str, doc: Any = None) -> Any:
    """`validate`, typed by the caller's `model` (the format that generates schemas/<schema_name>)."""
    return _checked(_adapter(model), instance, schema_name, where, doc)


@cache
def _adapter(model: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(model)


def _checked(adapter: Any, instance: Any, schema_name: str, where: Path | str, doc: Any) -> Any:
    from pydantic import ValidationError as PydanticError

    bad = _find_bad_number(instance)
    if bad is not None:
        line = _line_of(doc, list(bad[0])) if doc is not None else None
        loc = f"{where}:{line}" if line else f"{where}"
        raise ValidationError(f"{loc}: at {json_path(bad[0])}: {bad[1]}")
    try:
        return adapter.validate_python(instance)
    except PydanticError as exc:
        found: dict[tuple[str, str, str], tuple[list[Any], list[str]]] = {}
        for err in exc.errors(include_url=False):
            path, form, message, got = _explained(err, instance, schema_name)
            found.setdefault((json_path(path), form, got), (path, []))[1].append(message)
        # The members of a union of scalars (an integer or a number) fail at one path: one line says both.
        _raise([(p, f"{k[1]}{' or '.join(dict.fromkeys(m))}{k[2]}") for k, (p, m) in found.items()], where, doc)


def _explained(err: Any, instance: Any, schema_name: str) -> tuple[list[Any], str, str, str]:
    """Pydantic's error as (document path, the member named, message, the value at fault). Its location mixes
    keys with union members (which may share a key's name): the path is the reading that reaches the value."""
    loc = list(err["loc"])
    missing = err["type"] == "missing"
    walked = _walk(instance, loc[:-1] if missing else loc, err["input"], missing)
    path, members = walked if walked is not None else ([p for p in loc if not isinstance(p, str) or "[" not in p], [])
    path += loc[-1:] if missing else []
    if err["type"] == "union_tag_invalid" and str(err["ctx"]["discriminator"]).startswith("'"):
        path.append(err["ctx"]["discriminator"].strip("'"))  # the discriminating key, on its own line
    message = err["msg"]
    if err["type"] == "string_pattern_mismatch" and err["ctx"]["pattern"] in PATTERN_WORDS:
        message = f"expected {PATTERN_WORDS[err['ctx']['pattern']]}"
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(schema_name, loc[:-1])
        message += f"; expected only {', '.join(allowed)}" if allowed else ""
    got = "" if missing or err["type"] in ("extra_forbidden", "union_tag_invalid") else f" (got {_short(err['input'])})"
    return path, f"as `{members[-1]}`: " if members else "", message, got


def _walk(node: Any, loc: list[Any], target: Any, key_follows: bool) -> tuple[list[Any], list[str]] | None:
    """(document path, union members named on the way) of a reading of `loc` that ends at `target` (or at a key
    of it, when `key_follows`); None when none does."""
    if not loc:
        return ([], []) if node is target or node == target else None
    part, rest = loc[0], loc[1:]
    readings = []
    if (isinstance(node, dict) and part in node) or (
        isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
    ):
        readings.append(True)
    # A member named like the key it holds (`inference: {inference: …}`, `cite: […]`) is read as the member first.
    readings.insert(0 if rest[:1] == [part] else len(readings), False)
    for is_key in readings:
        found = _walk(node[part] if is_key else node, rest, target, key_follows)
        if found is not None and is_key:
            return [part, *found[0]], found[1]
        if found is not None:  # a member holding keys is a declared form, named
            named = isinstance(part, str) and "[" not in part and (found[0] or key_follows)
            return found[0], [part, *found[1]] if named else found[1]
    return None


def _allowed_keys(schema_name: str, loc: list[Any]) -> list[str]:
    """The keys an object at pydantic's location `loc` may hold, from the format's generated JSON Schema."""
    from ..formats import schema

    root = schema(schema_name)

    def deref(node: dict[str, Any]) -> dict[str, Any]:
        return root["$defs"][node["$ref"].removeprefix("#/$defs/")] if "$ref" in node else node

    node = root
    for part in loc:
        node = deref(node)
        mapping = node.get("discriminator", {}).get("mapping", {})
        if part in node.get("properties", {}):
            node = node["properties"][part]
        elif isinstance(part, int) and "items" in node:
            node = node["items"]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        elif part in mapping:  # a tagged member, by its tag
            node = {"$ref": mapping[part]}
        else:  # a member named by its title, or the one that is not null
            members = [deref(m) for m in node.get("oneOf", node.get("anyOf", []))]
            titled = [m for m in members if m.get("title") == part] or [m for m in members if m.get("type") != "null"]
            node = titled[0] if titled else {}
    return sorted(deref(node).get("properties", {}))


def _raise(found: list[tuple[list[Any], str]], where: Path | str, doc: Any) -> NoReturn:
    if doc is None and isinstance(where, Path) and where.suffix == ".json":
        # A JSON file read again as YAML (JSON is YAML 1.2) for its line numbers; only on the error path.
        with contextlib.suppress(ValidationError, OSError, ValueError):
            doc = load_yaml(where)[1]
    lines = []
    for parts, what in found[:10]:
        line = _line_of(doc, parts) if doc is not None else None
        loc = f"{where}:{line}" if line else f"{where}"
        lines.append(f"{loc}: at {json_path(parts)}: {what}")
    more = f"\n(and {len(found) - 10} more)" if len(found) > 10 else ""
    raise ValidationError("\n".join(lines) + more)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
