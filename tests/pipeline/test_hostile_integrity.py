"""Hostile input, round 3: integrity end to end. Every Parquet and DuckDB file of the registry has its SHA-256
beside it; every reader checks it and refuses a damaged file naming it and how to restore it; measured logs in
the store are verified like snapshots."""

from __future__ import annotations

import json

import pytest
from fabricref.core.registry import HASH_SUFFIX, TABLE_DIRS
from test_measured import FIXTURES


def flip(path, offset, bit=0):
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.chmod(0o644)
    path.write_bytes(bytes(data))


def test_every_registry_table_and_the_duckdb_file_have_their_hash_beside_them(built_registry):
    tables = [p for sub in TABLE_DIRS for p in (built_registry.registry_dir / sub).glob("*.parquet")]
    assert len(tables) > 5
    for path in [*tables, built_registry.duckdb_path]:
        sidecar = path.with_name(path.name + HASH_SUFFIX)
        assert sidecar.is_file(), sidecar
        digest, name = sidecar.read_text().split()
        assert name == path.name and len(digest) == 64


@pytest.mark.parametrize(
    "verb",
    [
        ["show", "nvidia-dgx-h100"],
        ["show", "nvidia-dgx-h100", "--json"],
        ["references"],
        ["audit", "nvidia-dgx-h100", "accelerator.count"],
        ["query", "SELECT count(*) FROM fields"],
        ["status"],
    ],
)
def test_one_flipped_bit_in_a_table_is_refused_by_every_reader(built_copy, cli, verb):
    """Byte 300, bit 0 of fields.parquet relabelled GB200 figures as DGX H100 (exit 0, 82 rows)."""
    path = built_copy.tables_dir / "fields.parquet"
    flip(path, 300)
    result = cli(*verb, root=built_copy.root)
    assert result.code == 1, (result.code, result.out[:300])
    assert "fields.parquet" in result.err + result.out and "damaged" in result.err + result.out
    assert "dvc checkout" in result.err + result.out
    assert "Traceback" not in result.err


def test_two_bytes_flipped_in_a_compressed_page_are_refused_not_a_traceback(built_copy, cli):
    import fabricref

    path = built_copy.registry_dir / "topology" / "topology_edges.parquet"
    size = path.stat().st_size
    flip(path, size // 2)
    flip(path, size // 2 + 1, 3)
    result = cli("query", "SELECT count(*) FROM topology_nodes", root=built_copy.root)
    assert result.code == 1 and "topology_edges.parquet: damaged" in result.err, result.err
    with pytest.raises(fabricref.errors.IntegrityError, match="topology_edges.parquet: damaged"):
        fabricref.graph("nvidia-dgx-h100", root=built_copy.root)


# One table outside registry/tables in the fast tier (a `status` reads every source: most of a CPU second), each of
# the topology stage's tables in the whole suite.
@pytest.mark.parametrize(
    "table",
    [
        "topology/topology_edges.parquet",
        pytest.param("topology/topology_nodes.parquet", marks=pytest.mark.slow),
        pytest.param("topology/topology_graphs.parquet", marks=pytest.mark.slow),
    ],
)
def test_status_names_a_damaged_table_beside_registry_tables(built_copy, cli, table):
    """Status read only registry/tables: a flipped bit in a table another stage writes (topology, traffic,
    validation) left it at exit 0, while audit and query refused them."""
    flip(built_copy.registry_dir / table, 300)
    result = cli("status", root=built_copy.root)
    assert result.code == 1, result.out[-300:]
    assert f"{table.split('/')[-1]}: damaged" in result.said and "Traceback" not in result.err


@pytest.mark.parametrize("left", ["empty", "missing"])
def test_status_names_a_stage_output_a_failed_run_removed(built_copy, cli, left):
    """A refused `topology` knob under `dvc repro` leaves registry/topology/ emptied (DVC removes a stage's outputs
    before running it) beside the traffic built from it: every estimate then failed, while status exited 0."""
    import shutil

    assert cli("status", root=built_copy.root).code == 0
    topology = built_copy.registry_dir / "topology"
    part = built_copy.registry_dir / "traffic" / "workloads" / "w"
    part.mkdir(parents=True)
    for suffix in ("", ".sha256"):  # a table with its recorded hash
        shutil.copy(topology / f"topology_graphs.parquet{suffix}", part / f"traffic.parquet{suffix}")
    assert cli("status", root=built_copy.root).code == 0
    shutil.rmtree(topology)
    if left == "empty":
        topology.mkdir()
    result = cli("status", root=built_copy.root)
    assert result.code == 1, result.out[-300:]
    assert "registry/topology/ holds no table while registry/traffic/, built from it, does" in result.said


def test_a_table_without_its_recorded_hash_is_refused(built_copy, cli):
    (built_copy.tables_dir / "fields.parquet.sha256").unlink()
    result = cli("show", "nvidia-dgx-h100", root=built_copy.root)
    assert result.code == 1 and "no recorded SHA-256 (fields.parquet.sha256 is missing)" in result.err


@pytest.mark.slow
def test_a_measured_log_edited_in_the_store_is_found_by_status_and_retrieve(built_copy, cli):
    log = FIXTURES / "dgx-h100-8gpu-all-reduce-ring.log"
    assert cli("measured", "import", str(log), "--topology", "nvidia-dgx-h100", root=built_copy.root).code == 0
    (pin,) = (built_copy.root / "sources" / "measured").glob("*.json")
    sha = json.loads(pin.read_text())["sha256"]
    stored = built_copy.store_dir / "sha256" / sha[:2] / sha
    data = bytearray(stored.read_bytes())
    data[-10] ^= 1
    stored.chmod(0o644)
    stored.write_bytes(bytes(data))
    status = cli("status", root=built_copy.root)
    assert status.code == 1 and sha in status.said and "hash mismatch" in status.said
    retrieve = cli("retrieve", root=built_copy.root)
    assert retrieve.code == 1 and sha in retrieve.err and pin.name in retrieve.err
    table = built_copy.registry_dir / "measurements" / "measurements.parquet"
    flip(table, 100)
    compare = cli("measured", "compare", "--topology", "nvidia-dgx-h100", root=built_copy.root)
    assert compare.code == 1 and "measurements.parquet: damaged" in compare.err
