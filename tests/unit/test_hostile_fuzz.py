"""Fuzzing (hypothesis, bounded so it stays fast): the shipped declarative YAML files, pins JSON and nccl-tests
logs, mutated at random, and random bytes, give a result or a FabricrefError, never any other exception."""

from __future__ import annotations

import html
import os
import tempfile
from pathlib import Path

import pytest
from fabricref.compile.references import load_reference
from fabricref.core import pins
from fabricref.core.paths import Layout
from fabricref.core.sources import load_source
from fabricref.errors import FabricrefError
from fabricref.estimate import nccl_log
from fabricref.estimate.calibration import load_calibration_file
from fabricref.estimate.calibration import standalone_text as calibration_standalone_text
from fabricref.estimate.workloads import load_workload, standalone_text
from fabricref.topology.clusters import load_cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
LAY = Layout(ROOT)
# FABRICREF_FUZZ_EXAMPLES raises the count for a longer hunt; the default keeps the suite fast.
EXAMPLES = int(os.environ.get("FABRICREF_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Found by globbing: every shipped file of each kind is a seed for mutation.
YAML_SEEDS = {
    "sources": sorted(LAY.sources_dir.glob("*.yaml")),
    "references": sorted((ROOT / "models" / "references").glob("*.yaml")),
    "workloads": sorted((ROOT / "models" / "workloads").glob("*.yaml")),
    "clusters": sorted((ROOT / "models" / "clusters").glob("*.yaml")),
    "calibration": sorted((ROOT / "models" / "calibration").glob("*.yaml")),
}
PIN_SEEDS = sorted((LAY.sources_dir / "pins").glob("*.json"))
LOG_SEEDS = sorted((ROOT / "tests" / "fixtures" / "nccl").glob("*.log"))

# Characters that matter to the formats: YAML / JSON syntax, anchors, tags, digits, signs, quotes, newlines.
SYNTAX = "{}[]:,-&*!|>'\"#%@`?\\\n\t 0123456789.eE+-naNinfxyz_/#"
EDIT = st.tuples(st.integers(0, 1 << 16), st.integers(0, 12), st.text(alphabet=SYNTAX, max_size=12))


def _mutate(text: str, edits: list[tuple[int, int, str]]) -> str:
    for position, delete, insert in edits:
        at = position % (len(text) + 1)
        text = text[:at] + insert + text[at + delete :]
    return text


def _load_yaml_kind(kind: str, path: Path) -> None:
    if kind == "sources":
        load_source(path, LAY)
    elif kind == "references":
        load_reference(path, LAY)
    elif kind == "workloads":
        load_workload(path)
    elif kind == "clusters":
        load_cluster(path, lambda _ref: {})
    else:
        load_calibration_file(path)


def _only_fabricref_errors(action) -> None:
    try:
        action()
    except FabricrefError as exc:
        assert str(exc)  # a message the user can act on


@pytest.mark.slow
@SETTINGS
@given(
    kind=st.sampled_from(sorted(YAML_SEEDS)),
    pick=st.integers(0, 1000),
    edits=st.lists(EDIT, min_size=1, max_size=4),
)
def test_mutated_declarative_yaml_gives_a_result_or_a_clear_error(kind, pick, edits):
    seed = YAML_SEEDS[kind][pick % len(YAML_SEEDS[kind])]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / seed.name  # the file name is the id: keep it, so the mutations reach deeper
        # A workload's knobs live in params.yaml: the seed is the file as it reads standalone, knobs included.
        if kind == "workloads" or seed.name == "collectives.yaml":  # as it reads standalone, params.yaml's values in
            text = (standalone_text if kind == "workloads" else calibration_standalone_text)(seed)
        else:
            text = seed.read_text(encoding="utf-8")
        path.write_text(_mutate(text, edits), encoding="utf-8")
        _only_fabricref_errors(lambda: _load_yaml_kind(kind, path))


@SETTINGS
@given(kind=st.sampled_from(sorted(YAML_SEEDS)), data=st.binary(max_size=300))
def test_random_bytes_as_declarative_yaml_give_a_clear_error(kind, data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / YAML_SEEDS[kind][0].name
        path.write_bytes(data)
        _only_fabricref_errors(lambda: _load_yaml_kind(kind, path))


@SETTINGS
@given(pick=st.integers(0, 1000), edits=st.lists(EDIT, min_size=1, max_size=4), raw=st.binary(max_size=40))
def test_mutated_pins_give_a_result_or_a_clear_error(pick, edits, raw):
    seed = PIN_SEEDS[pick % len(PIN_SEEDS)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / seed.name
        path.write_text(_mutate(seed.read_text(encoding="utf-8"), edits), encoding="utf-8")
        _only_fabricref_errors(lambda: pins.load_file(path, seed.stem))
        path.write_bytes(raw + path.read_bytes())
        _only_fabricref_errors(lambda: pins.load_file(path, seed.stem))


@SETTINGS
@given(
    pick=st.integers(0, 1000),
    edits=st.lists(EDIT, min_size=1, max_size=4),
    op=st.sampled_from([None, *nccl_log.OPS]),
)
def test_mutated_nccl_logs_give_a_result_or_a_clear_error(pick, edits, op):
    seed = LOG_SEEDS[pick % len(LOG_SEEDS)]
    text = _mutate(seed.read_text(encoding="utf-8"), edits)
    _only_fabricref_errors(lambda: nccl_log.parse_text(text, seed.name, op))


@SETTINGS
@given(data=st.binary(max_size=400))
def test_random_bytes_as_an_nccl_log_give_a_clear_error(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "random.log"
        path.write_bytes(data)
        _only_fabricref_errors(lambda: nccl_log.parse_bytes(path.read_bytes(), str(path)))


def test_the_seeds_exist():
    assert all(YAML_SEEDS.values()) and PIN_SEEDS and LOG_SEEDS


def test_a_column_header_missing_a_column_is_refused_at_its_line():
    """Found by the fuzzer: a header cut short (or with `#wrong` misspelt) made every row a KeyError."""
    seed = LOG_SEEDS[0].read_text(encoding="utf-8").splitlines()
    number = next(i for i, line in enumerate(seed, start=1) if line.lstrip("#").split()[:2] == ["size", "count"])
    for cut in (" #wrong\n", "redop"):
        lines = list(seed)
        head, _, tail = lines[number - 1].rpartition(cut.strip())
        lines[number - 1] = head + tail
        try:
            nccl_log.parse_text("\n".join(lines), "x.log")
        except FabricrefError as exc:
            assert str(exc).startswith(f"x.log:{number}: the column header lacks "), exc
        else:
            raise AssertionError("a header missing a column was accepted")


# params.yaml: mutated, through every reader of it (workload knobs, calibration numbers, the step choice, the
# topology defaults), in a skeleton checkout holding the files those readers pair it with.
PARAMS_PARTS = ("params.yaml", "models/workloads", "models/calibration", "models/topology", "sources", "schemas")


def _params_checkout(tmp: str, text: str) -> Path:
    import shutil

    root = Path(tmp) / "repo"
    for part in PARAMS_PARTS:
        src, dest = ROOT / part, root / part
        if src.is_dir():
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("pins", "snapshots", "transcriptions", "measured"))
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
    (root / "params.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
    return root


def _read_params_everywhere(root: Path) -> None:
    from fabricref.estimate.calibration import load_calibration
    from fabricref.estimate.choices import load_step_choices
    from fabricref.topology.facts import defaults

    for path in sorted((root / "models" / "workloads").glob("*.yaml")):
        _only_fabricref_errors(lambda path=path: load_workload(path))
    _only_fabricref_errors(lambda: load_calibration(root))
    _only_fabricref_errors(lambda: load_step_choices(root))
    _only_fabricref_errors(lambda: defaults(Layout(root)))


PARAMS_TEXT = (ROOT / "params.yaml").read_text()
# Numbers params.yaml holds, and the values that broke it: huge degrees, subnormals, signs, other notations.
NUMBERS = st.sampled_from(["1000000000", "5e-324", "-1", "0", "1e308", "0x10", "1_000", "nan", ".inf", "7", "2**53"])


@pytest.mark.slow
@SETTINGS
@given(edits=st.lists(EDIT, min_size=1, max_size=4), number=NUMBERS, which=st.integers(0, 1000))
def test_mutated_params_yaml_gives_a_result_or_a_clear_error_in_every_reader(edits, number, which):
    import re

    values = list(re.finditer(r"(?m)^(\s+\w+: )([0-9.e+-]+)", PARAMS_TEXT))
    target = values[which % len(values)]
    text = PARAMS_TEXT[: target.start(2)] + number + PARAMS_TEXT[target.end(2) :]
    with tempfile.TemporaryDirectory() as tmp:
        _read_params_everywhere(_params_checkout(tmp, _mutate(text, edits)))


# Every numeric knob of params.yaml set to any number (tiny but normal, subnormal, huge, negative, NaN, whole
# numbers beyond 2**53): the reader of that knob takes it only within the accepted range, so nothing that
# divides by it overflows; anything else is refused naming params.yaml, its line and the knob.
def _knobs(text: str) -> list[tuple[int, str, int, int]]:
    """(line, the knob's JSON path, start and end of its number in `text`) for every numeric knob."""
    import re

    found, stack, offset = [], [], 0
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        key = re.match(r"^(\s*)([\w-]+):", line)
        if key:
            indent = len(key.group(1))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, key.group(2)))
            value = re.match(r"^\s*[\w-]+: ([0-9.e+-]+)\b", line)
            if value:
                path = "$." + ".".join(k for _i, k in stack)
                found.append((number, path, offset + value.start(1), offset + value.end(1)))
        offset += len(line)
    return found


KNOBS = _knobs(PARAMS_TEXT)


def _yaml_number(value: float | int) -> str:
    if isinstance(value, float) and value != value:
        return ".nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    return repr(value)


KNOB_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.sampled_from([1e-300, 5e-324, 2.2e-308, 1e300, 1e-12, 9.99e-13, 1e-9, 1e15, 2.0**53, 0.5, 0.0, -0.0]),
    st.integers(-(2**60), 2**60),
)


_SKELETON: list[tempfile.TemporaryDirectory[str]] = []


def _skeleton_with(text: str) -> Path:
    """One skeleton checkout for the whole run (made on first use), its params.yaml replaced by `text` with a
    new modification time (the readers cache by it)."""
    if not _SKELETON:
        _SKELETON.append(tempfile.TemporaryDirectory())
        _params_checkout(_SKELETON[0].name, PARAMS_TEXT)
    root = Path(_SKELETON[0].name) / "repo"
    params = root / "params.yaml"
    params.write_text(text, encoding="utf-8")
    stamp = params.stat().st_mtime_ns + len(_SKELETON) * 1000
    _SKELETON.append(_SKELETON[0])  # a counter, so every write gets its own time
    os.utime(params, ns=(stamp, stamp))
    return root


def _reader_of(root: Path, path: str):
    """The reader of the knob at `path` (`$.workloads.<id>.<knob>`, `$.calibration.…`, `$.step.…`,
    `$.topology.…`)."""
    from fabricref.estimate.calibration import load_calibration
    from fabricref.estimate.choices import load_step_choices
    from fabricref.topology.facts import defaults

    section = path.split(".")[1]
    if section == "workloads":
        return lambda: load_workload(root / "models" / "workloads" / f"{path.split('.')[2]}.yaml")
    return {
        "calibration": lambda: load_calibration(root),
        "step": lambda: load_step_choices(root),
        "topology": lambda: defaults(Layout(root)),
    }[section]


@SETTINGS
@given(which=st.integers(0, len(KNOBS) - 1), value=KNOB_VALUES)
def test_every_params_yaml_knob_is_taken_only_in_its_range_or_refused_naming_it(which, value):
    import re

    from fabricref.core.schemas import number_problem

    line, path, start, end = KNOBS[which]
    root = _skeleton_with(PARAMS_TEXT[:start] + _yaml_number(value) + PARAMS_TEXT[end:])
    try:
        _reader_of(root, path)()
    except FabricrefError as exc:
        # The knob at its line; or, for a rule between a workload's knobs (ep must divide dp × tp), another
        # knob of the same workload at its line.
        sibling = path.rsplit(".", 1)[0] if path.startswith("$.workloads.") else path
        assert f"params.yaml:{line}: at {path}" in str(exc) or re.search(
            rf"params\.yaml:\d+: at {re.escape(sibling)}\.\w+: ", str(exc)
        ), (path, value, str(exc))
        return
    assert number_problem(value) is None, f"{path}: {value!r} was taken"


# `fabricref new reference`: random ids, titles, form factors and kinds give a reference that loads and compiles
# as written, or bad usage; never another exception, never a half-written checkout.
TITLE_TEXT = st.text(
    alphabet=st.sampled_from(
        [*"Acme X1 -—&#;x1bB27", "\x1b", "\x07", "\n", "\t", "\u202e", "\x9b", " ", "é", "$", "\u200b", "\ufeff"]
    ),
    max_size=24,
)
ID_TEXT = st.text(alphabet=st.sampled_from([*"acme-x1", "/", ".", "A", " ", "\n", "_"]), min_size=1, max_size=12)


@SETTINGS
@given(
    ref_id=ID_TEXT,
    title=TITLE_TEXT,
    form_factor=st.sampled_from(["server", "rack", "cluster", "switch", "nic", "gpu", ""]),
    kind=st.sampled_from(["vendor", "illustrative", "other"]),
)
def test_new_reference_inputs_give_a_loadable_reference_or_bad_usage(ref_id, title, form_factor, kind):
    import json
    import shutil

    from fabricref.core.text import control_problem
    from fabricref.errors import UsageError
    from fabricref.inspect.new import new_reference

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        (root / "sources").mkdir(parents=True)
        shutil.copytree(ROOT / "schemas", root / "schemas")
        (root / "models" / "references").mkdir(parents=True)
        shutil.copyfile(ROOT / "models" / "identities.json", root / "models" / "identities.json")
        lay = Layout(root)
        before = sorted(p.relative_to(root) for p in root.rglob("*"))
        try:
            written = new_reference(lay, ref_id, form_factor, title, kind)
        except UsageError:
            assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # nothing half-written
            return
        assert all(p.is_file() for p in written)
        identity = json.loads((root / "models" / "identities.json").read_text())["references"][ref_id]
        assert identity == {"kind": kind, "title": title}
        assert control_problem(title, layout_ok=False) is None and title.strip()
        # As a page reads it (its character references decoded), still one line of plain visible text.
        assert "&#" not in title and control_problem(html.unescape(title), layout_ok=False) is None
        assert html.unescape(title).strip()
        assert load_reference(root / "models" / "references" / f"{ref_id}.yaml", lay).title == title


def test_a_sign_and_an_underscore_are_malformed_yaml_not_an_index_error(tmp_path):
    """Found by the fuzzer: ruamel's integer constructor indexed past the end of `+_`."""
    import pytest

    path = tmp_path / "collectives.yaml"
    path.write_bytes(b"+_")
    with pytest.raises(FabricrefError, match="malformed YAML"):
        load_calibration_file(path)
