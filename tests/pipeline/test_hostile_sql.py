"""Hostile SQL, round 2: `fabricref query` runs one SELECT under a time limit, a memory limit and a row cap,
all set before the configuration is locked (a statement cannot raise them)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest


def test_a_billion_row_cross_join_stops_at_the_time_limit(built_registry, cli):
    started = time.monotonic()
    result = cli(
        "query",
        "SELECT count(*) FROM range(1000000000) a, range(1000000000) b",
        "--timeout",
        "0.2",  # on two threads: the whole time limit is burnt on both cores
        root=built_registry.root,
    )
    elapsed = time.monotonic() - started
    assert result.code == 1
    assert "query stopped after 0.2 s (the time limit); raise it with --timeout SECONDS" in result.err
    assert elapsed < 15


def test_a_query_over_the_memory_limit_is_stopped_with_duckdbs_advice_made_an_option(built_registry, cli):
    result = cli(
        "query", "SELECT list(range) FROM range(200000000)", "--memory-limit", "64MB", root=built_registry.root
    )
    assert result.code == 1
    assert "needs more than the memory limit of 64MB; raise it with --memory-limit" in result.err


def test_the_limits_cannot_be_raised_from_sql(built_registry, cli):
    result = cli("query", "SET memory_limit = '100GB'", root=built_registry.root)
    assert result.code == 1 and "refused" in result.err


def test_two_statements_are_refused_not_half_run(built_registry, cli):
    result = cli("query", "SELECT 1 AS a; SELECT 2 AS b", root=built_registry.root)
    assert result.code == 2
    assert "2 statements given; `fabricref query` runs exactly one SELECT" in result.err
    assert result.out == ""


def test_a_result_over_the_row_cap_is_refused(built_registry, cli):
    result = cli("query", "SELECT * FROM range(11)", "--max-rows", "10", "--format", "csv", root=built_registry.root)
    assert result.code == 1 and "returns more than 10 rows; add a LIMIT or raise --max-rows" in result.err
    ok = cli("query", "SELECT * FROM range(10)", "--max-rows", "10", "--format", "csv", root=built_registry.root)
    assert ok.code == 0 and ok.out.splitlines()[1:] == [str(i) for i in range(10)]


@pytest.mark.parametrize(
    "option, value, expected",
    [
        ("--timeout", "nan", "--timeout nan: expected a positive number of seconds"),
        ("--timeout", "-1", "--timeout -1.0: expected a positive number of seconds"),
        ("--memory-limit", "lots", "--memory-limit 'lots': expected a size such as 512MB"),
        ("--memory-limit", "1GB'; SET x='1", "expected a size such as"),
        ("--memory-limit", "\u0661GB", "expected a size such as"),  # an Arabic-Indic 1: DuckDB's parser refuses it
        ("--memory-limit", "1\u2003GB", "expected a size such as"),
        ("--max-rows", "0", "--max-rows 0: expected at least 1"),
    ],
)
def test_limit_options_are_checked(built_registry, cli, option, value, expected):
    result = cli("query", "SELECT 1", option, value, root=built_registry.root)
    assert result.code == 2 and expected in result.err


def test_a_query_over_the_memory_limit_never_spills_to_disk(built_registry, cli, tmp_path, monkeypatch):
    """DuckDB's in-memory database offloads to ./.tmp when the memory limit is reached: a query must stop at the
    limit, not fill the disk of whoever runs it (seen: one cross join wrote 63 GB under a test's checkout)."""
    monkeypatch.chdir(tmp_path)
    sql = "SELECT count(*) FROM (SELECT range AS v FROM range(30000000) ORDER BY v DESC)"
    result = cli("query", sql, "--memory-limit", "64MB", root=built_registry.root)
    assert result.code == 1
    assert "needs more than the memory limit of 64MB; raise it with --memory-limit" in result.err
    assert list(tmp_path.iterdir()) == []


# Round 3: one statement whose every node reads, the memory limit holding for what DuckDB does not count, bounded
# threads, and a saved query that is a file (and never echoed).


def slow(sql: str) -> Any:
    """A form refused (or run) the way one kept in the fast tier is: checked in the whole suite."""
    return pytest.param(sql, marks=pytest.mark.slow)


@pytest.mark.parametrize(
    "sql",
    [
        "EXPLAIN ANALYZE DROP VIEW fields",
        slow("EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1"),
        "explain   analyze insert into fields select * from fields",
        slow("EXPLAIN DELETE FROM fields"),
        "WITH gone AS (DELETE FROM fields RETURNING *) SELECT * FROM gone",
        "SELECT * FROM checkpoint()",
        slow("SELECT * FROM query('SELECT 1')"),
        "CALL pragma_version()",
        slow("PRAGMA version"),
        "SELECT 1; DROP VIEW fields",
        # A PIVOT that lists no values runs as several statements: its reads are checked all the same.
        "WITH gone AS (DELETE FROM fields RETURNING *) PIVOT gone ON status USING count(*)",
        slow("PIVOT (SELECT * FROM query('SELECT 1 AS a')) ON a USING count(*)"),
        slow("EXPLAIN ANALYZE PIVOT (SELECT * FROM checkpoint()) ON a"),
    ],
)
def test_every_node_of_the_statement_must_read(built_registry, cli, sql):
    result = cli("query", sql, root=built_registry.root)
    assert result.code == 1, (result.code, result.err)
    assert "refused" in result.err and result.out == ""
    still = cli("query", "SELECT count(*) AS n FROM fields", "--format", "json", root=built_registry.root)
    assert still.code == 0 and json.loads(still.out)[0]["n"] > 0


@pytest.mark.parametrize(
    "sql",
    [
        "DESCRIBE fields",
        slow("SHOW TABLES"),
        "SUMMARIZE SELECT 1 AS a",
        slow("VALUES (1), (2)"),
        slow("WITH a AS (SELECT 1 AS x) SELECT * FROM a"),
        "FROM fields SELECT field LIMIT 1",
        slow("EXPLAIN SELECT * FROM fields"),
        "EXPLAIN ANALYZE SELECT count(*) FROM fields",
        "SELECT * FROM query_table('fields') LIMIT 1",
        "PIVOT (SELECT reference_id, status FROM fields) ON status USING count(*) ORDER BY reference_id",
        slow("SELECT * FROM (PIVOT fields ON status USING count(*) GROUP BY reference_id) LIMIT 2"),
        slow("EXPLAIN PIVOT fields ON status, unit USING count(*) GROUP BY reference_id"),
        slow("UNPIVOT (SELECT 1 AS a, 2 AS b) ON a, b INTO NAME k VALUE v"),
        slow("pivot fields on status || '-' || unit using count(*)"),
        slow(
            "PIVOT (PIVOT fields ON status USING count(*) GROUP BY reference_id) ON reference_id USING first(unknown)"
        ),
        slow("PIVOT fields ON status = 'unknown' USING count(*)"),
    ],
)
def test_reading_statements_of_every_form_run(built_registry, cli, sql):
    result = cli("query", sql, "--format", "json", root=built_registry.root)
    assert result.code == 0, result.err
    assert json.loads(result.out)


def test_an_allocation_duckdb_does_not_count_stops_at_the_memory_limit(built_registry, cli):
    """A 3 GB string is not held in DuckDB's buffer pool, so its memory_limit lets it through (5.9 GB RSS was
    seen): the child's address space is limited, and the allocation fails there."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    result = cli(
        "query", "SELECT length(repeat('ab', 1500000000)) AS n", "--memory-limit", "100MB", root=built_registry.root
    )
    assert result.code == 1, result.out
    assert "needs more than the memory limit of 100MB; raise it with --memory-limit" in result.err
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KB: not in this process
    assert time.monotonic() - started < 30
    ok = cli("query", "SELECT length(repeat('ab', 1000)) AS n", "--format", "csv", root=built_registry.root)
    assert ok.code == 0 and ok.out == "n\n2000\n"


@pytest.mark.parametrize("threads", ["0", "65", "100000", "99999999999"])
def test_threads_are_bounded(built_registry, cli, threads):
    started = time.monotonic()
    result = cli("query", "SELECT 1", "--threads", threads, root=built_registry.root)
    assert result.code == 2 and "--threads" in result.err and "from 1 to 64" in result.err
    assert time.monotonic() - started < 5


def test_a_saved_query_that_is_not_a_regular_file_is_refused_without_echoing_it(
    built_registry, cli, tmp_path, monkeypatch
):
    monkeypatch.setenv("FABRICREF_TEST_SECRET", "s3cr3t-value-never-printed")
    result = cli("query", "--file", "/proc/self/environ", root=built_registry.root)
    assert result.code == 2, result.err
    assert "s3cr3t" not in result.err + result.out and "/proc/self/environ" in result.err
    fifo = tmp_path / "q.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    for path, said in (
        (fifo, "not a regular file"),
        (Path("/dev/zero"), "not a regular file"),
        (tmp_path, "directory"),
    ):
        r = cli("query", "--file", str(path), root=built_registry.root)
        assert r.code == 2 and said in r.err, r.err
    assert time.monotonic() - started < 10
    big = tmp_path / "big.sql"
    big.write_bytes(b"SELECT 1 -- " + b"x" * (1 << 20))
    r = cli("query", "--file", str(big), root=built_registry.root)
    assert r.code == 2 and "at most" in r.err


def test_an_error_in_a_saved_query_names_the_file_not_its_text(built_registry, cli, tmp_path):
    saved = tmp_path / "broken.sql"
    saved.write_text("SELECT tok3n_abc FROM nowhere_xyz WHERE\n")
    result = cli("query", "--file", str(saved), root=built_registry.root)
    assert result.code == 1
    assert str(saved) in result.err and "Error" in result.err
    assert "tok3n_abc" not in result.err and "nowhere_xyz" not in result.err


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
@pytest.mark.parametrize(
    "verb",
    [
        ["query", "SELECT 1 AS a", "--output"],
        ["export", "graph", "nvidia-dgx-h100", "--output"],
        ["measured", "compare", "--topology", "nvidia-dgx-h100", "--plot"],
        [
            "estimate",
            "collective",
            "--op",
            "all-reduce",
            "--topology",
            "nvidia-dgx-h100",
            "--ranks",
            "8",
            "--sweep",
            "8:1MiB",
            "--plot",
        ],
    ],
)
def test_an_output_that_is_no_regular_file_is_refused_not_replaced(built_registry, cli, tmp_path, kind, verb):
    """`query --output /dev/full` (run as root) renamed its temporary file over the device node: /dev/full became
    a plain file. A FIFO, a socket or a link at PATH was replaced the same way, and by `--plot`."""
    import os

    target = tmp_path / "out"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        target.symlink_to(tmp_path / "elsewhere")
    else:
        target.mkdir()
    before = target.lstat()
    result = cli(*verb, str(target), root=built_registry.root)
    assert result.code == 2, (result.out, result.err)
    assert f"{verb[-1]} {target}: is" in result.err and "expected a new file or a regular file" in result.err
    after = target.lstat()
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
