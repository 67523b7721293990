"""Write .dvc/plots/offline.html: DVC's page for `dvc plots show`, with vega, vega-lite and vega-embed inlined.

DVC's own page loads the three libraries from a public CDN, so a plot is blank offline. `.dvc/config` names this
template (`plots.html_template`); it has no `{scripts}` placeholder, so DVC adds no CDN tags. The libraries are the
versions DVC's renderer targets (npm: vega 5.20.2, vega-lite 5.2.0, vega-embed 6.18.2), unmodified, with their
BSD-3-Clause licences beside them. Inlined rather than linked: the page works from wherever `-o` writes it.

Run `python .dvc/plots/vendor/build.py` after replacing a library; a test checks the page matches its inputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBRARIES = ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js")
HEAD = """<!DOCTYPE html>
<html>
<head>
    {refresh_tag}
    <meta charset="utf-8">
    <title>DVC Plot</title>
"""
TAIL = """    <style>
        table {
            border-spacing: 15px;
        }
    </style>
</head>
<body>
    {plot_divs}
</body>
</html>
"""


def page() -> str:
    scripts = []
    for name in LIBRARIES:
        code = (HERE / name).read_text(encoding="utf-8")
        if "</script" in code.lower() or "{plot_divs}" in code or "{refresh_tag}" in code:
            raise SystemExit(f"{name}: holds text that would end the script element or a DVC placeholder")
        scripts.append(
            f"    <!-- {name}: see LICENSE.{name.removesuffix('.min.js')} -->\n    <script>{code}</script>\n"
        )
    return HEAD + "".join(scripts) + TAIL


if __name__ == "__main__":
    out = HERE.parent / "offline.html"
    out.write_text(page(), encoding="utf-8")
    sys.stdout.write(f"wrote {out}\n")
