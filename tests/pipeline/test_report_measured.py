"""The report's model-vs-measured page (issue 13): every pinned nccl-tests log beside the model at the same sizes,
cited by file name, origin, pin and SHA-256; built from the `comparison` stage's table alone."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import pytest
from fabricref.cli import main
from fabricref.core.paths import Layout
from fabricref.report import measured as page
from fabricref.traffic import comparison
from jinja2 import Environment

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
RING = FIXTURES / "dgx-h100-8gpu-all-reduce-ring.log"
NVLS = FIXTURES / "dgx-h100-8gpu-all-reduce-nvls.log"
TEMPLATES = Path(page.__file__).parent / "templates"


def _env() -> Environment:
    """The environment the report stage renders with (its templates, the shared ones, the formatter's filters)."""
    from fabricref.report.stage import _env as stage_env

    return stage_env()


@pytest.fixture(scope="module")
def compared(built_registry: Layout, tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """A private copy of the built checkout with two fixture logs imported and the comparison stage run."""
    root = tmp_path_factory.mktemp("report-measured") / "repo"
    shutil.copytree(built_registry.root, root, ignore=shutil.ignore_patterns(".venv", ".git"))
    assert main(["measured", "import", str(RING), "--topology", "nvidia-dgx-h100", "--algorithm", "ring",
                 "--root", str(root)]) == 0  # fmt: skip
    assert main(["measured", "import", str(NVLS), "--topology", "nvidia-dgx-h100", "--root", str(root)]) == 0
    lay = Layout(root)
    comparison.run(lay)
    return lay


def test_the_comparison_table_is_the_model_beside_each_measured_row(compared, cli):
    con = duckdb.connect(":memory:")
    rows = con.execute(
        f"SELECT * FROM read_parquet('{page.table_path(compared)}') WHERE placement = 'out-of-place' "
        "ORDER BY measurement_id, bytes"
    ).fetchall()
    names = [d[0] for d in con.description]
    rows = [dict(zip(names, r, strict=True)) for r in rows]
    assert {r["sha256"] for r in rows} == {hashlib.sha256(p.read_bytes()).hexdigest() for p in (RING, NVLS)}
    assert {r["origin"] for r in rows} == {"measured"}
    # The fixture's own figures: 256 MiB ring all-reduce, busbw 350.00 GB/s in 1342.18 us (line of the log).
    ring = next(r for r in rows if r["algorithm_declared"] == "ring" and r["bytes"] == 268435456)
    assert ring["measured_busbw_gb_per_s"] == 350.0 and ring["measured_seconds"] == pytest.approx(1342.18e-6)
    assert ring["file_name"] == RING.name and ring["pin"] == f"sources/measured/{ring['measurement_id']}.json"
    # The same numbers `measured compare` prints.
    r = cli("measured", "compare", "--topology", "nvidia-dgx-h100", "--json", root=compared.root)
    assert r.code == 0, r.err
    cli_rows = {(x["measurement_id"], x["bytes"]): x for x in json.loads(r.out)["rows"]}
    for row in rows:
        x = cli_rows[(row["measurement_id"], row["bytes"])]
        assert row["model_busbw_gb_per_s"] == pytest.approx(x["model_busbw_gb_per_s"])
        assert row["ratio"] == pytest.approx(row["model_busbw_gb_per_s"] / row["measured_busbw_gb_per_s"])
        assert (row["algorithm"], row["protocol"]) == (x["algorithm"], x["protocol"])


def test_the_page_cites_each_log_and_plots_it_deterministically(compared, tmp_path):
    out = tmp_path / "report"
    link = page.write(compared, out, _env(), ["a caveat"])
    assert link == {"page": "measured.html", "logs": 2}
    page.write(compared, tmp_path / "again", _env(), ["a caveat"])  # written twice: the same plots
    html = (out / "measured.html").read_text()
    for log in (RING, NVLS):
        sha = hashlib.sha256(log.read_bytes()).hexdigest()
        assert sha in html and log.name in html
        mid = f"nvidia-dgx-h100-all-reduce-{sha[:12]}"
        assert f"sources/measured/{mid}.json" in html
        svg = (out / "plots" / f"measured-{mid}.svg").read_bytes()
        assert b"measured" in svg and b"busbw" in svg and sha[:12].encode() in svg
        assert (tmp_path / "again" / "plots" / f"measured-{mid}.svg").read_bytes() == svg
    assert "origin <code>measured</code>" in html
    assert "350 GB/s" in html  # the ring log's 256 MiB row, through the one formatter
    assert (
        "model: ring / Simple"
        in (out / "plots")
        .joinpath(f"measured-nvidia-dgx-h100-all-reduce-{hashlib.sha256(RING.read_bytes()).hexdigest()[:12]}.svg")
        .read_text()
    )


def test_without_measured_logs_the_page_says_how_to_import_one(built_copy, tmp_path):
    comparison.run(built_copy)
    link = page.write(built_copy, tmp_path, _env(), [])
    assert link["logs"] == 0
    html = (tmp_path / "measured.html").read_text()
    assert "No measured logs are pinned" in html and "fabricref measured import" in html
