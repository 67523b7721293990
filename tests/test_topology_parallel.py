"""The topology stage's fast paths give the bytes of its plain ones: exports written by a forked helper process as
by one process, tables put in order by the stage as DuckDB's sort orders them, coded columns as full lists."""

from __future__ import annotations

import json
import os
import select
from pathlib import Path

import duckdb
import numpy as np
import pytest
from conftest import CLUSTERS, SYSTEM_REFERENCES
from fabricref.core import registry
from fabricref.core.columns import Coded
from fabricref.core.paths import Layout
from fabricref.errors import FabricrefError, UsageError
from fabricref.topology import export, stage


def _outputs(lay: Layout) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(stage.topology_dir(lay).iterdir())}


def _clear(lay: Layout) -> None:
    for p in stage.topology_dir(lay).iterdir():
        p.unlink()


def _smallest_cluster(lay: Layout) -> str:
    """The cluster with the fewest accelerators, as the session's build summarised it (discovered, not named)."""
    summaries = json.loads((stage.topology_dir(lay) / "summaries.json").read_text())
    return min(CLUSTERS, key=lambda c: (summaries[c]["accelerators"], c))


def _keep_only_cluster(lay: Layout, keep: str) -> None:
    for p in (lay.root / "models" / "clusters").glob("*.yaml"):
        if p.stem != keep:
            p.unlink()


def test_exports_written_by_the_helper_process_are_the_bytes_of_one_process(built_copy: Layout):
    """Every reference and the smallest cluster (a few seconds for all): the stage with its forked helper writes
    the very files, byte for byte, that it writes alone; a rerun over the outputs changes nothing either."""
    _keep_only_cluster(built_copy, _smallest_cluster(built_copy))
    _clear(built_copy)
    serial_summaries = stage.run(built_copy, 1)
    serial = _outputs(built_copy)
    _clear(built_copy)
    assert stage.run(built_copy, 2) == serial_summaries
    assert _outputs(built_copy) == serial
    stage.run(built_copy, 2)  # over its own outputs: the same files, none left over
    assert _outputs(built_copy) == serial
    assert {n for n in serial if n.endswith((".json", ".json.gz", ".graphml", ".graphml.gz"))} > {"summaries.json"}


@pytest.mark.slow
def test_every_shipped_topology_forked_and_alone_gives_the_same_bytes(built_copy: Layout):
    """The whole stage (the 24,576-GPU cluster included) both ways."""
    _clear(built_copy)
    stage.run(built_copy, 1)
    serial = _outputs(built_copy)
    _clear(built_copy)
    stage.run(built_copy, 2)
    assert _outputs(built_copy) == serial


def test_a_failure_in_either_process_fails_the_stage_with_its_message(built_copy: Layout, monkeypatch):
    """An export that cannot be written fails the run with the writer's message, whichever process took it, and
    the helper is waited for (no process is left behind)."""
    _keep_only_cluster(built_copy, _smallest_cluster(built_copy))
    real = export.write_export

    def failing(t, path: Path) -> None:
        if path.name.endswith(".graphml.gz"):
            raise FabricrefError(f"cannot write {path}: No space left on device")
        real(t, path)

    monkeypatch.setattr(export, "write_export", failing)
    forked: list[int] = []
    fork = os.fork

    def recorded() -> int:
        pid = fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recorded)
    with pytest.raises(FabricrefError, match=r"cannot write .*\.graphml\.gz: No space left on device"):
        stage.run(built_copy, 2)
    assert len(forked) == 1
    with pytest.raises(ChildProcessError):  # already waited for
        os.waitpid(forked[0], os.WNOHANG)


def test_workers_come_from_the_argument_or_the_environment(monkeypatch):
    monkeypatch.setenv(stage.WORKERS_ENV, "1")
    assert stage.workers() == 1
    assert stage.workers(2) == 2
    monkeypatch.setenv(stage.WORKERS_ENV, "two")
    with pytest.raises(UsageError, match="FABRICREF_TOPOLOGY_WORKERS='two'"):
        stage.workers()
    with pytest.raises(UsageError, match="expected 1"):
        stage.workers(3)


