"""`fabricref query` output: a table shows the first rows and says how many more; csv and json stream every row
(or --limit's first), whole to --output or ending with an error record on stdout."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
from conftest import env_with_venv
from fabricref.cli.output import emit, print_json_rows, write_csv_batches

SQL = "SELECT i, i * 2 AS twice FROM range(250) t(i) ORDER BY i"


def test_table_shows_100_rows_and_says_how_many_more(built_registry, cli):
    r = cli("query", SQL, root=built_registry.root)
    assert r.code == 0, r.err
    shown = [line for line in r.out.splitlines() if line.startswith("│")]
    assert len(shown) == 100  # rows 0..99 (the header line is drawn with another border)
    assert shown[-1].split("│")[1].strip() == "99"
    assert "150 more rows; use --limit or --format csv/json" in r.err


def test_limit_raises_the_cap_and_a_result_under_it_says_nothing_more(built_registry, cli):
    r = cli("query", SQL, "--limit", "250", root=built_registry.root)
    assert r.code == 0 and "more rows" not in r.err
    assert len([line for line in r.out.splitlines() if line.startswith("│")]) == 250
    assert cli("query", SQL, "--limit", "0", root=built_registry.root).code == 2


def test_csv_and_json_print_every_row(built_registry, cli):
    r = cli("query", SQL, "--format", "csv", root=built_registry.root)
    rows = list(csv.reader(io.StringIO(r.out)))
    assert rows[0] == ["i", "twice"] and len(rows) == 251 and rows[-1] == ["249", "498"]
    assert "more rows" not in r.err
    j = cli("query", SQL, "--format", "json", root=built_registry.root)
    data = json.loads(j.out)
    assert len(data) == 250 and data[-1] == {"i": 249, "twice": 498}


def test_stream_hands_out_bounded_batches_lazily_and_refuses_past_the_cap(built_registry):
    from fabricref.inspect import query as querying

    sql = "SELECT i FROM range(25) t(i) ORDER BY i"
    with querying.stream(built_registry, sql, batch_rows=10) as (columns, batches):
        assert columns == ["i"]
        sizes = [len(b) for b in batches]
    assert sizes == [10, 10, 5]
    got = []
    capped = querying.stream(built_registry, sql, querying.Limits(max_rows=22), batch_rows=10)
    with capped as (_, batches), pytest.raises(querying.QueryError, match="more than 22 rows"):
        for batch in batches:
            got += [r[0] for r in batch]
    assert got == list(range(20))  # the two batches under the cap, not the one that crosses it
    assert querying.run(built_registry, sql)[1] == [(i,) for i in range(25)]


def test_streamed_csv_and_json_are_the_text_of_the_whole_result(capsys):
    """Several batches written one by one give exactly what the one-shot writers give for all rows."""
    columns = ["a", "b"]
    rows = [(1, "x"), (2, None), (3, {"k": [1, 2]}), (4, float("nan")), (5, 'ü\n"q"')]
    rows += [(6, {"b": {"z": 1.5, "a": []}, "a": [{"y": None, "x": True}]}), (7, [])]
    batches = [rows[:2], rows[2:3], rows[3:]]
    for write_all, write_batches in (
        (lambda: write_csv_batches(columns, [rows]), lambda: write_csv_batches(columns, batches)),
        (lambda: emit(columns, rows, as_json=True), lambda: print_json_rows(columns, batches)),
        (lambda: emit(columns, [], as_json=True), lambda: print_json_rows(columns, [])),
    ):
        write_all()
        whole = capsys.readouterr().out
        write_batches()
        assert capsys.readouterr().out == whole


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_big_result_streams_in_bounded_memory(built_registry, fmt, tmp_path):
    """`select * from topology_edges` (~280,000 rows): the whole result held as Python rows took 0.6 GB (CSV)
    and 1.5 GB (JSON); streamed, the process stays within 400 MB and the output is complete."""
    probe = (
        "import resource, subprocess, sys\n"
        "with open(sys.argv[1], 'wb') as out:\n"
        "    code = subprocess.run(sys.argv[2:], stdout=out).returncode\n"
        "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    target = tmp_path / f"edges.{fmt}"
    cmd = ["fabricref", "query", "select * from topology_edges", "--format", fmt, "--timeout", "900"]
    cmd += ["--root", str(built_registry.root)]  # not a test of the time limit (a loaded machine is slow)
    done = subprocess.run(
        [sys.executable, "-c", probe, str(target), *cmd], capture_output=True, text=True, env=env_with_venv()
    )
    code, peak_kb = map(int, done.stdout.split())
    assert code == 0, done.stderr
    assert peak_kb < 400 * 1024, f"peak {peak_kb / 1024:.0f} MB"
    from fabricref.inspect import query as querying

    (count,) = querying.run(built_registry, "select count(*) from topology_edges")[1][0]
    assert count > 200_000
    with target.open() as f:
        if fmt == "csv":
            assert sum(1 for _ in f) == count + 1
        else:
            assert sum(1 for line in f if line == "  {\n") == count  # each row object opens on its own line


def test_the_time_limit_counts_the_query_not_a_slow_reader(built_registry):
    """A reader slower than the time limit (a pipe to a slow disk, a terminal) still gets every row: the limit
    covers the time the query takes, not the time spent writing what it returned."""
    import time

    from fabricref.inspect import query as querying

    sql = "SELECT i FROM range(60000) t(i) ORDER BY i"
    got = []
    # Batches larger than a pipe's buffer, so the query waits for the reader between them.
    with querying.stream(built_registry, sql, querying.Limits(timeout=4.0), batch_rows=20_000) as (_, batches):
        for batch in batches:
            time.sleep(1.4)  # 4.2 s of writing in all, past the 4 s limit (the query itself takes well under it)
            got += [r[0] for r in batch]
    assert got == list(range(60000))


BIG = "SELECT i FROM range(25000) t(i) ORDER BY i"  # three batches: the cap below is crossed by the second


@pytest.mark.parametrize("fmt", ["csv", "json", "table"])
def test_a_failure_midway_leaves_no_half_file(built_registry, cli, tmp_path, fmt):
    """`--output PATH` writes a temporary file beside PATH and renames it when the result is complete: a query
    that fails after some rows were written leaves no file (and an existing one as it was), and no leftovers."""
    target = tmp_path / f"out.{fmt}"
    r = cli("query", BIG, "--format", fmt, "--max-rows", "15000", "--output", str(target), root=built_registry.root)
    assert r.code == 1 and "more than 15,000 rows" in r.err and r.out == ""
    assert list(tmp_path.iterdir()) == []
    target.write_text("last week's export\n")
    r = cli("query", BIG, "--format", fmt, "--max-rows", "15000", "--output", str(target), root=built_registry.root)
    assert r.code == 1 and target.read_text() == "last week's export\n" and list(tmp_path.iterdir()) == [target]
    # Every row in csv and json; a table shows its first 100 (laying out 25,000 rows is seconds of CPU).
    every = [] if fmt == "table" else ["--limit", "30000"]
    r = cli("query", BIG, "--format", fmt, "--output", str(target), *every, root=built_registry.root)
    assert r.code == 0 and r.out == "", r.err
    text = target.read_text()
    if fmt == "csv":
        assert text.splitlines()[-1] == "24999" and len(text.splitlines()) == 25001
    elif fmt == "json":
        assert json.loads(text)[-1] == {"i": 24999}
    else:
        shown = [line for line in text.splitlines() if line.startswith("│")]
        assert len(shown) == 100 and shown[-1].split("│")[1].strip() == "99"
        assert "24,900 more rows" in r.err
    assert list(tmp_path.iterdir()) == [target]


def test_a_failure_midway_on_stdout_ends_with_an_error_record(built_registry, cli):
    """Streamed to stdout, rows already written cannot be taken back: the output still parses, and its last
    record says the result is incomplete and why (with exit code 1 and the message on stderr)."""
    r = cli("query", BIG, "--format", "json", "--max-rows", "15000", root=built_registry.root)
    assert r.code == 1 and "more than 15,000 rows" in r.err
    data = json.loads(r.out)
    assert len(data) == 10_001 and data[:2] == [{"i": 0}, {"i": 1}]
    assert data[-1]["complete"] is False and "more than 15,000 rows" in data[-1]["error"]
    r = cli("query", BIG, "--format", "csv", "--max-rows", "15000", root=built_registry.root)
    assert r.code == 1
    rows = list(csv.reader(io.StringIO(r.out)))
    assert rows[0] == ["i"] and len(rows) == 10_002
    assert rows[-1][0].startswith("# error: incomplete result:") and "more than 15,000 rows" in rows[-1][0]


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_limit_caps_every_format_and_says_so(built_registry, cli, fmt):
    """`--limit N` makes a large export deliberate in every format: N rows, complete and valid, and stderr says
    that more rows exist."""
    r = cli("query", SQL, "--format", fmt, "--limit", "10", root=built_registry.root)
    assert r.code == 0, r.err
    rows = list(csv.reader(io.StringIO(r.out)))[1:] if fmt == "csv" else json.loads(r.out)
    assert len(rows) == 10
    assert "stopped at --limit 10 rows: the query returns more" in r.err
    r = cli("query", SQL, "--format", fmt, "--limit", "250", root=built_registry.root)
    assert r.code == 0 and "more" not in r.err


def test_a_table_of_records_shows_every_stored_digit(built_registry, cli):
    """A query is a view of the records: a stated 2,614.9 TFLOP/s is not shown as 2,610 (the three-digit formatter
    is for estimates), and no number turns into exponent notation."""
    r = cli(
        "query",
        "SELECT value_number FROM fields WHERE reference_id = 'amd-mi300x-pollara400'"
        " AND field = 'accelerator.peak_dense_fp8'",
        root=built_registry.root,
    )
    assert r.code == 0, r.err
    assert "2,614.9" in r.out and "2,610" not in r.out
    r = cli(
        "query",
        "SELECT 1307.4::DOUBLE AS a, 0.000000125::DOUBLE AS b, 123456789.5::DOUBLE AS c",
        root=built_registry.root,
    )
    assert r.code == 0, r.err
    assert "1,307.4" in r.out and "0.000000125" in r.out and "123,456,789.5" in r.out
    assert "e-" not in r.out and "e+" not in r.out
