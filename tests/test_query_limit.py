"""`fabricref query` output: a table shows the first rows and says how many more; csv and json print all."""

from __future__ import annotations

import csv
import io
import json

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
