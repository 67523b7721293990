"""The report's drawing cache: a stored SVG is reused only for exactly the same call under the same environment;
anything else (another argument, another code or library version, a damaged entry) is drawn afresh."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import jinja2
import pytest
from fabricref.core import code, keyed
from fabricref.core.paths import Layout
from fabricref.report import drawcache, heat, stage
from fabricref.report.cells import Cell
from fabricref.report.drawcache import DrawingCache

CELLS = [Cell("NIC–leaf", 0, 0.4, 16), Cell("leaf–spine", 1, 0.9, 4)]
DRAWING = "heat.draw_tier_pod_load"


FIXED = {"code_sha256": "0" * 64}  # a stand-in environment where the test is not about it (the real one: 0.2 s)


def _cache(tmp_path: Path, environment: dict | None = FIXED) -> DrawingCache:
    if environment is None:  # the real one, as the stage computes it
        return DrawingCache(Layout(tmp_path), "pages")
    return DrawingCache(Layout(tmp_path), "pages", environment=lambda: environment)


def _entries(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / ".fabricref-cache" / "report").rglob(f"*{keyed.ENTRY_SUFFIX}"))


def test_a_second_identical_call_is_a_hit_with_the_fresh_drawings_bytes(tmp_path):
    fresh = heat.draw_tier_pod_load("c", CELLS, 2)
    cache = _cache(tmp_path, None)
    assert cache.draw(DRAWING, "c", CELLS, 2) == fresh
    assert (cache.hits, cache.misses) == (0, 1) and len(_entries(tmp_path)) == 1
    again = _cache(tmp_path, None)  # a new run: only what is on disk is shared
    assert again.draw(DRAWING, "c", CELLS, 2) == fresh
    assert (again.hits, again.misses) == (1, 0)


@pytest.mark.parametrize(
    "changed",
    [
        ("c2", CELLS, 2),  # the title
        ("c", CELLS, 3),  # the pod count
        ("c", [CELLS[0], Cell("leaf–spine", 1, math.nextafter(0.9, 1.0), 4)], 2),  # one ulp in one utilisation
        ("c", [CELLS[0], Cell("leaf–spine", 1, 0.9, 5)], 2),  # one link more
        ("c", list(reversed(CELLS)), 2),  # the order a drawing receives its items in
    ],
)
def test_any_changed_argument_misses(tmp_path, changed):
    cache = _cache(tmp_path)
    cache.draw(DRAWING, "c", CELLS, 2)
    # A miss (a second entry), even where the drawing would look the same (one ulp, another order).
    assert cache.draw(DRAWING, *changed) == heat.draw_tier_pod_load(*changed)
    assert (cache.hits, cache.misses) == (0, 2) and len(_entries(tmp_path)) == 2


@dataclasses.dataclass(frozen=True)
class _OtherCell:
    """Cell's fields under another class: a drawing may tell the two apart (by type, by methods)."""

    tier: str
    pod: int | None
    peak: float
    links: int


def test_values_that_compare_equal_in_python_are_keyed_apart(tmp_path):
    """Equal in Python yet drawn differently: 1, 1.0 and True; a tuple and a list; a dict's order; 0.0 and -0.0
    (a label says "-0"); one dataclass's fields under another class."""
    cache = _cache(tmp_path, {"env": 1})
    other = _OtherCell(*dataclasses.astuple(CELLS[0]))
    assert dataclasses.astuple(other) == dataclasses.astuple(CELLS[0])
    values = (1, 1.0, True, (1,), [1], {"a": 1, "b": 2}, {"b": 2, "a": 1}, 0.0, -0.0, CELLS[0], other)
    keys = [cache.key("x", (v,)) for v in values]
    assert None not in keys and len({repr(k) for k in keys}) == len(keys)
    assert cache.key("x", (object(),)) is None  # not exactly keyable: drawn every time, never stored
    assert cache.key("x", (type("Text", (str,), {})("a"),)) is None  # a subclass may draw otherwise: not keyed


def test_equal_values_key_alike_whichever_objects_hold_them(tmp_path):
    """The key is of the values alone: one list passed twice keys as two equal lists (rows read in another run
    are other objects), and a dataclass by its class and fields."""
    cache = _cache(tmp_path, {"env": 1})
    row = {"node": "gpu0", "x": 0.5}
    assert cache.key("x", ([row, row], row)) == cache.key("x", ([dict(row), dict(row)], {"node": "gpu0", "x": 0.5}))
    assert cache.key("x", (CELLS,)) == cache.key("x", ([Cell("NIC–leaf", 0, 0.4, 16), Cell("leaf–spine", 1, 0.9, 4)],))
    assert cache.key("x", (CELLS,)) != cache.key("x", ([Cell("NIC–leaf", 0, 0.4, 16)],))


