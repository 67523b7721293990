"""dvc.yaml says what each stage depends on, and it must be true (issue 11, case 2).

- Code: each stage runs as `python -m fabricref.<stage>` and declares its own package folder and every library
  package its import closure reaches (every `import` and `from` anywhere in each module, function-level ones
  included): `dvc status` then names every stage an edit makes stale. No stage imports another stage's package
  (tests/test_layout.py checks the floors).
- Data: every stage process of the session's cold `dvc repro` (conftest.built_pipeline) runs under an audit hook
  (tests/stage_audit; slow tier); every file it opens to read (and every Parquet file it reads through DuckDB) must
  be under a declared dep or its own outputs, every file it writes under its outputs.
- The DuckDB file never shows a direct reader old numbers (case 4).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from conftest import ROOT, stage_audit_dir, stage_audit_env
from fabricref.core import registry
from fabricref.core.paths import Layout
from fabricref.errors import FabricrefError
from test_layout import PACKAGE, imports, module_of


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
    """Every stage as `dvc repro` runs it: a `foreach` stage expands to one stage per item, named `name@key`."""
    stages: dict[str, dict] = {}
    for name, spec in yaml.safe_load((root / "dvc.yaml").read_text())["stages"].items():
        if "foreach" not in spec:
            stages[name] = spec
            continue
        items = spec["foreach"]
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


STAGES = dvc_stages()


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_every_stage_declares_the_code_it_runs(stage: str):
    """Every module of the stage's import closure lies under a package folder (or file) it declares, and it
    declares no package it does not import: an edit anywhere in its code makes exactly this stage stale."""
    spec = STAGES[stage]
    entry = entry_module(spec["cmd"])
    assert entry.startswith("fabricref."), f"stage {stage!r} runs {entry}: expected `python -m fabricref.<stage>`"
    deps = [str(d) for d in spec["deps"]]
    code = [d for d in deps if d == "pipeline" or d.startswith("pipeline/")]
    closure = import_closure(entry)
    missing = sorted(f for f in closure if not covered(f, code))
    assert not missing, f"stage {stage!r} imports {missing} (by {[closure[f] for f in missing]}) undeclared"
    unused = [d for d in code if not any(covered(f, [d]) for f in closure)]
    assert not unused, f"stage {stage!r} declares {unused}, which it never imports"
    own = "pipeline/" + entry.split(".")[1]
    assert own in code, f"stage {stage!r} must declare its own package {own}"


def test_the_closure_follows_function_level_imports() -> None:
    """The checker itself: the traffic stage reaches the traffic library, the report stage does not."""
    assert any(f.startswith("pipeline/estimate/") for f in import_closure("fabricref.traffic"))
    assert not any(f.startswith("pipeline/estimate/") for f in import_closure("fabricref.report"))
    assert "pipeline/errors.py" in import_closure("fabricref.retrieve")


# -- data deps: every stage of the shared cold `dvc repro`, as recorded by tests/stage_audit -----------------------

# Read or written by design outside DVC: the caches under .fabricref-cache/ and bytecode caches.
OUTSIDE_DVC = (".fabricref-cache/",)


@pytest.mark.slow
def test_every_stage_reads_only_what_it_declares_and_writes_only_its_outputs(built_pipeline: Path):
    """On the session's cold `dvc repro` (conftest.built_pipeline), every stage process recorded what it opened,
    renamed and removed (tests/stage_audit): exactly one `python -m` per stage, the one dvc.yaml names."""
    root = Path(os.path.realpath(built_pipeline))
    audit = stage_audit_dir(built_pipeline)
    stages = dvc_stages(root)
    ran = {json.loads(p.read_text())["stage"] for p in audit.glob("*.json")}
    for stage in [s for s in stages if s not in ran]:
        # A stage without outputs whose deps came out as dvc.lock records them (the database stage) is up to date
        # for DVC even on a cold run: run it here as DVC would (same command, DVC_STAGE set), on the built tree.
        module, args = entry_argv(stages[stage]["cmd"])
        assert not stages[stage].get("outs"), f"stage {stage} has outputs, yet the cold dvc repro did not run it"
        done = subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=root,
            env={**stage_audit_env(audit), "DVC_STAGE": stage},
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, f"stage {stage} failed:\n{done.stdout}\n{done.stderr}"
    records: dict[str, list[dict]] = {}
    workers: dict[str, list[dict]] = {}  # processes a stage forked (the traffic stage's workers)
    for path in sorted(audit.glob("*.json")):
        record = json.loads(path.read_text())
        (workers if "forked_from" in record else records).setdefault(record["stage"], []).append(record)
    assert sorted(records) == sorted(stages), "the cold dvc repro audited other stages than dvc.yaml lists"
    assert set(workers) <= set(stages)
    if len(os.sched_getaffinity(0)) > 1:  # the cold run computes every traffic item, in one worker per CPU
        assert len(workers.get("traffic", [])) > 1, "the traffic stage's workers left no audit record"
    problems: list[str] = []
    for stage in stages:
        spec = stages[stage]
        module, args = entry_argv(spec["cmd"])
        assert [r["argv"] for r in records[stage]] == [["-m", module, *args]], (stage, records[stage])
        (record,) = records[stage]
        mine = workers.get(stage, [])
        assert all(w["forked_from"] == record["pid"] for w in mine), (stage, [w["forked_from"] for w in mine])
        # What its workers read and loaded counts as the stage's.
        record = {
            "log": [e for r in [record, *mine] for e in r["log"]],
            "loaded": sorted({m for r in [record, *mine] for m in r["loaded"]}),
        }
        deps = [str(d) for d in spec["deps"]] + params_files(spec)
        outs = [str(next(iter(o))) if isinstance(o, dict) else str(o) for o in spec.get("outs", [])]
        outs += [str(next(iter(m))) if isinstance(m, dict) else str(m) for m in spec.get("metrics", [])]
        closure = import_closure(entry_module(spec["cmd"]))
        for loaded in record["loaded"]:
            rel = os.path.relpath(os.path.realpath(loaded), root)
            if rel not in closure:
                problems.append(f"{stage} loaded {rel}, which the static import closure misses")
        for kind, logged, was_file in record["log"]:  # was_file: when the stage exited
            path = os.path.realpath(logged)
            if not path.startswith(str(root) + "/"):
                continue
            rel = os.path.relpath(path, root)
            if not was_file or "__pycache__" in rel or rel.startswith(OUTSIDE_DVC):
                continue
            if (
                stage == "database"
                and rel.startswith("registry/")
                and Path(rel).name.startswith((".registry.", "registry.duckdb"))
            ):
                continue  # the views file, deliberately not an output (see pipeline/core/registry.py)
            if kind == "read" and rel.endswith(registry.HASH_SUFFIX):
                # A table's recorded hash is read with it (its reader checks it) and written by the stage writing
                # it: declaring the table declares it (pipeline/core/registry.py).
                rel = rel.removesuffix(registry.HASH_SUFFIX)
            if kind == "read" and not covered(rel, deps + outs):
                problems.append(f"{stage} reads {rel}, which dvc.yaml does not declare")
            if kind == "write" and not covered(rel, outs):
                problems.append(f"{stage} writes {rel}, which is not one of its outputs")
    assert not sorted(set(problems)), "\n".join(sorted(set(problems)))


# -- the DuckDB file (case 4) ------------------------------------------------------------------------------------

COLUMNS = [("topology_id", "VARCHAR"), ("workload_id", "VARCHAR"), ("communication_seconds", "DOUBLE")]


def _write(lay: Layout, seconds: float) -> None:
    registry.write_table(
        lay.registry_dir / "traffic", "traffic_workloads", COLUMNS, ["topology_id"], [("t", "w", seconds)]
    )


def _direct(path: Path, cwd: Path) -> float:
    """What a notebook gets: a fresh process, `duckdb.connect(path, read_only=True)`, no fabricref code."""
    code = (
        "import duckdb, sys\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "print(con.execute('SELECT communication_seconds FROM traffic_workloads').fetchone()[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr)
    return float(done.stdout)


@pytest.fixture
def small_registry(tmp_path: Path) -> Layout:
    lay = Layout(tmp_path / "checkout")
    for sub in registry.TABLE_DIRS:
        (lay.registry_dir / sub).mkdir(parents=True)
    _write(lay, 1.08)
    registry.build_database(lay)
    return lay


def test_a_direct_duckdb_reader_sees_the_parquet_as_it_is_now(small_registry: Layout, tmp_path: Path):
    lay = small_registry
    assert _direct(lay.duckdb_path, lay.root) == 1.08
    _write(lay, 5.28)  # what `dvc checkout` of another version does: new Parquet bytes, the DuckDB file untouched
    assert _direct(lay.duckdb_path, lay.root) == 5.28
    assert _direct(Path("registry/registry.duckdb"), lay.root) == 5.28  # from the checkout root, relative path
    (tmp_path / "elsewhere").mkdir()
    assert _direct(lay.duckdb_path, tmp_path / "elsewhere") == 5.28  # from any other directory
    con = duckdb.connect(str(lay.duckdb_path), read_only=True)
    built = con.execute("SELECT view, parquet_path FROM _registry_build").fetchall()
    con.close()
    assert [(v, Path(p).name) for v, p in built] == [("traffic_workloads", "traffic_workloads.parquet")]


def test_a_removed_table_is_an_error_not_old_numbers(small_registry: Layout):
    (small_registry.registry_dir / "traffic" / "traffic_workloads.parquet").unlink()
    with pytest.raises(RuntimeError, match="traffic_workloads.parquet"):
        _direct(small_registry.duckdb_path, small_registry.root)
    assert registry.ensure_database(small_registry) == small_registry.duckdb_path  # rewritten without the view
    with pytest.raises(RuntimeError, match="traffic_workloads"):
        _direct(small_registry.duckdb_path, small_registry.root)


def test_a_copied_checkout_refuses_to_read_the_original(small_registry: Layout, tmp_path: Path):
    copy = Layout(tmp_path / "copy")
    shutil.copytree(small_registry.root, copy.root)
    _write(copy, 7.0)
    with pytest.raises(RuntimeError, match="moved or copied"):
        _direct(copy.duckdb_path, copy.root)
    registry.ensure_database(copy)  # the build record names the original's files: rewritten for the copy
    assert _direct(copy.duckdb_path, copy.root) == 7.0
    assert _direct(small_registry.duckdb_path, small_registry.root) == 1.08


def _bound_columns(path: Path) -> list[tuple[str, str]]:
    """The columns a fresh reader's catalog lists for the view (what notebooks and SQL tools show)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'traffic_workloads' "
            "ORDER BY column_index"
        ).fetchall()
    finally:
        con.close()


