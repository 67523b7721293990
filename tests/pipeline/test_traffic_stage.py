"""The traffic stage's plumbing: `python -m fabricref.traffic PART` takes exactly its parts, and the combine step
joins the parts the workload and sharing stages wrote into the tables every reader knows, the same bytes whatever
order they were written in."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys

import duckdb
import pytest
from conftest import bare_checkout, copy_checkout, env_with_venv
from fabricref.core.paths import Layout, workload_paths
from fabricref.core.registry import write_table
from fabricref.errors import FabricrefError
from fabricref.traffic import tables

_VALUES = {"VARCHAR": "text", "INTEGER": 3, "BIGINT": 4, "DOUBLE": 0.5, "BOOLEAN": True}


def _row(table: str, topology: str, workload: str, i: int, rnd: random.Random) -> tuple:
    """A row of `table` for (topology, workload) whose key columns differ with `i`."""
    out = []
    for name, kind in tables.TABLES[table][0]:
        if name == "topology_id":
            out.append(topology)
        elif name == "workload_id":
            out.append(workload)
        elif name in ("phase", "source", "target", "failure", "other_workload"):
            out.append(f"{name}-{i:03d}")
        elif name in ("caveat", "not_established"):
            out.append(rnd.choice(["b caveat", "a caveat", None]))
        elif name == "lineage":
            out.append([{"reference_id": "r", "field": "f", "status": "published", "confidence": "published"}])
        elif kind == "DOUBLE":
            out.append(rnd.random())
        else:
            out.append(_VALUES[kind])
    return tuple(out)


def _parts(lay: Layout, rnd: random.Random) -> dict[str, list[tuple]]:
    """Stand-in parts for every shipped workload (and the sharing pair's), written as their stages write them;
    returns every table's rows."""
    rows: dict[str, list[tuple]] = {name: [] for name in tables.TABLES}
    for path in workload_paths(lay):
        wid = path.stem
        # One row per key, as the stages write them (traffic_workloads: one per target).
        count = {n: 1 if n == "traffic_workloads" else rnd.randint(1, 12) for n in rows}
        mine = {n: [_row(n, t, wid, i, rnd) for t in ("t1", "t0") for i in range(count[n])] for n in rows}
        tables.write_workload(lay, wid, {n: mine[n] for n in tables.WORKLOAD_TABLES}, {"t0": {"comm_s": 1.0}})
        for n in tables.WORKLOAD_TABLES:
            rows[n] += mine[n]
        if "shares_with" in path.read_text():
            tables.write_sharing(lay, wid, mine["traffic_sharing"])
            rows["traffic_sharing"] += mine["traffic_sharing"]
    return rows


@pytest.fixture(scope="module")
def parted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Layout, dict[str, list[tuple]]]:
    """A copy of the checkout's data with every workload's stand-in parts written (once for the module), and
    every table's rows. Only copied (`parts`)."""
    lay = Layout(copy_checkout(tmp_path_factory.mktemp("parted") / "repo"))
    return lay, _parts(lay, random.Random(25))


@pytest.fixture
def parts(parted: tuple[Layout, dict[str, list[tuple]]], tmp_path) -> tuple[Layout, dict[str, list[tuple]]]:
    """A private copy of `parted`'s checkout, for a test that combines (or removes) parts, and the rows."""
    lay, rows = parted
    return Layout(shutil.copytree(lay.root, tmp_path / "repo")), rows


def test_the_combined_tables_are_the_bytes_of_all_rows_written_at_once(parts, tmp_path):
    repo, rows = parts
    assert rows["traffic_sharing"], "the shipped workloads declare a sharing pair"
    tables.combine(repo)
    out = tables.traffic_dir(repo)
    for name, (columns, order) in tables.TABLES.items():
        alone = write_table(tmp_path / "alone", name, columns, order, rows[name]).read_bytes()
        assert (out / f"{name}.parquet").read_bytes() == alone, name
    # The caveats: distinct texts in code point order, NULL dropped; the plot data beside them.
    assert json.loads((out / "caveats.json").read_text()) == {"caveats": ["a caveat", "b caveat"]}
    phases = (out / "plots" / "phase_times.csv").read_text().splitlines()
    assert phases[0] == "phase,term,seconds" and len(phases) == 1 + 3 * len(rows["traffic"])
    busiest = (out / "plots" / "busiest_link_classes.csv").read_text().splitlines()
    assert busiest[0] == "link_class,busy_seconds,share_of_communication" and len(busiest) > 1
    schema = json.loads((out / "schema.json").read_text())["tables"]
    assert sorted(schema) == sorted(tables.TABLES)


def test_a_missing_part_names_what_writes_it_and_a_workload_no_longer_shipped_is_left_out(parts):
    repo, _ = parts
    gone = tables.workload_dir(repo, "a-workload-no-longer-shipped")
    tables.write_workload(repo, gone.name, {n: [] for n in tables.WORKLOAD_TABLES}, {})
    tables.combine(repo)
    count = duckdb.sql(
        f"SELECT count(*) FROM '{tables.traffic_dir(repo) / 'traffic_workloads.parquet'}' "
        f"WHERE workload_id = '{gone.name}'"
    ).fetchall()
    assert count == [(0,)]
    first = workload_paths(repo)[0].stem
    (tables.workload_dir(repo, first) / "traffic_links.parquet").unlink()
    with pytest.raises(FabricrefError, match=rf"registry/traffic/workloads/{first}/traffic_links.parquet missing"):
        tables.combine(repo)


@pytest.mark.parametrize(
    "args", [[], ["workload"], ["sharing"], ["kv"], ["curves", "x"], ["combine", "x"], ["-n", "2"]]
)
def test_bad_stage_arguments_are_usage_errors(args: list[str], tmp_path):
    # Refused before the checkout's data is read: an empty checkout (no source, the vocabulary) is enough.
    bare_checkout(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "fabricref.traffic", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "usage: python -m fabricref.traffic workload ID | sharing ID | curves | combine" in done.stderr


@pytest.mark.parametrize("part", ["kv", "comparison"])
def test_a_part_merged_into_curves_names_it(part: str, tmp_path):
    bare_checkout(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "fabricref.traffic", part], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and f"`{part}` is part of `curves` (the DVC stage traffic-curves)" in done.stderr


def test_an_unknown_workload_is_a_usage_error_naming_the_closest_ids(no_sources: Layout):
    done = subprocess.run(
        [sys.executable, "-m", "fabricref.traffic", "workload", "llama8b-fsdp-dp46"],
        cwd=no_sources.root,
        env=env_with_venv(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "llama8b-fsdp-dp64" in done.stderr, done.stderr
    assert not list((no_sources.registry_dir / "traffic").rglob("*.parquet"))