def test_another_environment_misses(tmp_path):
    old = _cache(tmp_path, {"code": {"heat.py": "aaa"}, "matplotlib": "3.11.2"})
    old.draw(DRAWING, "c", CELLS, 2)
    for environment in ({"code": {"heat.py": "bbb"}, "matplotlib": "3.11.2"}, {"code": {"heat.py": "aaa"}}):
        new = _cache(tmp_path, environment)
        new.draw(DRAWING, "c", CELLS, 2)
        assert (new.hits, new.misses) == (0, 1)
    assert len(_entries(tmp_path)) == 3


def test_the_environment_is_the_stages_code_fingerprint_the_libraries_settings_and_font():
    env = drawcache._environment()
    root = Path(drawcache.__file__).parents[2]
    listed = code.fingerprint("fabricref.report", root)
    assert env["code_sha256"] == hashlib.sha256(listed).hexdigest()
    # The fingerprint covers the drawing modules the stage imports only on a miss, and what they import.
    assert {"pipeline/report/heat.py", "pipeline/report/drawings.py", "pipeline/report/cells.py"} <= set(
        line.split("  ", 1)[1] for line in listed.decode().splitlines()
    )
    assert env["matplotlib"] and env["numpy"] and env["pyparsing"] and len(env["rcparams_sha256"]) == 64
    assert env["freetype"].count(".") == 2  # e.g. "2.6.1"
    assert env["font"]["name"].endswith(".ttf") and len(env["font"]["sha256"]) == 64


def test_a_damaged_or_foreign_entry_is_redrawn_and_replaced(tmp_path):
    fresh = heat.draw_tier_pod_load("c", CELLS, 2)
    _cache(tmp_path).draw(DRAWING, "c", CELLS, 2)
    (entry,) = _entries(tmp_path)
    entry.write_bytes(entry.read_bytes() + b"<!-- appended -->")  # the SVG no longer matches its digest
    cache = _cache(tmp_path)
    assert cache.draw(DRAWING, "c", CELLS, 2) == fresh and cache.misses == 1
    # An intact entry stored under another call's file name is not taken for this call.
    other = _cache(tmp_path)
    other.draw(DRAWING, "other", CELLS, 2)
    (other_entry,) = set(_entries(tmp_path)) - {entry}
    os.replace(other_entry, entry)
    again = _cache(tmp_path)
    assert again.draw(DRAWING, "c", CELLS, 2) == fresh and again.misses == 1
    assert _cache(tmp_path).draw(DRAWING, "c", CELLS, 2) == fresh  # and the entry was replaced by a good one


def test_a_run_keeps_only_the_entries_it_used_in_its_own_part(tmp_path):
    first = _cache(tmp_path)
    first.draw(DRAWING, "a", CELLS, 2)
    first.draw(DRAWING, "b", CELLS, 2)
    models = DrawingCache(Layout(tmp_path), "models", environment=lambda: FIXED)
    models.draw(DRAWING, "a", CELLS, 2)
    models.prune()
    second = _cache(tmp_path)
    second.draw(DRAWING, "b", CELLS, 2)
    second.draw(DRAWING, "c", CELLS, 2)
    second.prune()
    assert (second.hits, second.misses) == (1, 1)
    kept = {p.parent.name for p in _entries(tmp_path)}, len(_entries(tmp_path))
    assert kept == ({"models", "pages"}, 3)  # models' one, pages' "b" and "c"; pages' "a" is gone
    third = _cache(tmp_path)
    third.draw(DRAWING, "a", CELLS, 2)
    assert third.misses == 1


def test_an_unwritable_cache_still_draws(tmp_path):
    (tmp_path / ".fabricref-cache").write_text("a file where the cache directory would be")
    cache = _cache(tmp_path)
    fresh = heat.draw_tier_pod_load("c", CELLS, 2)
    assert cache.draw(DRAWING, "c", CELLS, 2) == fresh and cache.draw(DRAWING, "c", CELLS, 2) == fresh
    assert (cache.hits, cache.misses) == (0, 2)


@pytest.mark.slow
@pytest.mark.cold_pipeline  # a `dvc exp run` in the same clone redraws the report and prunes the cache to its run
def test_a_rerun_from_the_cache_writes_the_cold_runs_bytes(built_pipeline: Path):
    """`dvc repro` in a fresh clone drew everything (its cache started empty); the report built again from the
    cache it left is byte for byte the same, and no entry was drawn again."""
    from fabricref.report import stage

    report = built_pipeline / "registry" / "report"
    before = {p.relative_to(report): p.read_bytes() for p in sorted(report.rglob("*")) if p.is_file()}
    entries = _entries(built_pipeline)
    assert len(entries) >= len([p for p in before if p.suffix == ".svg"])
    stamps = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in entries}
    stage.run(Layout(built_pipeline))
    after = {p.relative_to(report): p.read_bytes() for p in sorted(report.rglob("*")) if p.is_file()}
    assert after == before
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in _entries(built_pipeline)} == stamps


