"""benchmarks/README.md's figures are written by the scripts that measure them, each into its own section:
writing one section's block leaves every other section, and the prose around the block, as it was."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("benchmark_readme", ROOT / "benchmarks" / "readme.py")
readme = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme)

TEXT = """# Benchmarks

```sh
python benchmarks/pipeline.py
```

## The everyday loop

Budgets and prose.

```
old pipeline figures
```

How to read it.

## The explorer

Budgets of the explorer.

```
old explorer figures
```
"""


def test_a_section_s_block_is_replaced_and_nothing_else():
    new = readme.replace_block(TEXT, "The everyday loop", "cold 12.0\nwarm 1.0\n")
    assert new == TEXT.replace("old pipeline figures", "cold 12.0\nwarm 1.0")
    new = readme.replace_block(TEXT, "The explorer", "p95 20 ms")
    assert new == TEXT.replace("old explorer figures", "p95 20 ms")


def test_the_shipped_readme_has_both_scripts_sections():
    text = readme.README.read_text(encoding="utf-8")
    for heading in ("The everyday loop", "The explorer"):
        new = readme.replace_block(text, heading, "FIGURES")
        assert new.count("FIGURES") == 1 and len(new) < len(text)
        kept = text.split(f"\n## {heading}\n")[0]
        assert new.startswith(kept)


@pytest.mark.parametrize(
    "text", [TEXT.replace("## The explorer", "## Other"), TEXT.replace("old explorer figures\n```", "")]
)
def test_a_missing_section_or_block_is_refused(text):
    with pytest.raises(SystemExit, match="The explorer"):
        readme.replace_block(text, "The explorer", "x")
