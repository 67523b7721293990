"""Hostile SQL, round 2: `fabricref query` runs one SELECT under a time limit, a memory limit and a row cap,
all set before the configuration is locked (a statement cannot raise them)."""

from __future__ import annotations

import time

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