def test_the_views_file_dep_moves_with_a_column_type_and_not_with_a_number(small_registry: Layout):
    """registry/traffic/schema.json (the database stage's dep for the traffic tables) stays byte-identical when
    only numbers move, so a changed workload does not rebuild the views; it changes when a column's type does,
    and the views rebuilt then list the new type (the old file still lists the old one: an outdated view)."""
    lay = small_registry
    traffic = lay.registry_dir / "traffic"
    schema = registry.write_schema(traffic)
    first = schema.read_bytes()
    assert json.loads(first) == {
        "tables": {
            "traffic_workloads": [
                ["topology_id", "VARCHAR"],
                ["workload_id", "VARCHAR"],
                ["communication_seconds", "DOUBLE"],
            ]
        }
    }
    _write(lay, 5.28)
    assert registry.write_schema(traffic).read_bytes() == first
    registry.write_table(
        traffic, "traffic_workloads", [*COLUMNS[:2], ("communication_seconds", "DECIMAL(9,3)")], ["topology_id"],
        [("t", "w", 7)],
    )  # fmt: skip
    assert registry.write_schema(traffic).read_bytes() != first  # DVC reruns the database stage
    assert _bound_columns(lay.duckdb_path)[2] == ("communication_seconds", "DOUBLE")  # outdated until rebuilt
    registry.build_database(lay)
    assert _bound_columns(lay.duckdb_path)[2] == ("communication_seconds", "DECIMAL(9,3)")
    assert _direct(lay.duckdb_path, lay.root) == 7.0


