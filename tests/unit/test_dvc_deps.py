"""dvc.yaml says what each stage depends on, and it must be true.

- Code: each stage runs as `python -m fabricref.<stage>` and declares its own package folder and every library
  package its import closure reaches (every `import` and `from` anywhere in each module, function-level ones
  included): `dvc status` then names every stage an edit makes stale (tests/e2e/test_stage_audit.py). No stage
  imports another stage's package (tests/unit/test_layout.py checks the floors).
- The data a stage reads: tests/e2e/test_stage_audit.py, on the session's cold `dvc repro`.
- The DuckDB file never shows a direct reader old numbers.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from closure import covered, dvc_stages, entry_module, import_closure
from fabricref.core import registry
from fabricref.core.paths import Layout
from fabricref.errors import FabricrefError

STAGES = dvc_stages()
# One closure per entry module, shared by the stages that run it (every traffic part runs fabricref.traffic).
closure_of = functools.cache(import_closure)


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_every_stage_declares_the_code_it_runs(stage: str):
    """Every module of the stage's import closure lies under a package folder (or file) it declares, and it
    declares no package it does not import: an edit anywhere in its code makes exactly this stage stale."""
    spec = STAGES[stage]
    entry = entry_module(spec["cmd"])
    assert entry.startswith("fabricref."), f"stage {stage!r} runs {entry}: expected `python -m fabricref.<stage>`"
    deps = [str(d) for d in spec["deps"]]
    code = [d for d in deps if d == "pipeline" or d.startswith("pipeline/")]
    closure = closure_of(entry)
    missing = sorted(f for f in closure if not covered(f, code))
    assert not missing, f"stage {stage!r} imports {missing} (by {[closure[f] for f in missing]}) undeclared"
    unused = [d for d in code if not any(covered(f, [d]) for f in closure)]
    assert not unused, f"stage {stage!r} declares {unused}, which it never imports"
    own = "pipeline/" + entry.split(".")[1]
    assert own in code, f"stage {stage!r} must declare its own package {own}"


def test_the_closure_follows_function_level_imports() -> None:
    """The checker itself: the traffic stage reaches the traffic library, the report stage does not."""
    assert any(f.startswith("pipeline/estimate/") for f in closure_of("fabricref.traffic"))
    assert not any(f.startswith("pipeline/estimate/") for f in closure_of("fabricref.report"))
    assert "pipeline/errors.py" in closure_of("fabricref.retrieve")


# -- the DuckDB file ------------------------------------------------------------------------------------

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
    assert registry.build_database(small_registry) == small_registry.duckdb_path  # rewritten without the view
    with pytest.raises(RuntimeError, match="traffic_workloads"):
        _direct(small_registry.duckdb_path, small_registry.root)


def test_a_copied_checkout_refuses_to_read_the_original(small_registry: Layout, tmp_path: Path):
    copy = Layout(tmp_path / "copy")
    shutil.copytree(small_registry.root, copy.root)
    _write(copy, 7.0)
    with pytest.raises(RuntimeError, match="moved or copied"):
        _direct(copy.duckdb_path, copy.root)
    registry.build_database(copy)  # the build record names the original's files: rewritten for the copy
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
