"""`fabricref validate`: the model against published training and serving results, with the ratio."""

from __future__ import annotations

from typing import Annotated

import typer

from ..core.format import format_quantity
from .app import app
from .output import JsonOpt, RootOpt, lay_of, make_table, out, print_json


def _num(value: float | None, quantity: str) -> str:
    """A published or modelled figure with its unit, four significant digits (the results state three or four)."""
    if quantity in ("ttft_seconds", "tpot_seconds", "step_seconds"):
        return format_quantity(value, "s", digits=4)
    return format_quantity(value, "TFLOP/s", digits=4)


@app.command()
def validate(
    only: Annotated[str | None, typer.Option("--only", help="Only files or results whose id contains this.")] = None,
    as_json: JsonOpt = False,
    root: RootOpt = None,
) -> None:
    """Model vs published for every result in models/validation/: the ratio, the tolerance, and whether the
    result set a calibration number (calibration), is an acceptance check (check) or set nothing (held-out)."""
    from ..api import validate as run
    from ..estimate import validation

    lay = lay_of(root)
    rows = run(lay.root, only)
    summary = validation.summary([validation.Row(**r) for r in rows])
    if as_json:
        print_json({"results": rows, "summary": summary})
        return
    cells = []
    for r in rows:
        within = "—" if r["within"] is None else ("yes" if r["within"] else f"NO (±{r['tolerance']:.0%})")
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.3f}"
        q = r["quantity"]
        cells.append([r["file"], r["result"], r["use"], _num(r["published"], q), _num(r["model"], q), ratio, within])
    columns = ("file", "result", "use", "published", "model", "ratio", "within")
    out.print(make_table(*columns, keys=2, title="model vs published", rows=cells))
    for r in rows:
        if r["model"] is None:
            out.print(f"{r['file']}#{r['result']}: {r['note']}")
    used = sorted({c for r in rows for c in r["calibration"].split("\n") if c})
    for c in used:
        out.print(f"calibration: {c}")
    for use, s in summary.items():
        if s["results"]:
            mean = "—" if s["mean_abs_error"] is None else f"{s['mean_abs_error']:.1%}"
            worst = "—" if s["max_abs_error"] is None else f"{s['max_abs_error']:.1%}"
            out.print(
                f"{use}: {s['within_tolerance']}/{s['results']} within tolerance, mean |error| {mean}, max {worst}"
            )
