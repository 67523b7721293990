"""The collective calibration (models/calibration/collectives.yaml): efficiencies and latencies as data, each
number with its status and provenance, so an estimate can say which statements it rests on and how firmly."""

from __future__ import annotations

import math
import re
from functools import cache
from pathlib import Path
from typing import Any

from ..core.paths import PARAMS_FILE, checkout_params
from ..core.schemas import _line_of, json_path, load_json, load_model, load_yaml
from ..errors import ValidationError
from ..formats.calibration import CALIBRATION_PATH, SHA_RE, Calibration

# The assumed numbers people vary live in the checkout's params.yaml under `calibration`, at the same
# path as in the calibration file (`calibration.link_classes.nvlink5.efficiency`), so `dvc params diff` shows
# them and `dvc exp run -S` varies them; the file keeps each one's status and note. Only a number no source states
# (status assumed) may live there: a published or measured number stays beside its source. Never both places.
PARAMS_KEY = "calibration"


def params_numbers(path: Path) -> tuple[dict[tuple[str, ...], float], Path | None, Any]:
    """The numbers params.yaml sets for the calibration file at `path`: {path parts: value}, the params file and
    its document (for line numbers); empty when there is no params.yaml or it has no `calibration`."""
    params = checkout_params(path, "calibration")
    if params is None:
        return {}, None, None
    data, doc = load_yaml(params)
    block = data.get(PARAMS_KEY) if isinstance(data, dict) else None
    if block is None:
        return {}, params, doc
    out: dict[tuple[str, ...], float] = {}

    def walk(node: Any, parts: tuple[str, ...]) -> None:
        at = f"{params}:{_line_of(doc, [PARAMS_KEY, *parts])}: at $.{'.'.join((PARAMS_KEY, *parts))}"
        if isinstance(node, dict) and node:
            for key, value in node.items():
                walk(value, (*parts, str(key)))
            return
        if isinstance(node, bool) or not isinstance(node, (int, float)) or not math.isfinite(node) or node < 0:
            raise ValidationError(
                f"{at}: expected a number ≥ 0 (a mapping shaped like {CALIBRATION_PATH}, ending in the numbers it "
                f"sets), got {node!r}"
            )
        if parts[-1] == "efficiency" and not 0 < node <= 1:
            raise ValidationError(f"{at}: an efficiency is a fraction of line rate in (0, 1], got {node!r}")
        out[parts] = node

    walk(block, ())
    return out, params, doc


def _merge_params(data: Any, doc: Any, path: Path) -> None:
    """Put params.yaml's numbers into the calibration document; refuse a number set in both places, a path the
    file does not hold, and a number that has a source (published or measured)."""
    numbers, params, pdoc = params_numbers(path)
    if not numbers or not isinstance(data, dict):
        return
    for parts, value in numbers.items():
        set_at = f"{params}:{_line_of(pdoc, [PARAMS_KEY, *parts])}"
        at = f"{set_at}: at $.{'.'.join((PARAMS_KEY, *parts))}"
        node: Any = data
        for part in parts:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or "status" not in node:
            raise ValidationError(
                f"{at}: {CALIBRATION_PATH} holds no number at $.{'.'.join(parts)} (expected the path of an assumed "
                "number there, e.g. link_classes.nvlink5.efficiency)"
            )
        if node.get("status") != "assumed":
            raise ValidationError(
                f"{at}: the number is `{node.get('status')}` in {CALIBRATION_PATH}: a number with a source stays "
                "beside it; params.yaml holds only assumed numbers (status assumed)"
            )
        if "value" in node:
            raise ValidationError(
                f"{_where(path, doc, [*parts, 'value'])}: at $.{'.'.join(parts)}.value: also set in {set_at} "
                f"({PARAMS_KEY}.{'.'.join(parts)}); a number lives in one place: remove it from the calibration file"
            )
        node["value"] = value