def test_tables_the_stage_orders_are_the_bytes_duckdb_sorts(built_graph, tmp_path: Path):
    """`table_columns` puts the rows in the tables' order itself (topologies by id, nodes by name, edges by their
    ends' names) and `write_columns(presorted=True)` writes them as given: the same file as the rows written in
    graph order and sorted by DuckDB. Topologies given out of order, a cluster among them."""
    ids = [*reversed(SYSTEM_REFERENCES[:4]), CLUSTERS[0]]
    tables = [export.read_columns(built_graph(tid)) for tid in ids]
    nodes, edges, presorted = export.table_columns(tables)
    assert presorted
    for name, schema, order, series, rows in (
        ("nodes", export.NODE_COLUMNS, ["topology_id", "node"], nodes, [export.node_rows(c) for c in tables]),
        (
            "edges",
            export.EDGE_COLUMNS,
            ["topology_id", "source", "target"],
            edges,
            [export.edge_rows(c) for c in tables],
        ),
    ):
        fast = registry.write_columns(tmp_path / "fast", name, schema, order, series, presorted=True)
        plain = registry.write_table(tmp_path / "plain", name, schema, order, [r for part in rows for r in part])
        assert fast.read_bytes() == plain.read_bytes(), name
        first = duckdb.connect().execute(f"SELECT topology_id FROM '{fast}' LIMIT 1").fetchone()
        assert first == (min(ids),)


def test_repeated_topology_ids_are_left_to_duckdb_to_sort(built_graph):
    c = export.read_columns(built_graph(SYSTEM_REFERENCES[0]))
    _, _, presorted = export.table_columns([c, c])
    assert not presorted


def test_a_coded_column_holds_what_its_full_list_holds(tmp_path: Path):
    """`Coded(values, codes)` is `values[codes[i]]` per row, nulls and numbers included; a NumPy array of the
    column's type goes in as it is: the Parquet bytes of the plain lists."""
    columns = [("name", "VARCHAR"), ("n", "INTEGER"), ("gbps", "DOUBLE"), ("ok", "BOOLEAN"), ("pos", "BIGINT")]
    codes = np.array([2, 0, 1, 1, 2, 0])
    coded = [
        Coded(["b", None, "ü"], codes),
        Coded([None, 7, -3], codes),
        Coded([0.1, 400, None], codes),
        Coded([True, None, False], codes),
        np.arange(6, dtype=np.int64),
    ]
    full = [c.expand() if isinstance(c, Coded) else c.tolist() for c in coded]
    assert full[0] == ["ü", "b", None, None, "ü", "b"]
    a = registry.write_columns(tmp_path / "a", "t", columns, ["pos"], coded)
    b = registry.write_columns(tmp_path / "b", "t", columns, ["pos"], full)
    assert a.read_bytes() == b.read_bytes()
    # A coded column whose values do not fit NumPy exactly takes the general path: the same rows.
    odd = registry.write_columns(tmp_path / "c", "t", [("x", "BIGINT")], ["x"], [Coded([2**70, 1], np.array([1]))])
    assert duckdb.connect().execute(f"SELECT * FROM '{odd}'").fetchall() == [(1,)]


def test_tables_written_on_one_connection_are_the_bytes_of_fresh_ones(tmp_path: Path):
    """The stage writes its four tables on one DuckDB (`con=`): each file is what a connection of its own writes,
    and each table is dropped once written (a table of the same name can follow)."""
    columns = [("id", "VARCHAR"), ("n", "INTEGER")]
    rows = [("b", 2), ("a", None), ("c", 1)]
    con = registry.writer_connection()
    try:
        shared = [registry.write_table(tmp_path / str(i), "t", columns, ["id"], rows, con=con) for i in (1, 2)]
        assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (0,)
    finally:
        con.close()
    alone = registry.write_table(tmp_path / "alone", "t", columns, ["id"], rows)
    assert shared[0].read_bytes() == shared[1].read_bytes() == alone.read_bytes()


def test_the_graphml_escaping_is_the_standard_librarys():
    """export.escape / quoteattr (written out to spare the stage importing urllib.request and ssl) give what
    xml.sax.saxutils gives, on every string of up to 4 characters from those that matter and a few beside."""
    import itertools
    from xml.sax import saxutils

    chars = "a&<>\"'\n\r\t;#ü"
    for k in range(5):
        for text in map("".join, itertools.product(chars, repeat=k)):
            assert export.escape(text) == saxutils.escape(text), text
            assert export.quoteattr(text) == saxutils.quoteattr(text), text


def test_without_a_helper_process_the_stage_writes_every_export_itself(built_copy: Layout, monkeypatch):
    """A fork that fails (no process or memory to spare), or more export jobs than the queue's pipe takes at once,
    leave the whole run to the stage's own process: the same files."""
    _keep_only_cluster(built_copy, _smallest_cluster(built_copy))
    _clear(built_copy)
    stage.run(built_copy, 1)
    serial = _outputs(built_copy)
    _clear(built_copy)

    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    stage.run(built_copy, 2)
    assert _outputs(built_copy) == serial
    # More jobs than a pipe takes at once (here: more than 2): no helper is forked at all.
    _clear(built_copy)
    monkeypatch.setattr(select, "PIPE_BUF", 8)
    monkeypatch.setattr(os, "fork", lambda: pytest.fail("forked with more jobs than the pipe holds"))
    stage.run(built_copy, 2)
    assert _outputs(built_copy) == serial
