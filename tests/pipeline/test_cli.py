"""The CLI package's shape: importing it loads no stage code; --version; bound parameters in library SQL."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

from conftest import ROOT

STAGES = ("retrieve", "extract", "compile", "topology", "traffic", "report")


def test_importing_the_cli_loads_no_stage_package():
    """A stage verb imports its stage inside the command, so `fabricref traffic` never loads report code."""
    code = "import sys, fabricref.cli; print('\\n'.join(sorted(m for m in sys.modules if m.startswith('fabricref'))))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    assert "fabricref.cli.stages" in loaded  # the verbs are registered ...
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


def test_audit_of_a_revision_the_source_does_not_have_is_bad_usage_not_a_hash_alarm(built_registry, cli):
    """Every shipped source has one revision: asking for revision 7 is a wrong argument (exit 2), and nothing
    about it says a snapshot's hash changed."""
    result = cli(
        "audit", "nvidia-gb200-nvl72", "scale_up.bandwidth_per_accelerator", "--revision", "7", root=built_registry.root
    )
    assert result.code == 2
    assert "has no revision 7 (it has 1…1)" in result.err
    assert "NOT VERIFIED" not in result.out
    assert "SHA-256" not in result.err
    zero = cli(
        "audit", "nvidia-gb200-nvl72", "scale_up.bandwidth_per_accelerator", "--revision", "0", root=built_registry.root
    )
    assert zero.code == 2 and "has no revision 0 (it has 1…1)" in zero.err


def test_audit_at_an_existing_revision_verifies_its_hash(built_registry, cli):
    result = cli(
        "audit", "nvidia-gb200-nvl72", "scale_up.bandwidth_per_accelerator", "--revision", "1", root=built_registry.root
    )
    assert result.code == 0
    assert "verified" in result.out and "NOT VERIFIED" not in result.out


def test_diff_to_a_revision_the_source_does_not_have_is_bad_usage(few_sources, cli):
    source = sorted((few_sources.root / "sources" / "pins").glob("*.json"))[0].stem
    result = cli("diff", source, "--to", "9", root=few_sources.root)
    assert result.code == 2
    assert f"source {source} has no revision 9 (it has 1…1)" in result.err


def test_calculator_tables_print_numbers_with_units(cli):
    """70e9 params × 18 B = 1.26e12 B; a ring all-reduce over 8 ranks takes 2 × 7 = 14 steps of 5 µs = 70 µs."""
    memory = cli("estimate", "memory", "--params", "70e9", "--layout", "mixed-adam")
    assert memory.code == 0
    assert "│ 1.26 TB " in memory.out and "│ 70,000,000,000 " in memory.out
    ring = cli(
        "estimate", "collective", "--op", "all-reduce", "--ranks", "8", "--bytes", "1GB",
        "--bandwidth", "400Gb/s", "--latency", "5us",
    )  # fmt: skip
    assert ring.code == 0
    assert "│ 70 µs " in ring.out and "│ 1 GB " in ring.out


def test_pin_model_of_an_unknown_model_is_bad_usage(no_sources, cli):
    result = cli("pin-model", "no-such-model", root=no_sources.root)
    assert result.code == 2
    assert "no model 'no-such-model'; known: clusters/" in result.err


def test_history_and_diff_tell_a_wrong_id_from_a_source_never_pinned(few_sources, cli):
    """A wrong id is bad usage (2); a declared source with no pinned revision is a data gap (1)."""
    for verb in ("history", "diff"):
        wrong = cli(verb, "no-such-source", root=few_sources.root)
        assert wrong.code == 2 and "no source 'no-such-source'" in wrong.err
    bad = cli("history", "../etc", root=few_sources.root)
    assert bad.code == 2
    declared = sorted(few_sources.sources_dir.glob("*.yaml"))[0]
    text = declared.read_text().replace(f"id: {declared.stem}\n", "id: never-pinned\n", 1)
    (few_sources.sources_dir / "never-pinned.yaml").write_text(text)
    for verb in ("history", "diff"):
        gap = cli(verb, "never-pinned", root=few_sources.root)
        assert gap.code == 1, (verb, gap.err)
        assert "source never-pinned has no pinned revision" in gap.err and "fabricref pin never-pinned" in gap.err