def test_a_schema_file_that_does_not_match_its_tables_stops_the_views_build(small_registry: Layout):
    lay = small_registry
    traffic = lay.registry_dir / "traffic"
    registry.write_schema(traffic)
    registry.write_table(
        traffic, "traffic_workloads", [*COLUMNS[:2], ("communication_seconds", "BIGINT")], ["topology_id"],
        [("t", "w", 7)],
    )  # fmt: skip
    with pytest.raises(FabricrefError, match=r"registry/traffic/schema.json does not describe .*traffic_workloads"):
        registry.build_database(lay)
    registry.write_schema(traffic)
    registry.write_table(traffic, "traffic_sharing", COLUMNS, ["topology_id"], [])  # a table it does not list
    with pytest.raises(FabricrefError, match=r"schema.json does not describe the tables beside it \(traffic_sharing\)"):
        registry.build_database(lay)
    registry.write_schema(traffic)
    assert registry.build_database(lay) == lay.duckdb_path


def test_the_database_stage_declares_the_traffic_tables_columns_not_their_numbers():
    """Its deps: the compile and topology directories whole, the traffic and validation tables (whose numbers move
    with every workload knob and calibration number) through the schema file their stage writes (and declares)
    beside them; which tables it makes views of is what it finds there."""
    stages = dvc_stages()
    deps = stages["database"]["deps"]
    for sub, stage in (("traffic", "traffic"), ("validation", "validate")):
        assert f"registry/{sub}/schema.json" in deps and f"registry/{sub}/schema.json" in stages[stage]["outs"]
        assert not [d for d in deps if d.startswith(f"registry/{sub}/") and d.endswith(".parquet")]
    assert registry.TABLE_DIRS[-1] == "measurements"
    for sub in registry.TABLE_DIRS[:-1]:  # the directories DVC's stages write (measurements: `fabricref measured`)
        assert f"registry/{sub}" in deps or f"registry/{sub}/{registry.SCHEMA_FILE}" in deps
