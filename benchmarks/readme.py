"""benchmarks/README.md's figures, written by the scripts that measure them: each script owns the first fenced
block under its own `## ` heading and replaces that block alone, so the other scripts' sections and the prose
around every block stay as they are."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().with_name("README.md")


def replace_block(text: str, heading: str, figures: str) -> str:
    """`text` with the first ``` block after the line `## heading` (and before the next `## `) holding `figures`."""
    start = text.find(f"\n## {heading}\n")
    if start < 0:
        raise SystemExit(f"{README.name}: no section `## {heading}` to write the figures into")
    end = text.find("\n## ", start + 1)
    end = len(text) if end < 0 else end
    section = text[start:end]
    block = re.search(r"^```[^\n]*\n.*?^```$", section, flags=re.M | re.S)
    if block is None:
        raise SystemExit(f"{README.name}: section `## {heading}` has no ``` block for the figures")
    fenced = f"```\n{figures.rstrip()}\n```"
    return text[:start] + section[: block.start()] + fenced + section[block.end() :] + text[end:]


def write_figures(heading: str, figures: str, path: Path = README) -> None:
    path.write_text(replace_block(path.read_text(encoding="utf-8"), heading, figures), encoding="utf-8")
