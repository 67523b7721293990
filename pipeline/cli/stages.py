"""Stage verbs: each runs one DVC stage. The stage package is imported inside the command, so running one
verb loads only that stage's code (the DVC deps of a stage equal its import closure)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..core.files import checkout_lock
from ..core.format import MISSING, format_quantity
from ..errors import FabricrefError, UsageError
from .app import app
from .output import JsonOpt, RootOpt, lay_of, make_table, out, print_json, readable


@app.command()
def retrieve(
    root: RootOpt = None,
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Fetch the documents over HTTP (default: check pins only).")
    ] = False,
    source: Annotated[str | None, typer.Option("--source", help="Only this source id.")] = None,
    mirror: Annotated[
        str | None, typer.Option("--mirror", help="Fetch https://host/path from MIRROR/host/path.")
    ] = None,
    max_bytes: Annotated[int | None, typer.Option("--max-bytes", help="Refuse responses larger than this.")] = None,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Refuse instead of waiting if another refresh runs.")
    ] = False,
    proxy: Annotated[
        str | None,
        typer.Option(
            "--proxy",
            metavar="none|env",
            help="env: honour HTTPS_PROXY / HTTP_PROXY / NO_PROXY and SSL_CERT_FILE (default none: ignored; "
            "also FABRICREF_FETCH_PROXY).",
        ),
    ] = None,
) -> None:
    """Check every pinned snapshot against its SHA-256 (default), or --refresh: fetch and pin new revisions."""
    from ..core.sources import load_sources
    from ..retrieve import stage
    from ..retrieve.fetch import FetchPolicy

    lay = lay_of(root)
    sources = load_sources(lay, source)
    if not refresh:
        if mirror or proxy:
            raise UsageError(f"{'--mirror' if mirror else '--proxy'} only applies with --refresh")
        with checkout_lock(lay.root):
            entries = stage.verify(lay, sources)
            if source is None:
                stage.write_manifest(lay, entries)
        out.print(f"verified {len(entries)} pinned snapshot(s) against their SHA-256")
        return
    policy = FetchPolicy.from_env(max_bytes=max_bytes, proxy=proxy)
    out.print(
        f"refreshing {len(sources)} source(s), {policy.concurrency} at a time, "
        f"deadline {format_quantity(policy.deadline, 's')} per document and "
        f"{format_quantity(policy.refresh_deadline, 's')} overall"
    )

    def progress(o: stage.RefreshOutcome, done: int, total: int) -> None:
        # One line per source as it settles; rich drops the styling when stdout is not a terminal.
        out.print(f"[{done}/{total}] {o.source_id}: {o.action}" + (f" — {o.detail}" if o.action == "failed" else ""))

    outcomes = stage.refresh(lay, sources, mirror=mirror, policy=policy, wait_for_lock=not no_wait, progress=progress)
    rows = [[o.source_id, o.action, o.revision or "", o.detail] for o in outcomes]
    out.print(make_table("source", "outcome", "revision", "detail", rows=rows))
    failed = [o for o in outcomes if o.action == "failed"]
    if failed:
        raise FabricrefError(
            f"{len(failed)} source(s) could not be retrieved; their pins are unchanged:\n"
            + "\n".join(f"  - {o.source_id}: {o.detail}" for o in failed)
        )


@app.command()
def pin(
    source: Annotated[str, typer.Argument(help="Source id.")],
    file: Annotated[
        Path | None, typer.Option("--file", help="HTML to pin (default: sources/transcriptions/ID.html).")
    ] = None,
    retrieved_at: Annotated[
        str | None, typer.Option("--retrieved-at", help="RFC 3339 UTC time (default: read_on).")
    ] = None,
    root: RootOpt = None,
) -> None:
    """Pin a project transcription of a document as the source's next revision (origin: transcription)."""
    from ..core.sources import load_sources
    from ..retrieve import stage

    lay = lay_of(root)
    (src,) = load_sources(lay, source)
    outcome = stage.pin_file(lay, src, file, retrieved_at)
    out.print(f"{outcome.source_id}: {outcome.action} (revision {outcome.revision}) {outcome.detail}")


@app.command()
def extract(root: RootOpt = None) -> None:
    """Run every source's rules over its current snapshot; write registry/claims/."""
    from ..core.sources import load_sources
    from ..extract import stage

    lay = lay_of(root)
    with checkout_lock(lay.root):
        written = stage.run(lay, load_sources(lay))
    out.print(f"extracted {len(written)} source(s)")


