"""Output formats that other tools read: strict JSON (no NaN / Infinity) and CSV with nested values as JSON."""

from __future__ import annotations

import json


def _no_constants(name: str) -> None:
    raise AssertionError(f"invalid JSON constant {name}")


def test_query_json_is_strict_and_csv_flattens_structs(built_registry, cli):
    """NaN / Infinity are not JSON: null instead. A STRUCT or LIST is JSON text in CSV, never a Python repr."""
    sql = "SELECT 'nan'::DOUBLE AS a, '-inf'::DOUBLE AS b, 1.5 AS c, {'x': 1, 'y': [2, 3]} AS s, [1, 2] AS l"
    r = cli("query", "--format", "json", sql, root=built_registry.root)
    assert r.code == 0, r.err
    assert json.loads(r.out, parse_constant=_no_constants) == [
        {"a": None, "b": None, "c": 1.5, "s": {"x": 1, "y": [2, 3]}, "l": [1, 2]}
    ]
    r = cli("query", "--format", "csv", sql, root=built_registry.root)
    assert r.code == 0, r.err
    assert r.out.splitlines() == ["a,b,c,s,l", ',,1.5,"{""x"":1,""y"":[2,3]}","[1,2]"']


def test_flags_show_no_value_placeholder(cli):
    """`--json <bool>` read as if the flag took a value; a flag shows none, a valued option keeps its type."""
    r = cli("estimate", "workload", "--help")
    assert r.code == 0
    assert "<bool>" not in r.out
    assert any("--json" in line and "Print JSON" in line for line in r.out.splitlines())
    assert any("--root" in line and "<path>" in line for line in r.out.splitlines())
