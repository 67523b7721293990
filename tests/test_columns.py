"""Tables written through NumPy columns hold exactly what the general (parameter) path writes: same Parquet bytes."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest
from fabricref.core import registry
from fabricref.core.columns import insert_columns

COLUMNS = [
    ("name", "VARCHAR"),
    ("count", "INTEGER"),
    ("big", "BIGINT"),
    ("gbps", "DOUBLE"),
    ("ok", "BOOLEAN"),
]
ROWS = [
    ("b", 2, 2**40, 0.1 + 0.2, True),
    ("a", None, -(2**62), None, False),
    (None, 7, 0, 400, None),  # an int in a DOUBLE column, nulls in every kind
    ("ü-é ⟨x⟩", np.int64(3), np.int32(5), np.float64(1e-300), np.bool_(True)),
]


def test_fast_path_writes_the_same_values_and_bytes_as_the_general_path(tmp_path: Path, monkeypatch):
    fast = registry.write_table(tmp_path / "fast", "t", COLUMNS, ["name"], ROWS)
    got = duckdb.connect().execute(f"SELECT * FROM '{fast}' ORDER BY count NULLS FIRST").fetchall()
    assert got == [
        ("a", None, -(2**62), None, False),
        ("b", 2, 2**40, 0.30000000000000004, True),
        ("ü-é ⟨x⟩", 3, 5, 1e-300, True),
        (None, 7, 0, 400.0, None),
    ]
    # The general path (one parameter list per column), forced: the same file, byte for byte.
    monkeypatch.setattr(registry, "insert_columns", lambda *a: False)
    plain = [tuple(v.item() if isinstance(v, np.generic) else v for v in row) for row in ROWS]
    general = registry.write_table(tmp_path / "general", "t", COLUMNS, ["name"], plain)
    assert general.read_bytes() == fast.read_bytes()


@pytest.mark.parametrize(
    ("sql_type", "values"),
    [
        ("VARCHAR", ["a", 1]),  # not all text
        ("INTEGER", [1, True]),  # a bool is not taken for a number
        ("BIGINT", [2**70]),  # beyond int64
        ("DOUBLE", [1.0, "2"]),
        ("VARCHAR[]", [["a"]]),  # nested types keep the general path
    ],
)
def test_columns_that_do_not_fit_exactly_are_refused_and_nothing_is_inserted(sql_type: str, values: list):
    con = duckdb.connect(":memory:")
    con.execute(f"CREATE TABLE t (x {sql_type})")
    assert insert_columns(con, "t", [("x", sql_type)], [values]) is False
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(0,)]


def test_write_table_falls_back_for_nested_columns(tmp_path: Path):
    cols = [("id", "VARCHAR"), ("tags", "VARCHAR[]")]
    path = registry.write_table(tmp_path, "n", cols, ["id"], [("b", ["x", "y"]), ("a", [])])
    assert duckdb.connect().execute(f"SELECT * FROM '{path}'").fetchall() == [("a", []), ("b", ["x", "y"])]
