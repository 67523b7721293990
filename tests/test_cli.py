"""The CLI package's shape: importing it loads no stage code; --version; bound parameters in library SQL."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

from conftest import ROOT

STAGES = ("retrieve", "extract", "compile", "topology", "traffic", "report")


def test_importing_the_cli_loads_no_stage_package():
    """A stage verb imports its stage inside the command, so `fabricref traffic` never loads report code."""
    code = "import sys, pipeline.cli; print('\\n'.join(sorted(m for m in sys.modules if m.startswith('pipeline'))))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    assert "pipeline.cli.stages" in loaded  # the verbs are registered ...
    packages = {m.split(".")[1] for m in loaded if "." in m}
    assert packages & set(STAGES) == set()  # ... without loading any stage


def test_version_flag(cli):
    result = cli("--version")
    assert result.code == 0
    assert result.out == f"fabricref {version('fabricref')}\n"


def test_show_takes_the_id_as_a_bound_parameter(built_registry, cli):
    """An id with a quote is just an unknown id (exit 2), not SQL."""
    result = cli("show", "x' OR '1'='1", root=built_registry.root)
    assert result.code == 2
    assert "no reference \"x' OR '1'='1\"" in result.err