@app.command(name="compile")
def compile_(root: RootOpt = None) -> None:
    """Resolve reference models into field records; write the registry (Parquet + DuckDB)."""
    from ..compile import stage

    lay = lay_of(root)
    with checkout_lock(lay.root):
        refs = stage.run(lay)
    out.print(f"compiled {len(refs)} reference(s) into {lay.relative(lay.registry_dir)}/")


@app.command(name="topology")
def topology_(
    topology_id: Annotated[str | None, typer.Argument(help="Reference or cluster id (omit with --all).")] = None,
    as_json: JsonOpt = False,
    build_all: Annotated[
        bool, typer.Option("--all", help="Build every topology and write registry/topology/.")
    ] = False,
    root: RootOpt = None,
) -> None:
    """Summarize a reference's or cluster's topology: parts, links by network, domains, oversubscription, hops."""
    from ..topology import stage
    from ..topology.summary import nodes_by_kind_and_role, summarize

    lay = lay_of(root)
    if build_all:
        with checkout_lock(lay.root):
            summaries = stage.run(lay)
        out.print(f"built {len(summaries)} topologies into {lay.relative(stage.topology_dir(lay))}/")
        return
    if topology_id is None:
        raise UsageError("give a reference or cluster id, or --all")
    g = stage.build(lay, topology_id)
    summary = summarize(g)
    by_role = nodes_by_kind_and_role(g)
    # The summary's rows the table shows, in its order (parts counted per role where a kind has several).
    shown = [(key, by_role if key == "nodes_by_kind" else summary[key]) for key in TOPOLOGY_ROWS]
    shown = [(key, value) for key, value in shown if value is not None]
    if as_json:  # the table's rows first, in its order (with the per-role counts it shows), then the rest
        data: dict[str, Any] = {"topology_id": summary["topology_id"], "title": summary["title"]}
        for key, _ in shown:
            data[key] = summary[key]
            if key == "nodes_by_kind":
                data["nodes_by_kind_and_role"] = by_role
        print_json({**data, **{k: v for k, v in summary.items() if k not in data}})
        return
    rows = [[key, _labelled(key, _readable(key, value), summary)] for key, value in shown]
    out.print(make_table("property", "value", title=f"{summary['topology_id']} — {summary['title']}", rows=rows))
    out.print(summary["caveat"])


TOPOLOGY_ROWS = (
    "kind",
    "accelerators",
    "scale_up_domains",
    "scale_up_domain_size",
    "nodes_by_kind",
    "edges_by_network",
    "per_accelerator",
    "oversubscription",
    "bisection_bandwidth_gbps",
    "hops",
    "scale_out_protocol",
    "scale_out_in_network_reduction",
)


def _labelled(key: str, shown: Any, summary: dict[str, Any]) -> Any:
    """What no source states said so: `unknown` for a figure the wiring cannot give, `(assumed)` beside a count or
    figure resting on a labelled assumption, `(one aggregate node)` beside parts a source does not count."""
    if key == "nodes_by_kind":
        notes = {p: "assumed" for p in summary["assumed_parts"]} | {
            p: "one aggregate node" for p in summary["aggregate_parts"]
        }
        return {part: f"{n} ({notes[part]})" if part in notes else n for part, n in shown.items()}
    if key == "per_accelerator":
        assumed = {f.split(".", 1)[1] for f in summary["assumed_figures"]}
        return {k: "unknown" if v == MISSING else f"{v} (assumed)" if k in assumed else v for k, v in shown.items()}
    return "unknown" if shown in ("", MISSING) else shown


def _readable(key: str, value: Any) -> Any:
    """Counts with separators, bandwidths per direction in bits (Gb/s, Tb/s: the family the links are stated in),
    oversubscription as a ratio."""
    if key == "oversubscription":
        value = {tier: f"{format_quantity(x)}:1" for tier, x in value.items()}
    return readable(value, key, "per_direction")


@app.command()
def traffic(root: RootOpt = None) -> None:
    """Lay every shipped workload onto its targets; write registry/traffic/ (tables), metrics/ and the comparison."""
    from ..traffic import stage

    lay = lay_of(root)
    with checkout_lock(lay.root):
        lines = list(stage.run_all(lay))
    for line in lines:
        out.print(line)


@app.command()
def report(root: RootOpt = None) -> None:
    """Build the static HTML report (registry/report/index.html) with drawings and plots, from the registry."""
    from ..report import stage

    lay = lay_of(root)
    with checkout_lock(lay.root):
        path = stage.run(lay)
    out.print(f"report written to {lay.relative(path / 'index.html')}")