# Runs in a fresh interpreter: the pytest process (an xdist worker) runs threads, and nothing is forked then.
PREFETCH_SCRIPT = """
import os, sys
from pathlib import Path
from fabricref.core.keyed import sha256_json
from fabricref.core.paths import Layout
from fabricref.report import drawcache

lay, parent = Layout(Path(sys.argv[1])), os.getpid()
real = drawcache.DrawingCache(lay, "all")
real.prefetch()
print("forked" if real._prefetch else "not forked", real.environment_sha256() == sha256_json(drawcache._environment()))
where = drawcache.DrawingCache(lay, "all", environment=lambda: {"pid": os.getpid()})
where.prefetch()
print(where.environment_sha256() != sha256_json({"pid": parent}))  # computed in the child
def fails_in_child():
    if os.getpid() != parent:
        raise RuntimeError("the child fails")
    return {"pid": parent}
failing = drawcache.DrawingCache(lay, "all", environment=fails_in_child)
failing.prefetch()
print(failing.environment_sha256() == sha256_json({"pid": parent}))  # computed here instead
unused = drawcache.DrawingCache(lay, "all")
unused.prefetch()
unused.close()
try:
    os.waitpid(-1, os.WNOHANG)
    print("a child is left")
except ChildProcessError:
    print("no child left")
"""


def test_the_environment_computed_in_a_forked_child_is_this_processs_own(tmp_path):
    """`prefetch` computes the environment's digest in a child while the stage reads its tables: the same digest
    as computed here; a child that fails leaves it to this process; `close` ends a child never asked."""
    env = {**os.environ, "PYTHONPATH": str(Path(drawcache.__file__).parents[2])}
    done = subprocess.run(
        [sys.executable, "-c", PREFETCH_SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    forked = "forked" if len(os.sched_getaffinity(0)) > 1 else "not forked"
    assert done.stdout.split("\n") == [f"{forked} True", str(forked == "forked"), "True", "no child left", ""]


def _compiled_env(store: keyed.KeyedCache, source: str, **settings) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.DictLoader({"page.html.j2": source}),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        bytecode_cache=stage._CompiledTemplates(store),
        **settings,
    )


def test_compiled_templates_are_reused_only_for_the_same_source_and_settings(tmp_path):
    """A template's compiled code comes back from the keyed cache for the same source under the same settings and
    renders the same text; another source, a setting the compiler reads (whitespace, autoescape) or a damaged entry
    compiles afresh."""
    source = "{% if x %}\n  <b>{{ x }}</b>\n{% endif %}\n"
    store = keyed.KeyedCache(tmp_path / "templates")

    def render(text: str = source, **settings) -> str:
        return _compiled_env(store, text, **settings).get_template("page.html.j2").render(x="a<b")

    fresh = render()
    assert fresh == "\n  <b>a&lt;b</b>\n" and (store.hits, store.misses) == (0, 1)
    assert render() == fresh and (store.hits, store.misses) == (1, 1)
    assert render(trim_blocks=True) == "  <b>a&lt;b</b>\n" and store.misses == 2  # compiled again
    assert render(source.replace("<b>", "<i>")) == "\n  <i>a&lt;b</b>\n" and store.misses == 3
    raw = jinja2.Environment(
        loader=jinja2.DictLoader({"page.html.j2": source}), bytecode_cache=stage._CompiledTemplates(store)
    )
    assert raw.get_template("page.html.j2").render(x="a<b") == "\n  <b>a<b</b>\n"  # not escaped: its own entry
    assert store.misses == 4
    for entry in sorted(store.directory.glob(f"*{keyed.ENTRY_SUFFIX}")):
        entry.write_bytes(entry.read_bytes()[:-3])  # torn: fails its digest
    misses = store.misses
    assert render() == fresh and store.misses == misses + 1


def test_a_filter_of_our_own_is_never_baked_into_a_kept_template(tmp_path):
    """jinja2's optimizer runs a filter on constant arguments at compile time, so its result is in the compiled
    code; the compiled-template key holds no filter's code. An environment with a filter (or test, policy, finalize
    hook) of its own is compiled afresh and nothing is kept: the filter's new code shows at once."""
    store = keyed.KeyedCache(tmp_path / "templates")

    def render(size: Callable[[int], str]) -> str:
        env = _compiled_env(store, "Total: {{ 1536 | size }}")
        env.filters["size"] = size
        return env.get_template("page.html.j2").render()

    assert render(lambda n: f"{n / 1024:g} KiB") == "Total: 1.5 KiB"
    assert render(lambda n: f"{n / 1000:g} kB") == "Total: 1.536 kB"  # the filter fixed, the template not
    assert not list(store.directory.glob(f"*{keyed.ENTRY_SUFFIX}"))
    assert stage._CompiledTemplates._keyable(stage._env())  # the report's own environment is still kept
