"""The one way a stage writes a table (pipeline/core/registry.py): sorted, single-threaded Parquet, so the same rows
give the same bytes however they arrive."""

from __future__ import annotations

import random
from pathlib import Path

import duckdb
from fabricref.core import registry

COLUMNS = [("name", "VARCHAR"), ("n", "INTEGER"), ("x", "DOUBLE"), ("ok", "BOOLEAN"), ("tags", "VARCHAR[]")]
ROWS = [(f"r{i:03d}", i, i / 7 if i % 5 else None, i % 2 == 0, [f"t{i}"] * (i % 3)) for i in range(300)]


def test_rows_in_any_order_and_any_batches_give_the_same_bytes(tmp_path: Path):
    one = registry.write_table(tmp_path / "one", "t", COLUMNS, ["name"], ROWS).read_bytes()
    shuffled = list(ROWS)
    random.Random(25).shuffle(shuffled)
    with registry.table_writer(tmp_path / "batches", {"t": (COLUMNS, ["name"]), "u": (COLUMNS, ["n"])}) as add:
        for start in range(0, len(shuffled), 70):
            add("t", shuffled[start : start + 70])
        add("u", ROWS[:3])
        add("t", [])
    assert (tmp_path / "batches" / "t.parquet").read_bytes() == one
    assert duckdb.sql(f"SELECT count(*) FROM '{tmp_path / 'batches' / 'u.parquet'}'").fetchall() == [(3,)]


def test_values_come_back_with_their_types_nulls_and_lists(tmp_path: Path):
    path = registry.write_table(tmp_path, "t", COLUMNS, ["name"], [ROWS[5], ROWS[1], ROWS[0]])
    assert duckdb.sql(f"SELECT * FROM '{path}'").fetchall() == [ROWS[0], ROWS[1], ROWS[5]]


def test_a_failure_while_filling_writes_nothing(tmp_path: Path):
    try:
        with registry.table_writer(tmp_path, {"t": (COLUMNS, ["name"])}) as add:
            add("t", ROWS[:2])
            raise RuntimeError("stop")
    except RuntimeError:
        pass
    assert not list(tmp_path.iterdir())


def test_columns_are_varchar_unless_a_type_is_given_and_a_keyword_wins():
    assert registry.columns("a b:DOUBLE c d:INTEGER", {"c": "BOOLEAN", "d": "BIGINT"}, d="STRUCT(x VARCHAR)[]") == [
        ("a", "VARCHAR"),
        ("b", "DOUBLE"),
        ("c", "BOOLEAN"),
        ("d", "STRUCT(x VARCHAR)[]"),
    ]
    assert registry.columns(["x", "y"], {"y": "DOUBLE"}) == [("x", "VARCHAR"), ("y", "DOUBLE")]
