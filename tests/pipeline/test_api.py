"""The Python API: `import fabricref` (not shadowed by a user's `pipeline/` folder) and the notebook example."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fabricref.cli import main
from fabricref.core.paths import Layout

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "notebook.py"


def test_import_fabricref_is_not_shadowed_by_a_local_pipeline_folder(tmp_path: Path) -> None:
    """A notebook's working directory comes first on sys.path: its own `pipeline/` must not break fabricref."""
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "__init__.py").write_text("raise ImportError('the user project pipeline')\n")
    code = (
        "import fabricref, sys; print(fabricref.__name__, sorted(fabricref.__all__)); "
        "print(callable(fabricref.registry), callable(fabricref.audit)); "
        "print(any(m == 'pipeline' or m.startswith('pipeline.') for m in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "fabricref ['audit', 'checkout', 'estimate_workload', 'graph', 'plan_record', 'plan_serve', 'plan_train', "
        "'registry']",
        "True True",
        "False",
    ]


@pytest.fixture(scope="module")
def topology_built(built_registry: Layout, tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """A private copy of the built registry (topology stage included), so the shared one stays untouched."""
    lay = Layout(tmp_path_factory.mktemp("api") / "repo")
    shutil.copytree(built_registry.root, lay.root, symlinks=True)
    return lay


@pytest.mark.slow
def test_api_matches_the_cli(topology_built: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    import fabricref

    root = topology_built.root
    with fabricref.registry(root) as con:
        (value, unit, direction) = con.execute(
            "SELECT value_number, unit, direction FROM fields WHERE reference_id = ? AND field = ?",
            ["nvidia-dgx-h100", "scale_up.bandwidth_per_accelerator"],
        ).fetchone()
        with pytest.raises(Exception, match="disabled"):  # no file written from SQL: the output stays as built
            con.execute(f"COPY fields TO '{root / 'fields.csv'}'")
    assert (value, unit, direction) == (900.0, "GB/s", "bidirectional")  # NVLink 4: 18 links x 50 GB/s

    g = fabricref.graph("nvidia-dgx-h100", root)
    assert g.graph["topology_id"] == "nvidia-dgx-h100"
    assert sum(1 for _, d in g.nodes(data=True) if d["kind"] == "accelerator") == 8

    nvl72 = fabricref.graph("nvidia-gb200-nvl72", root)
    phases = fabricref.estimate_workload(nvl72, "llama70b-serve-disaggregated", root)
    assert "kv-transfer" in [p["phase"] for p in phases]
    capsys.readouterr()
    argv = ["estimate", "workload", "nvidia-gb200-nvl72", "llama70b-serve-disaggregated", "--json", "--root", str(root)]
    assert main(argv) == 0
    cli_phases = json.loads(capsys.readouterr().out)["phases"]
    assert json.loads(json.dumps(phases, default=str)) == cli_phases

    tree = fabricref.audit("nvidia-dgx-h100", "scale_up.bandwidth_per_accelerator", root)
    assert (tree["value"], tree["unit"]) == (900.0, "GB/s")
    from fabricref.inspect.audit import audit as library_audit

    assert callable(fabricref.audit) and callable(fabricref.graph)  # submodules never shadow the API's names
    assert library_audit(topology_built, "nvidia-dgx-h100", "scale_up.bandwidth_per_accelerator") == tree


def test_readme_shows_the_example_verbatim() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    body = EXAMPLE.read_text().split('"""', 2)[2].lstrip("\n")
    assert body in blocks, "README's Python API example must be examples/notebook.py without its docstring"


@pytest.mark.slow
def test_notebook_example_runs_from_the_checkout(topology_built: Layout) -> None:
    """The README example, as a user runs it: from inside the checkout, no FABRICREF_ROOT, only `fabricref`."""
    env = {k: v for k, v in os.environ.items() if k not in ("FABRICREF_ROOT", "PYTHONPATH")}
    r = subprocess.run(
        [sys.executable, str(EXAMPLE)], cwd=topology_built.root / "models", capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "nvidia-dgx-h100: 900 GB/s bidirectional (published)" in lines
    assert any(re.fullmatch(r"nvidia-gb200-nvl72 \d+ nodes \d+ edges", line) for line in lines)
    assert any(line.startswith("kv-transfer: ") for line in lines)
    assert lines[-1].startswith("1800.0 GB/s published [True")


def test_every_reader_method_the_example_names_exists_with_the_pinned_duckdb() -> None:
    """The example's comments name DuckDB methods for pandas and polars: each exists where the comment says (a
    `.name()` after `con.sql(...)` on the relation it returns, otherwise on the connection `registry()` gives;
    the connection has no `.pl()`)."""
    import duckdb

    con = duckdb.connect()
    try:
        missing = []
        for line in EXAMPLE.read_text().splitlines():
            if not line.lstrip().startswith("#"):
                continue
            on = con
            for chain in re.findall(r"`((?:con\.sql\(\w+\))?(?:\.\w+\(\))+)`", line):
                if chain.startswith("con.sql("):
                    on = con.sql("SELECT 1")
                for name in re.findall(r"\.(\w+)\(\)", chain.split(")", 1)[1] if chain.startswith("con.") else chain):
                    if not hasattr(on, name):
                        missing.append(f"{name} on {type(on).__name__}")
        assert missing == []
    finally:
        con.close()
