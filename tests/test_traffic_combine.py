"""The traffic stage's item payloads and its combine step (issue 16): an item's tables stored column by column
(pipeline/traffic/payload.py) and joined in item order give the same Parquet bytes as the rows did; the plot
data read from the columns in memory is the same bytes as read back from the written tables, and where it could
differ (a NaN, a tie, an unexpected type) the in-memory path declines and the tables are read back."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import pytest
from fabricref.core.columns import plain
from fabricref.core.registry import Tables, write_columns, write_table
from fabricref.traffic import combine, payload, plots
from fabricref.traffic.parts import LINK_COLUMNS, TABLES, TRAFFIC_COLUMNS

NEGATIVE_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000001))[0]  # a NaN with sign and payload bits


def _bits(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def _link(topology: str, workload: str, phase: str, source: str, target: str, util: Any, flows: Any = 4) -> tuple:
    return (topology, workload, phase, source, target, "scale_out", "leaf-spine", 1.5e9, 0.0, 400.0, util, flows)


def _roundtrip(columns: list[tuple[str, str]], rows: list[tuple]) -> list[Any]:
    data = payload.encode({"t": (columns, rows)}, {"metrics": {"x": {"step_s": 1.25}}})
    back = payload.decode(data)
    assert back.extra == {"metrics": {"x": {"step_s": 1.25}}} and back.rows == {"t": len(rows)}
    return back.tables["t"]


def test_a_payload_gives_back_every_value_with_its_type():
    columns = [("s", "VARCHAR"), ("d", "DOUBLE"), ("i", "INTEGER"), ("b", "BIGINT"), ("n", "VARCHAR")]
    rows = [("a", 1.5, 3, 2**62, None), ("é – ≥", -0.0, -7, -(2**63), "x"), ("a", math.inf, 0, 2**63 - 1, "x")]
    back = _roundtrip(columns, rows)
    assert [type(c).__name__ for c in back] == ["Coded", "ndarray", "ndarray", "ndarray", "Coded"]
    values = [plain(c) for c in back]
    assert list(zip(*values, strict=True)) == rows
    assert [type(v) for v in values[1]] == [float] * 3 and [type(v) for v in values[3]] == [int] * 3
    assert math.copysign(1.0, values[1][1]) == -1.0  # -0.0 kept


def test_a_column_a_raw_array_cannot_carry_exactly_stays_a_json_list():
    columns = [("d", "DOUBLE"), ("i", "INTEGER"), ("big", "BIGINT"), ("flag", "BOOLEAN"), ("nested", "VARCHAR[]")]
    rows = [(1, True, 2**63, True, ["a"]), (None, 2, 1, False, []), (2.5, None, 0, None, None)]
    back = _roundtrip(columns, rows)
    # an int among DOUBLEs, a bool among INTEGERs, an int beyond int64, a NULL among numbers: as the list of values
    assert all(isinstance(c, list) for c in back)
    assert list(zip(*back, strict=True)) == [tuple(list(v) if isinstance(v, list) else v for v in r) for r in rows]
    assert [type(v) for v in back[0]] == [int, type(None), float]


def test_a_nan_comes_back_as_the_one_nan_json_gave_back():
    (back,) = _roundtrip([("d", "DOUBLE")], [(NEGATIVE_NAN,), (math.nan,), (2.0,)])
    assert [_bits(v) for v in plain(back)[:2]] == [_bits(math.nan)] * 2
    assert _bits(NEGATIVE_NAN) != _bits(math.nan)  # the case is real: its bits differ from Python's NaN


def test_joined_payloads_write_the_same_parquet_as_the_rows(tmp_path: Path):
    """Three items (their rows in item order), one with a NULL utilization (a list column) and one with no rows:
    joined and written, byte for byte the table written from all the rows; the nested lineage column too."""
    items = [
        [_link("t1", "w", "dp", "n1", "n2", 0.5), _link("t1", "w", "dp", "n2", "n1", 1.0, 7)],
        [],
        [_link("t0", "v", "tp", "é", "n1", None), _link("t0", "v", "tp", "n1", "é", 1.0)],
    ]
    lineage = [{"reference_id": "r", "field": "f", "status": "published", "confidence": "published"}]
    phases = [
        [("t1", "w", "dp", *(["x"] * 3), 8, 1, 3, 1.0, 2.0, "n", "t", 2, 1.0, 2.0, 0.1, 0.2, 0.0, 0.3, 0.9, "bw", "c",
          lineage, "")],
        [],
        [("t0", "v", "tp", *(["y"] * 3), 4, 2, 1, 1.5, 2.5, "n", "t", 1, 2.0, 3.0, 0.1, 0.2, 0.0, 0.3, 0.3, "lat", "c",
          [], "note")],
    ]  # fmt: skip
    for name, columns, per_item in (("traffic_links", LINK_COLUMNS, items), ("traffic", TRAFFIC_COLUMNS, phases)):
        order = TABLES[name][1]
        parts = [payload.decode(payload.encode({name: (columns, rows)}, {})).tables[name] for rows in per_item]
        joined = combine.join({name: parts})[name]
        write_columns(tmp_path / "joined", name, columns, order, joined)
        write_table(tmp_path / "rows", name, columns, order, [r for rows in per_item for r in rows])
        assert (tmp_path / "joined" / f"{name}.parquet").read_bytes() == (
            tmp_path / "rows" / f"{name}.parquet"
        ).read_bytes()


def _plot_files(tmp_path: Path, name: str, phases: list[tuple], links: list[tuple]) -> tuple[bool, dict[str, bytes]]:
    """The plot data written from the columns in memory (and whether that path took it), and as read back."""
    tables = {}
    for table, columns, rows in (("traffic", TRAFFIC_COLUMNS, phases), ("traffic_links", LINK_COLUMNS, links)):
        tables[table] = payload.decode(payload.encode({table: (columns, rows)}, {})).tables[table]
        write_table(tmp_path / name, table, columns, TABLES[table][1], rows)
    memory = plots.phases_from(tables["traffic"], tables["traffic_links"])
    with Tables({t: tmp_path / name / f"{t}.parquet" for t in tables}) as t:
        plots.write_phases(tmp_path / name / "read", t)
    back = {f.name: f.read_bytes() for f in (tmp_path / name / "read").iterdir()}
    assert sorted(back) == ["link_utilization.csv", "phase_times.csv"]
    if memory is not None:
        assert memory == back
    return memory is not None, back


def _phase(topology: str, workload: str, phase: str, latency: float, count: int = 3) -> tuple:
    return (topology, workload, phase, "d", "c", "a", 8, 1, count, 1.0, 2.0, "n", "t", 2, 1.0, 2.0, latency, 0.25,
            0.0, 0.3, 0.9, "bw", "c", [], "")  # fmt: skip


def test_the_plot_data_from_memory_is_the_plot_data_read_back(tmp_path: Path):
    """Ties at the top (30 links at utilization 1.0 and one at 1.0 + 2e-16: the 25 smallest labels among them),
    labels whose order differs from their parts' order (a workload id that is a prefix of another, non-ASCII),
    NULL utilizations, rows given unsorted; and a phase table given in reverse order."""
    links = [_link("t", "w-b", "dp", f"n{i:02d}", "z", 1.0) for i in range(30)]
    links += [_link("t", "w", "dp", "é", "a", 1.0 + 2e-16), _link("t", "w", "tp", "n", "m", None)]
    links += [_link("t", "w", "dp", f"m{i}", "a", i / 70) for i in range(40)]
    links.reverse()
    phases = [_phase("t", w, p, 1e-4 * i) for i, (w, p) in enumerate([("w-b", "dp"), ("w", "tp"), ("w", "dp")])]
    took, back = _plot_files(tmp_path, "ties", phases, links)
    assert took
    listed = back["link_utilization.csv"].decode().splitlines()
    assert listed[1].startswith("w @ t : dp : é – a,1.0") and len(listed) == 26
    assert back["phase_times.csv"].decode().splitlines()[1].startswith("w @ t : dp,overhead,")
    # Fewer than 25 links: every one with a utilization.
    took, back = _plot_files(tmp_path, "few", phases, links[:10])
    assert took and len(back["link_utilization.csv"].decode().splitlines()) == 11


@pytest.mark.parametrize(
    "case",
    ["nan utilization", "tie in the phase key", "int among doubles"],
)
def test_the_in_memory_plot_data_declines_where_the_sql_could_differ(tmp_path: Path, case: str):
    links = [_link("t", "w", "dp", f"n{i}", "z", 0.5) for i in range(30)]
    phases = [_phase("t", "w", "dp", 0.1), _phase("t", "w", "tp", 0.2)]
    if case == "nan utilization":
        links.append(_link("t", "w", "dp", "q", "z", math.nan))
    elif case == "tie in the phase key":
        phases.append(_phase("t", "w", "dp", 0.3))
    else:
        phases.append(_phase("t", "w", "pp", 1))  # type: ignore[arg-type]
    took, _ = _plot_files(tmp_path, case.replace(" ", "-"), phases, links)
    assert not took


def test_the_caveats_come_in_the_order_the_sql_gives(tmp_path: Path):
    """DISTINCT … ORDER BY on text: code point order (DuckDB's binary order of UTF-8), NULL last; checked against
    DuckDB on the same values."""
    texts = ["b", "a", "É", "e", "a b", "ab", "Z", "–", None, "b"]
    columns = TABLES["traffic_workloads"][0]
    names = [c for c, _ in columns]
    rows = [tuple(t if n == "caveat" else (i if n in ("accelerators",) else None) for n in names) for i, t in
            enumerate(texts)]  # fmt: skip
    rows = [tuple(f"x{i}" if n in ("topology_id", "workload_id") else v for n, v in zip(names, r, strict=True))
            for i, r in enumerate(rows)]  # fmt: skip
    write_table(tmp_path, "traffic_workloads", columns, TABLES["traffic_workloads"][1], rows)
    with Tables({"traffic_workloads": tmp_path / "traffic_workloads.parquet"}) as t:
        expected = [r["c"] for r in t.rows("SELECT DISTINCT caveat AS c FROM traffic_workloads ORDER BY 1")]
    tables = combine.join({"traffic_workloads": [[list(c) for c in zip(*rows, strict=True)]]})
    assert combine.caveats(tables) == expected
    assert expected[-1] is None and expected[:3] == ["Z", "a", "a b"]


@pytest.mark.parametrize("seed", range(16))
def test_the_busiest_links_from_memory_match_the_sql_on_random_tables(tmp_path: Path, seed: int):
    """Random link tables whose labels are built to trip a shortcut: ids that are prefixes of each other or hold
    the separators (" @ ", " : ", " – "), utilizations that tie, tie once rounded to 6 places, or are NULL; the
    in-memory ranking (which skips labels that cannot rank) gives the SQL's bytes."""
    import random

    rng = random.Random(seed)
    words = ["w", "w-b", "w b", "w @ x", "é", "a : b", "a", "w @"]
    utils = [1.0, 1.0 + 2e-16, 0.9999999999999997, 0.5, 0.5000004, 0.4999996, 0.25, None, 0.0, -0.0, -1e-9]
    few = utils[: rng.randint(1, len(utils))]
    links = [
        _link(rng.choice(words[:3]), "t", rng.choice(["dp", "dp : x", "tp"]), f"{rng.choice('asxz')}{i}",
              rng.choice(words), rng.choice(few))
        for i in range(rng.choice([10, 24, 400]))
    ]  # fmt: skip
    phases = [_phase("t", "w", "dp", 0.1)]
    took, back = _plot_files(tmp_path, f"seed{seed}", phases, links)
    assert took
    # The generic way (every label built) gives the same: the columns as plain lists.
    listed = [plain(c) for c in payload.decode(payload.encode({"l": (LINK_COLUMNS, links)}, {})).tables["l"]]
    traffic = payload.decode(payload.encode({"t": (TRAFFIC_COLUMNS, phases)}, {})).tables["t"]
    assert plots.phases_from(traffic, listed) == back
