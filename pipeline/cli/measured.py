"""The `measured` verbs: nccl-tests / rccl-tests logs pinned by SHA-256, tabled, and compared with the model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ..core.format import format_quantity
from .app import app
from .output import JsonOpt, RootOpt, lay_of, out, output_path, print_json, records_table

measured_app = typer.Typer(
    no_args_is_help=True, help="Measured nccl-tests / rccl-tests logs: import (pinned by SHA-256) and compare."
)
app.add_typer(measured_app, name="measured")


@measured_app.command("import")
def measured_import(
    file: Annotated[Path, typer.Argument(help="The stdout of all_reduce_perf (or another nccl-tests binary).")],
    topology_id: Annotated[str, typer.Option("--topology", help="Reference or cluster id the log ran on.")],
    algorithm: Annotated[
        str | None,
        typer.Option("--algorithm", help="The NCCL_ALGO the run forced (ring, tree, nvls, ...); default: none forced."),
    ] = None,
    op: Annotated[
        str | None,
        typer.Option("--op", help="The operation, when the log does not name its test (must agree when it does)."),
    ] = None,
    as_json: JsonOpt = False,
    root: RootOpt = None,
) -> None:
    """Read a log (a malformed line is refused with its number), pin its bytes in the store (origin: measured)
    and load its rows into registry/measurements/measurements.parquet with the file's hash."""
    from ..estimate.measured import import_log

    lay = lay_of(root)
    pin, log, new = import_log(lay, file, topology_id, algorithm, op)
    if as_json:
        print_json({**pin.model_dump(mode="json"), "rows": len(log.rows), "new": new})
        return
    sizes = sorted({r.bytes for r in log.rows})
    earlier = "" if new or pin.file_name == file.name else f" (the same bytes, imported earlier as {pin.file_name})"
    out.print(
        f"{'pinned' if new else 'already pinned'} {file.name} as {pin.measurement_id}{earlier} (sha256 {pin.sha256}): "
        f"{pin.op} on {pin.ranks} ranks / {pin.hosts} host(s), {len(sizes)} sizes {sizes[0]}-{sizes[-1]} B"
    )


# The table of `measured compare`, one row per measured size: each column's header and its cell.
COMPARE_COLUMNS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "measurement": lambda r: r["measurement_id"],
    "bytes": lambda r: format_quantity(r["bytes"] / 1024, "KiB"),  # powers of two, as nccl-tests sizes
    "measured busbw": lambda r: format_quantity(r["measured_busbw_gb_per_s"], "GB/s"),
    "model busbw": lambda r: format_quantity(r["model_busbw_gb_per_s"], "GB/s"),
    "model / measured": lambda r: "" if r["ratio"] is None else f"{r['ratio']:.3f}",
    "algorithm / protocol": lambda r: f"{r['algorithm']} / {r['protocol']}",
}


@measured_app.command("compare")
def measured_compare(
    topology_id: Annotated[str, typer.Option("--topology", help="Reference or cluster id.")],
    placement: Annotated[str, typer.Option("--placement", help="out-of-place (default) or in-place.")] = (
        "out-of-place"
    ),
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write the model-vs-measured busbw curves as an SVG file.")
    ] = None,
    as_json: JsonOpt = False,
    root: RootOpt = None,
) -> None:
    """Per measured size: measured busbw, the model's busbw (same op, ranks, forced algorithm), ratio model/measured."""
    from ..errors import UsageError
    from ..estimate.measured import compare

    if placement not in ("out-of-place", "in-place"):
        raise UsageError(f"--placement {placement!r}: expected out-of-place or in-place")
    if plot is not None:
        output_path(plot, "--plot")
    rows = compare(lay_of(root), topology_id, placement)
    if plot is not None:
        from ..core.files import atomic_write_bytes
        from ..views.charts import busbw_chart

        panels = [
            (f"{mine[0]['measurement_id']}: {mine[0]['op']}, {mine[0]['ranks']} ranks", mine)
            for mid in sorted({r["measurement_id"] for r in rows})
            if (mine := [r for r in rows if r["measurement_id"] == mid])
        ]
        atomic_write_bytes(plot, busbw_chart(f"model vs measured on {topology_id} ({placement})", panels))
    if as_json:
        print_json({"topology_id": topology_id, "placement": placement, "rows": rows})
        return
    out.print(records_table(COMPARE_COLUMNS, rows, title=f"model vs measured on {topology_id} ({placement})"))
