"""Measured nccl-tests logs: parsing (malformed lines refused with their number), pinning by SHA-256, the
measurements table, model-vs-measured comparison, and the validation of the model against the fixtures."""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from pathlib import Path

import duckdb
import pytest
from fabricref.core.paths import Layout
from fabricref.errors import ValidationError
from fabricref.estimate.nccl_log import parse_bytes, parse_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
LOGS = sorted(FIXTURES.glob("*.log"))
# Which topology each fixture ran on, and the NCCL_ALGO it forced (from its header comment).
RUNS = {
    "dgx-h100-8gpu-all-reduce-nvls.log": ("nvidia-dgx-h100", None),
    "dgx-h100-8gpu-all-reduce-ring.log": ("nvidia-dgx-h100", "ring"),
    "dgx-h100-8gpu-all-reduce-small.log": ("nvidia-dgx-h100", None),
    "2x-dgx-h100-all-reduce-ring.log": ("illustrative-h100-4096", "ring"),
}
RING = (FIXTURES / "dgx-h100-8gpu-all-reduce-ring.log").read_text()
# One xdist worker runs the module, so `measured_repo` is built once per run; it is not shared across workers, as
# its tests write its database and try imports in it.
pytestmark = pytest.mark.xdist_group("measured")


@pytest.fixture(scope="module")
def measured_repo(built_registry: Layout, tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """A private copy of the built checkout with every fixture imported."""
    from fabricref.cli import main

    root = tmp_path_factory.mktemp("measured") / "repo"
    shutil.copytree(built_registry.root, root, ignore=shutil.ignore_patterns(".venv", ".git"))
    for name, (topology, algorithm) in RUNS.items():
        args = ["measured", "import", str(FIXTURES / name), "--topology", topology, "--root", str(root)]
        assert main(args + (["--algorithm", algorithm] if algorithm else [])) == 0
    return Layout(root)


def test_every_fixture_is_listed_and_cites_public_statements():
    assert {p.name for p in LOGS} == set(RUNS)
    for path in LOGS:
        head = path.read_text().split("# nccl-tests version")[0]
        assert "NOT a measurement" in head and "https://github.com/NVIDIA/nccl-tests/" in head, path.name


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_fixture_logs_parse(path):
    log = parse_bytes(path.read_bytes(), str(path))
    assert log.op == "all-reduce" and log.footer
    assert log.ranks == (16 if path.name.startswith("2x") else 8)
    assert log.hosts == log.ranks // 8
    assert {r.placement for r in log.rows} == {"out-of-place", "in-place"}
    sizes = sorted({r.bytes for r in log.rows})
    assert all(b == 2 * a for a, b in itertools.pairwise(sizes))


def _cut(text: str, row: int) -> tuple[str, int]:
    """The text with `row` (0-based among result rows) cut after its in-place time, and that row's line number."""
    lines = text.splitlines()
    rows = [i for i, line in enumerate(lines) if line.strip() and not line.startswith("#")]
    i = rows[row]
    lines[i] = " ".join(lines[i].split()[:9])
    return "\n".join(lines[: i + 1]) + "\n", i + 1


def _row_line(text: str, row: int) -> int:
    lines = text.splitlines()
    return [i for i, line in enumerate(lines) if line.strip() and not line.startswith("#")][row] + 1


def _replace_cell(text: str, row: int, column: int, value: str) -> str:
    lines = text.splitlines()
    i = _row_line(text, row) - 1
    cells = lines[i].split()
    cells[column] = value
    lines[i] = "  ".join(cells)
    return "\n".join(lines) + "\n"


def test_a_truncated_log_is_refused_at_its_last_line():
    text, line = _cut(RING, 3)
    with pytest.raises(ValidationError, match=rf"x.log:{line}: expected 13 columns .* got 9 \(truncated line\?\)"):
        parse_text(text, "x.log")


def test_wrong_columns_are_refused_with_the_line():
    # A log whose rows carry one column more than its header (a shifted or pasted-together line).
    line = _row_line(RING, 1)
    lines = RING.splitlines()
    lines[line - 1] += "  0"
    with pytest.raises(ValidationError, match=rf"x.log:{line}: expected 13 columns"):
        parse_text("\n".join(lines), "x.log")


@pytest.mark.parametrize(("column", "value", "expected"), [(5, "1417.7x", "time must be a number"),
                                                           (6, "nan", "finite"), (0, "2^28", "whole numbers"),
                                                           (8, "3", "3 wrong results")])  # fmt: skip
def test_non_numeric_and_failed_cells_are_refused_with_the_line(column, value, expected):
    text = _replace_cell(RING, 2, column, value)
    with pytest.raises(ValidationError, match=rf"x.log:{_row_line(RING, 2)}: .*{expected}"):
        parse_text(text, "x.log")


def test_a_log_of_another_operation_than_declared_is_refused():
    header_line = next(i for i, t in enumerate(RING.splitlines(), 1) if "Collective test starting" in t)
    with pytest.raises(ValidationError, match=rf"x.log:{header_line}: this is a all-reduce log, but all-gather"):
        parse_text(RING, "x.log", "all-gather")
    # Without the test's name, the rows give it away: busbw is algbw × 2(n-1)/n, not the all-gather (n-1)/n.
    anonymous = RING.replace("# Collective test starting: all_reduce_perf", "#")
    with pytest.raises(ValidationError, match="declare it with --op"):
        parse_text(anonymous, "x.log")
    with pytest.raises(ValidationError, match=rf"x.log:{_row_line(RING, 0)}: redop 'sum': a all-gather log"):
        parse_text(anonymous, "x.log", "all-gather")
    gather_rows = anonymous.replace("     sum  ", "    none  ")
    with pytest.raises(ValidationError, match=rf"x.log:{_row_line(RING, 0)}: .*busbw .* not algbw × 0.875"):
        parse_text(gather_rows, "x.log", "all-gather")


def test_no_header_no_rows_no_devices_are_refused():
    with pytest.raises(ValidationError, match="no column header"):
        parse_text("hello\n", "x.log")
    header_only = RING.split("   268435456")[0]
    with pytest.raises(ValidationError, match="no result rows"):
        parse_text(header_only, "x.log")
    no_devices = "\n".join(t for t in RING.splitlines() if "Rank" not in t)
    with pytest.raises(ValidationError, match="number of ranks is unknown"):
        parse_text(no_devices, "x.log")


@pytest.mark.slow
def test_import_pins_bytes_and_tables_rows_with_the_hash(measured_repo, cli, tmp_path):
    lay = measured_repo
    path = FIXTURES / "dgx-h100-8gpu-all-reduce-ring.log"
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    pin = json.loads((lay.sources_dir / "measured" / f"nvidia-dgx-h100-all-reduce-{sha[:12]}.json").read_text())
    assert pin["origin"] == "measured" and pin["sha256"] == sha and pin["algorithm"] == "ring"
    assert pin["ranks"] == 8 and len(pin["devices"]) == 8
    assert (lay.store_dir / "sha256" / sha[:2] / sha).read_bytes() == path.read_bytes()
    table = lay.registry_dir / "measurements" / "measurements.parquet"
    con = duckdb.connect(":memory:")
    n, shas = con.execute(f"SELECT count(*), list(DISTINCT sha256) FROM read_parquet('{table}') WHERE sha256 = ?",
                          [sha]).fetchone()  # fmt: skip
    assert n == 12 and shas == [sha]
    # Importing the same bytes again changes nothing; declaring them differently is refused.
    again = cli("measured", "import", str(path), "--topology", "nvidia-dgx-h100", "--algorithm", "ring", "--json",
                root=lay.root)  # fmt: skip
    assert again.code == 0 and json.loads(again.out)["new"] is False
    other = cli("measured", "import", str(path), "--topology", "nvidia-dgx-h100", "--algorithm", "tree", root=lay.root)
    assert other.code == 2 and "append-only" in other.err
    assert (
        json.loads((lay.sources_dir / "measured" / f"nvidia-dgx-h100-all-reduce-{sha[:12]}.json").read_text())[
            "algorithm"
        ]
        == "ring"
    )


def test_a_malformed_log_writes_nothing(measured_repo, cli, tmp_path):
    lay = measured_repo
    before = sorted(p.name for p in (lay.sources_dir / "measured").iterdir())
    table = (lay.registry_dir / "measurements" / "measurements.parquet").read_bytes()
    text, line = _cut(RING, 2)
    bad = tmp_path / "bad.log"
    bad.write_text(text)
    r = cli("measured", "import", str(bad), "--topology", "nvidia-dgx-h100", root=lay.root)
    assert r.code == 1 and f"bad.log:{line}:" in r.err
    assert sorted(p.name for p in (lay.sources_dir / "measured").iterdir()) == before
    assert (lay.registry_dir / "measurements" / "measurements.parquet").read_bytes() == table
    sha = hashlib.sha256(bad.read_bytes()).hexdigest()
    assert not (lay.store_dir / "sha256" / sha[:2] / sha).exists()


@pytest.mark.slow
def test_compare_draws_model_against_measured(measured_repo, cli, tmp_path):
    svg = tmp_path / "compare.svg"
    r = cli("measured", "compare", "--topology", "nvidia-dgx-h100", "--plot", str(svg), root=measured_repo.root)
    assert r.code == 0, r.err
    text = svg.read_text()
    assert text.count("measured") >= 3 and "nvls / Simple" in text and "ring / Simple" in text


def test_model_agrees_with_the_fixtures(measured_repo, cli):
    """Within ±15 % of measured busbw at ≥ 256 MiB; within 2× of measured time at ≤ 64 KiB."""
    seen = set()
    for topology in sorted({t for t, _ in RUNS.values()}):
        r = cli("measured", "compare", "--topology", topology, "--json", root=measured_repo.root)
        assert r.code == 0, r.err
        rows = json.loads(r.out)["rows"]
        for row in rows:
            assert set(row) >= {"bytes", "measured_busbw_gb_per_s", "model_busbw_gb_per_s", "ratio"}
            seen.add(row["measurement_id"])
            if row["bytes"] >= 256 << 20:
                assert 0.85 <= row["ratio"] <= 1.15, row
                assert row["ratio"] == pytest.approx(row["model_busbw_gb_per_s"] / row["measured_busbw_gb_per_s"])
            if row["bytes"] <= 64 << 10:
                assert 0.5 <= row["model_seconds"] / row["measured_seconds"] <= 2.0, row
            if row["algorithm_declared"]:
                assert row["algorithm"] == row["algorithm_declared"]
    assert len(seen) == len(RUNS)


@pytest.mark.slow
def test_estimate_collective_in_topology_mode_reproduces_the_fixture_comparisons(measured_repo, cli):
    """What a user types (`estimate collective --topology`) gives the numbers `measured compare` holds against each
    fixture: same algorithm, protocol and busbw, so the ±15 % / 2× agreement above is the calculator's own."""
    for topology in sorted({t for t, _ in RUNS.values()}):
        rows = json.loads(cli("measured", "compare", "--topology", topology, "--json", root=measured_repo.root).out)
        by_log: dict[str, list[dict]] = {}
        for row in rows["rows"]:
            by_log.setdefault(row["measurement_id"], []).append(row)
        for mine in by_log.values():
            for row in (min(mine, key=lambda r: r["bytes"]), max(mine, key=lambda r: r["bytes"])):
                args = ["estimate", "collective", "--topology", topology, "--ranks", str(row["ranks"]),
                        "--op", row["op"], "--bytes", str(row["bytes"]), "--json"]  # fmt: skip
                if row["algorithm_declared"]:
                    args += ["--algorithm", row["algorithm_declared"]]
                r = cli(*args, root=measured_repo.root)
                assert r.code == 0, r.err
                d = json.loads(r.out)
                assert (d["algorithm"], d["protocol"]) == (row["algorithm"], row["protocol"])
                assert d["busbw_gb_per_s"] == pytest.approx(row["model_busbw_gb_per_s"])
                assert d["seconds"] == pytest.approx(row["model_seconds"])


def test_measured_tables_get_views_but_stay_out_of_the_database_stage_output(measured_repo):
    """registry/measurements/ is written outside DVC and is no dep of the `database` stage: its views are in
    registry.duckdb, never in the stage's output views.json (an import would move an output DVC cannot explain)."""
    from fabricref.core import registry

    lay = measured_repo
    built = registry.build_database(lay)
    con = duckdb.connect(str(built), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM measurements").fetchone()[0] > 0
    finally:
        con.close()
    listed = json.loads((lay.registry_dir / "views.json").read_text())["views"]
    assert "measurements" not in listed and "fields" in listed
