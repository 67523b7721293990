"""The traffic stage's item cache (issue 16): one DVC stage, each workload on each of its targets, each sharing
pair on each target both name and the KV curve cached under a key of everything that shapes it
(pipeline/core/keyed.py, pipeline/traffic/batch.py).

- The store: an entry is used only for exactly its key and only while its payload matches its digest; a corrupt,
  truncated or foreign entry is a miss, never a wrong hit; an unwritable cache is not an error.
- The keys, input by input: which items each edit invalidates, checked by hand against what each item reads.
- The stage: a changed knob recomputes that workload's items and the pairs it is in, nothing else, and the outputs
  equal those computed cold with the changed knob; outputs with cache hits, on one worker or two, are
  byte-identical to outputs computed cold without the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from fabricref.core import keyed
from fabricref.core.code import import_closure
from fabricref.core.keyed import KeyedCache
from fabricref.core.paths import Layout
from fabricref.errors import UsageError
from fabricref.estimate.workloads import find_workload, workload_paths
from fabricref.traffic import batch

# -- the store -----------------------------------------------------------------------------------------------------


def test_an_entry_is_read_back_for_its_key_only(tmp_path: Path):
    cache = KeyedCache(tmp_path / "c")
    key = {"item": "workload", "id": "w", "x": 1.5}
    assert cache.read(key) is None and (cache.hits, cache.misses) == (0, 1)
    cache.write(key, b"payload\nwith a newline")
    assert cache.read(key) == b"payload\nwith a newline"
    assert cache.read({**key, "x": 1.25}) is None  # any other value: another key
    assert cache.read(dict(reversed(key.items()))) == b"payload\nwith a newline"  # the same key, other dict order
    assert (cache.hits, cache.misses) == (2, 2)


def test_a_corrupt_truncated_or_foreign_entry_is_a_miss(tmp_path: Path):
    cache = KeyedCache(tmp_path / "c")
    key = {"id": "w"}
    cache.write(key, b"0123456789")
    path = cache.path(key)
    good = path.read_bytes()
    path.write_bytes(good[:-1] + b"X")  # one byte of the payload changed: its digest no longer matches
    assert cache.read(key) is None
    path.write_bytes(good[:-3])  # torn
    assert cache.read(key) is None
    path.write_bytes(good.split(b"\n")[0])  # the header alone
    assert cache.read(key) is None
    path.write_bytes(b"not json\n0123456789")
    assert cache.read(key) is None
    # An entry of another key stored under this name (a name collision, or a file copied over): not this key's.
    other = KeyedCache(tmp_path / "d")
    other.write({"id": "v"}, b"0123456789")
    path.write_bytes(other.path({"id": "v"}).read_bytes())
    assert cache.read(key) is None
    cache.write(key, b"0123456789")
    assert cache.read(key) == b"0123456789"
    assert not list(cache.directory.glob(".entry.*.tmp"))  # no temporary file left behind


def test_an_unwritable_cache_is_not_an_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the directory would be")
    cache = KeyedCache(blocker / "traffic")
    cache.write({"id": "w"}, b"x")
    assert cache.read({"id": "w"}) is None


def test_prune_keeps_this_runs_entries_and_the_most_recent_others(tmp_path: Path):
    first = KeyedCache(tmp_path / "c")
    for i in range(5):
        first.write({"i": i}, b"x")
        os.utime(first.path({"i": i}), ns=(10**18 + i, 10**18 + i))  # entry i written i ns after the first
    run = KeyedCache(tmp_path / "c")
    assert run.read({"i": 0}) == b"x"  # used by this run, though the oldest
    run.prune(keep_unused=2)
    assert [run.read({"i": i}) is not None for i in range(5)] == [True, False, False, True, True]


def test_library_versions_come_from_the_installed_metadata():
    found = keyed.library_versions(["numpy", "no-such-distribution-fabricref"])
    import numpy

    assert found["numpy"] == numpy.__version__ and found["no-such-distribution-fabricref"] is None
    assert found["python"].startswith(".".join(map(str, __import__("sys").version_info[:2])))


# -- the keys, input by input -------------------------------------------------------------------------------------

PAIR = ("llama70b-train-tp8-pp4-dp32", "llama70b-serve-disaggregated")  # models/workloads: shares_with


def _keys(lay: Layout) -> dict[str, str]:
    workloads = {p.stem: find_workload(lay, p.stem) for p in workload_paths(lay)}
    return {item.name: keyed.sha256_json(item.key) for item in batch.items(lay, workloads)}


def _named(lay: Layout, kind: str, wid: str) -> list[str]:
    """The names of a workload's items (one per target) or of its sharing pair's (one per target both name), from
    the workload files."""
    w = find_workload(lay, wid)
    if kind == "workload":
        return [f"workload {wid} @ {t}" for t in w.targets]
    other = find_workload(lay, str(w.shares_with))
    return [f"sharing {wid} @ {t}" for t in w.targets if t in other.targets]


def _moved(before: dict[str, str], after: dict[str, str]) -> list[str]:
    assert sorted(before) == sorted(after)
    return sorted(name for name in before if before[name] != after[name])


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


@pytest.fixture
def keyed_repo(repo: Layout) -> Layout:
    """A copy of the checkout with stand-in bytes for the topology and fact tables (the keys hash their bytes;
    nothing here reads them as tables)."""
    for name in batch.TOPOLOGY_INPUTS:
        (repo.registry_dir / "topology").mkdir(parents=True, exist_ok=True)
        (repo.registry_dir / "topology" / f"{name}.parquet").write_bytes(name.encode())
    for name in batch.FACT_INPUTS:
        (repo.registry_dir / "tables").mkdir(parents=True, exist_ok=True)
        (repo.registry_dir / "tables" / f"{name}.parquet").write_bytes(name.encode())
    return repo


def test_the_items_are_every_workload_on_every_target_every_pair_and_the_curve(keyed_repo: Layout):
    names = sorted(_keys(keyed_repo))
    workloads = sorted(p.stem for p in (ROOT / "models" / "workloads").glob("*.yaml"))
    per_target = [n for w in workloads for n in _named(keyed_repo, "workload", w)]
    assert len(per_target) > len(workloads)  # the shipped workloads name several targets each
    assert names == sorted([*per_target, *_named(keyed_repo, "sharing", PAIR[0]), "KV-transfer curve"])
    # Every item has a key of its own: no (workload, target) result can be read back for another target.
    assert len(set(_keys(keyed_repo).values())) == len(names)


def test_a_workload_knob_or_file_moves_that_workload_and_its_pairs_only(keyed_repo: Layout):
    root = keyed_repo.root
    before = _keys(keyed_repo)
    _edit(root / "params.yaml", "    dp: 512\n", "    dp: 256\n")  # llama70b-train-tp8-dp512: in no pair
    moved = _named(keyed_repo, "workload", "llama70b-train-tp8-dp512")
    assert len(moved) == 2 and _moved(before, after := _keys(keyed_repo)) == moved  # its two targets, nothing else
    # The disaggregated serving workload shares a cluster with the pipeline-parallel training: its items and the
    # pair's move.
    pair = _named(keyed_repo, "sharing", PAIR[0])
    _edit(root / "models" / "workloads" / f"{PAIR[1]}.yaml", "\n", "\n# a comment is bytes too\n")
    assert _moved(after, again := _keys(keyed_repo)) == sorted([*pair, *_named(keyed_repo, "workload", PAIR[1])])
    _edit(root / "models" / "workloads" / f"{PAIR[0]}.yaml", "\n", "\n# and here\n")
    assert _moved(again, _keys(keyed_repo)) == sorted([*pair, *_named(keyed_repo, "workload", PAIR[0])])


def test_the_step_choices_move_every_workload_but_not_the_pairs_or_the_curve(keyed_repo: Layout):
    before = _keys(keyed_repo)
    _edit(keyed_repo.root / "params.yaml", "  memory_headroom: 0.0\n", "  memory_headroom: 0.1\n")
    assert _moved(before, _keys(keyed_repo)) == sorted(n for n in before if n.startswith("workload "))


@pytest.mark.parametrize(
    "edit",
    [
        ("params.yaml", "      efficiency: 0.94 ", "      efficiency: 0.8  "),  # calibration in params.yaml
        ("models/calibration/collectives.yaml", "\n", "\n# bytes of the calibration file\n"),
        ("registry/topology/topology_edges.parquet", "topology_edges", "other edges"),
        ("registry/topology/topology_summaries.parquet", "topology_summaries", "other summaries"),
        ("registry/tables/fields.parquet", "fields", "other fields"),
        ("registry/tables/parameters.parquet", "parameters", "other parameters"),
    ],
)
def test_the_calibration_and_every_data_input_move_every_item(keyed_repo: Layout, edit: tuple[str, str, str]):
    before = _keys(keyed_repo)
    name, old, new = edit
    _edit(keyed_repo.root / name, old, new)
    assert _moved(before, _keys(keyed_repo)) == sorted(before)


def test_the_code_of_the_stage_moves_every_item_and_other_code_none(keyed_repo: Layout, tmp_path: Path, monkeypatch):
    code = tmp_path / "code"
    shutil.copytree(ROOT / "pipeline", code / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(batch, "CODE_ROOT", code)
    before = _keys(keyed_repo)
    _edit(code / "pipeline" / "report" / "stage.py", "\n", "\n# the report is not the traffic stage's code\n")
    assert _moved(before, _keys(keyed_repo)) == []
    _edit(code / "pipeline" / "traffic" / "cost.py", "\n", "\n# an edit to the costing\n")
    assert _moved(before, after := _keys(keyed_repo)) == sorted(before)
    _edit(code / "pipeline" / "core" / "units.py", "\n", "\n# shared code the stage imports\n")
    assert _moved(after, _keys(keyed_repo)) == sorted(before)


def test_the_code_key_read_through_the_parse_memo_is_the_key_parsed_afresh(
    keyed_repo: Layout, tmp_path: Path, monkeypatch
):
    """The stage keeps each module text's import statements in .fabricref-cache/code/ (parsing is most of the
    code key's cost). A module gaining an import, and then the module it imports, move the key exactly as a fresh
    parse does; the memo keeps only the texts of the code as it is."""
    code = tmp_path / "code"
    shutil.copytree(ROOT / "pipeline", code / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(batch, "CODE_ROOT", code)
    first = batch.code_sha256(keyed_repo)
    assert batch.code_sha256(keyed_repo) == first == batch.code_sha256()  # read back from the memo: the same key
    extra = code / "pipeline" / "traffic" / "extra_costing.py"
    extra.write_text("FACTOR = 1.0\n")
    assert batch.code_sha256(keyed_repo) == first  # not imported by the stage: not its code
    _edit(code / "pipeline" / "traffic" / "cost.py", "\nfrom ", "\nfrom . import extra_costing  # noqa: F401\nfrom ")
    second = batch.code_sha256(keyed_repo)
    assert second != first and second == batch.code_sha256()
    extra.write_text("FACTOR = 2.0\n")  # the newly imported module is part of the closure now
    third = batch.code_sha256(keyed_repo)
    assert third not in (first, second) and third == batch.code_sha256()
    stored = KeyedCache(keyed_repo.cache_dir / "code")
    (entry,) = stored.directory.glob("*.entry")
    kept = json.loads(entry.read_bytes().partition(b"\n")[2])
    texts = {keyed.sha256_bytes((code / f).read_text().encode()) for f in import_closure(batch.ENTRY, code)}
    assert sorted(kept) == sorted(texts)  # the texts of the closure as it is: the edited texts' old entries are gone


@pytest.mark.parametrize("library", ["numpy", "scipy", "networkx", "duckdb", "pydantic"])
def test_a_library_version_moves_every_item(keyed_repo: Layout, monkeypatch, library: str):
    before = _keys(keyed_repo)
    real = keyed.metadata.version
    monkeypatch.setattr(keyed.metadata, "version", lambda name: "0.0-other" if name == library else real(name))
    assert _moved(before, _keys(keyed_repo)) == sorted(before)


# -- the stage ------------------------------------------------------------------------------------------------------


def _outputs(root: Path) -> dict[str, str]:
    """SHA-256 of every file the traffic stage writes (dvc.yaml outs and metrics)."""
    files = [*(root / "registry" / "traffic").rglob("*"), *(root / "registry" / "comparison").rglob("*")]
    files += (root / "metrics").rglob("*")
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(files)
        if p.is_file() and p.name != ".gitignore"
    }


@pytest.fixture
def pair_copy(built_copy: Layout) -> Layout:
    """The built registry's copy with only the sharing pair's two workloads (their files and params.yaml knobs):
    the stage tests below run the whole traffic stage several times, and the other shipped workloads add only
    more of the same items (each computed, cached and compared alike), at twice the CPU. Its items: the two
    workloads on each of their targets, their sharing pair on each target both name and the KV-transfer curve."""
    params = built_copy.root / "params.yaml"
    text = params.read_text()
    for path in workload_paths(built_copy):
        if path.stem not in PAIR:
            path.unlink()
            text, count = re.subn(rf"^  {re.escape(path.stem)}:\n(?:    .*\n)+", "", text, flags=re.MULTILINE)
            assert count == 1, path.stem
    params.write_text(text)
    assert sorted(yaml.safe_load(text)["workloads"]) == sorted(PAIR)
    assert sorted(p.stem for p in workload_paths(built_copy)) == sorted(PAIR)
    return built_copy


@pytest.mark.slow
def test_one_changed_knob_recomputes_that_workload_and_its_pair_only(pair_copy: Layout):
    """Only the changed workload's (workload, target) items and its pair's are computed again, and the outputs are
    those of a cold run with the changed knob: an item of another workload or target read back in its place (a
    key that misses something the item depends on) would show as other bytes."""
    cold = batch.run(pair_copy, jobs=1)
    items = len(_keys(pair_copy))
    assert len(cold.computed) == len(cold.computed + cold.cached) == items and cold.jobs == 1
    built = _outputs(pair_copy.root)
    warm = batch.run(pair_copy, jobs=1)
    assert warm.computed == [] and len(warm.cached) == items
    assert _outputs(pair_copy.root) == built
    params = pair_copy.root / "params.yaml"
    shipped = params.read_text()
    # llama70b-serve-disaggregated: prompt_tokens 32768 → 16384 (its KV transfer halves).
    _edit(params, "    prompt_tokens: 32768\n", "    prompt_tokens: 16384\n")
    changed = batch.run(pair_copy, jobs=2)
    own = _named(pair_copy, "workload", PAIR[1])
    assert changed.computed == [*own, *_named(pair_copy, "sharing", PAIR[0])], changed.computed
    assert len(changed.cached) == items - len(changed.computed)
    with_hits = _outputs(pair_copy.root)
    batch.run(pair_copy, jobs=2, use_cache=False)
    assert _outputs(pair_copy.root) == with_hits
    moved = sorted(k for k, v in _outputs(pair_copy.root).items() if built.get(k) != v)
    assert f"metrics/{PAIR[1]}/meta-style-h100-24576.json" in moved
    assert not [m for m in moved if m.startswith("metrics/") and f"/{PAIR[1]}/" not in f"/{m}"], moved
    params.write_text(shipped)  # reverted: every item is still in the cache, and the outputs are as built
    back = batch.run(pair_copy, jobs=1)
    assert back.computed == [] and _outputs(pair_copy.root) == built


@pytest.mark.slow
def test_outputs_from_the_cache_or_two_workers_equal_outputs_computed_cold(pair_copy: Layout):
    """Deterministic however run: cold on one process without the cache, cold on two workers, all from the
    cache, and with one entry corrupted (recomputed, not trusted) — the same bytes every time."""
    cold = batch.run(pair_copy, jobs=1, use_cache=False)
    items = len(_keys(pair_copy))
    assert cold.jobs == 1 and len(cold.computed) == items
    expected = _outputs(pair_copy.root)
    assert not (pair_copy.cache_dir / "traffic").exists()  # use_cache=False neither reads nor writes it
    two = batch.run(pair_copy, jobs=2)
    assert two.jobs == 2 and len(two.computed) == items
    assert _outputs(pair_copy.root) == expected
    hits = batch.run(pair_copy, jobs=2)
    assert hits.computed == [] and _outputs(pair_copy.root) == expected
    entries = sorted((pair_copy.cache_dir / "traffic").glob("*.entry"))
    assert len(entries) == items
    victim = max(entries, key=lambda p: p.stat().st_size)  # the largest: a workload with many links
    data = bytearray(victim.read_bytes())
    data[-10] ^= 0x01
    victim.write_bytes(bytes(data))
    healed = batch.run(pair_copy, jobs=2)
    assert len(healed.computed) == 1 and _outputs(pair_copy.root) == expected


@pytest.mark.slow
def test_an_input_edited_while_the_items_are_computed_is_not_cached_under_the_key_read_before(
    pair_copy: Layout, monkeypatch
):
    """params.yaml edited while the stage computes (say during a long `dvc repro`), then reverted: the items computed
    from the edited file were stored under the key of the file as it was before, so the run after the revert read
    them back as hits and wrote the edited file's numbers (headroom 0.1) for the shipped one's (0.0), silently."""
    from fabricref.traffic import stage

    params = pair_copy.root / "params.yaml"
    shipped = params.read_text()
    batch.run(pair_copy, jobs=1, use_cache=False)
    expected = _outputs(pair_copy.root)
    real = stage.compute_all

    def edited_meanwhile(*args, **kwargs):
        _edit(params, "  memory_headroom: 0.0\n", "  memory_headroom: 0.1\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(stage, "compute_all", edited_meanwhile)
    batch.run(pair_copy, jobs=1)  # keys read with headroom 0.0; the workloads computed with 0.1
    monkeypatch.setattr(stage, "compute_all", real)
    params.write_text(shipped)
    again = batch.run(pair_copy, jobs=1)
    assert sorted(again.computed) == sorted(
        n for p in workload_paths(pair_copy) for n in _named(pair_copy, "workload", p.stem)
    )
    assert _outputs(pair_copy.root) == expected


def test_the_workers_take_the_items_grouped_by_topology_costliest_first(tmp_path: Path):
    """Each group is one topology's items (an item reading two topologies goes with the larger: its view is the
    costly one), so a view is built by one worker only; the groups come costliest first (view + items)."""
    from fabricref.core.registry import write_table
    from fabricref.traffic import stage

    lay = Layout(tmp_path)
    kinds = {"big": {"accelerator": 800, "leaf": 200}, "mid": {"accelerator": 100}, "small": {"accelerator": 10}}
    rows = [(t, json.dumps({"nodes_by_kind": k})) for t, k in kinds.items()]
    write_table(
        lay.registry_dir / "topology",
        "topology_summaries",
        [("topology_id", "VARCHAR"), ("summary", "VARCHAR")],
        ["topology_id"],
        rows,
    )
    todo = [
        batch.Item("workload", "w1", {}, ("small",)),
        batch.Item("workload", "w1", {}, ("big",)),
        batch.Item("kv", "kv", {}, ("small", "big")),
        batch.Item("workload", "w2", {}, ("mid",)),
        batch.Item("workload", "w3", {}, ("small",)),
    ]
    # big: 0.04 + 1000 nodes × 7e-6 + 2 items × 0.1 = 0.247 s; small: 0.04 + 10 × 7e-6 + 0.2 = 0.24007 s; mid: 0.1407 s.
    assert stage.groups(lay, todo) == [[1, 2], [0, 4], [3]]


def test_worker_count_from_the_flag_the_environment_or_the_cpus(monkeypatch):
    monkeypatch.delenv(batch.JOBS_ENV, raising=False)
    cpus = len(os.sched_getaffinity(0))
    assert batch.jobs_wanted(None, 8) == min(cpus, 8)
    assert batch.jobs_wanted(None, 1) == 1  # never more workers than items
    assert batch.jobs_wanted(3, 2) == 2 and batch.jobs_wanted(1, 8) == 1
    monkeypatch.setenv(batch.JOBS_ENV, "1")
    assert batch.jobs_wanted(None, 8) == 1
    assert batch.jobs_wanted(2, 8) == 2  # the flag wins over the environment
    for bad in ("two", "0", "-1"):
        monkeypatch.setenv(batch.JOBS_ENV, bad)
        with pytest.raises(UsageError, match="worker processes"):
            batch.jobs_wanted(None, 8)


@pytest.mark.parametrize("args", [["-n", "0"], ["-n"], ["--jobs", "x"], ["workload", "llama8b-fsdp-dp64"]])
def test_bad_stage_arguments_are_usage_errors(args: list[str]):
    """Exit 2 with the usage line, before any library is imported or anything is written."""
    done = subprocess.run(
        [sys.executable, "-m", "fabricref.traffic", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "usage: python -m fabricref.traffic [-n JOBS]" in done.stderr, done.stderr


def test_a_failure_in_a_worker_fails_the_run_with_its_message_and_exit_code(monkeypatch):
    """An item that fails in a worker process (here: an unknown id, whose error class takes its own constructor
    arguments and so would not survive pickling) stops the run with the same message and exit code, the first
    failing item's in item order; the other items' results are not returned."""
    from fabricref.errors import UnknownIdError
    from fabricref.traffic import stage

    def fake(item, lay, workloads, views):
        if item.id in ("b", "c"):
            raise UnknownIdError("workload", f"no-such-{item.id}", ["a", "b"])
        return item.id.encode()

    monkeypatch.setattr(stage, "compute", fake)  # the workers fork from this process: they run the fake
    # Each on a topology of its own: four groups, taken by the two workers (one group would run in this process).
    todo = [batch.Item("workload", i, {"id": i}, (f"topology-{i}",)) for i in ("a", "b", "c", "d")]
    assert stage.compute_all(Layout(ROOT), {}, todo[:1] + todo[3:], 2) == [b"a", b"d"]
    with pytest.raises(UsageError, match="no-such-b") as raised:
        stage.compute_all(Layout(ROOT), {}, todo, 2)
    assert raised.value.exit_code == 2