def standalone_text(path: Path) -> str:
    """The calibration file as it reads outside a checkout: the numbers params.yaml sets written back in (a
    block mapping gains a `value:` line, a flow mapping a leading `value: X,`)."""
    text = path.read_text(encoding="utf-8")
    numbers = params_numbers(path)[0]
    if not numbers:
        return text
    _, doc = load_yaml(path)
    lines = text.splitlines(keepends=True)
    inserts: dict[int, str] = {}
    for parts, value in numbers.items():
        i = (_line_of(doc, list(parts)) or 1) - 1
        line = lines[i]
        if line.rstrip().endswith(":"):
            following = lines[i + 1]
            indent = following[: len(following) - len(following.lstrip())]
            inserts[i] = f"{indent}value: {value}\n"
        else:
            lines[i] = line.replace("{", f"{{value: {value}, ", 1)
    return "".join(line + inserts.get(i, "") for i, line in enumerate(lines))


def load_calibration_file(path: Path) -> Calibration:
    """Parse, merge the numbers params.yaml sets, and validate (pipeline/formats/calibration.py); every error names
    file:line, the JSON path and what was expected."""
    data, doc = load_yaml(path)
    _merge_params(data, doc, path)
    cal: Calibration = load_model(Calibration, data, "calibration.schema.json", path, doc)
    for dotted, n in cal.numbers():
        if n.source is not None and n.source not in cal.sources:
            parts = [*dotted.split("."), "source"]
            raise ValidationError(
                f"{_where(path, doc, parts)}: at {json_path(parts)}: source {n.source!r} is not declared under "
                f"`sources` (declared: {', '.join(sorted(cal.sources))})"
            )
    _check_measured(cal, path, doc)
    return cal


def _check_measured(cal: Calibration, path: Path, doc: object) -> None:
    """A number `measured` must name a measured log the checkout has pinned (sources/measured/, its bytes in the
    store): a status is a claim, and an estimate's confidence rises with it. Pins are read only when a measured
    number is declared."""
    measured = [(dotted, n) for dotted, n in cal.numbers() if n.status == "measured"]
    if not measured:
        return
    root = (
        path.parent.parent.parent if path.parent.name == "calibration" and path.parent.parent.name == "models" else None
    )
    pinned: set[str] = set()
    if root is not None and (root / "sources" / "measured").is_dir():
        for pin in sorted((root / "sources" / "measured").glob("*.json")):
            data = load_json(pin)
            sha = data.get("sha256") if isinstance(data, dict) else None
            if isinstance(sha, str) and re.fullmatch(SHA_RE, sha) and _stored(root, sha):
                pinned.add(sha)
    for dotted, n in measured:
        if n.measured_sha256 not in pinned:
            parts = [*dotted.split("."), "measured_sha256"]
            where = "sources/measured/" if root is None else f"{root / 'sources' / 'measured'}/"
            raise ValidationError(
                f"{_where(path, doc, parts)}: at {json_path(parts)}: {n.measured_sha256} names no measured log pinned "
                f"in {where} with its bytes in the store; a number is `measured` only with the log it was read from "
                "(pin it with `fabricref measured import`, or declare the number assumed with a note)"
            )


def _stored(root: Path, sha: str) -> bool:
    return (root / "sources" / "snapshots" / "sha256" / sha[:2] / sha).is_file()


def _where(path: Path, doc: object, parts: list[object]) -> str:
    line = _line_of(doc, list(parts))
    return f"{path}:{line}" if line else str(path)


@cache
def _cached(path: str, mtime_ns: int, params_mtime_ns: int, measured_mtime_ns: int) -> Calibration:
    return load_calibration_file(Path(path))


def load_calibration(root: Path) -> Calibration:
    path = root / CALIBRATION_PATH
    try:
        stamp = path.stat().st_mtime_ns
    except FileNotFoundError:
        raise ValidationError(f"{path}: calibration file not found") from None
    params = root / PARAMS_FILE
    pins = root / "sources" / "measured"  # a pin added or removed changes what a measured number may name
    return _cached(
        str(path),
        stamp,
        params.stat().st_mtime_ns if params.is_file() else 0,
        pins.stat().st_mtime_ns if pins.is_dir() else 0,
    )
