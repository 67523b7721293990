"""The command line: the only module that knows about argv, exit codes and printing.

Exit codes: 0 success, 1 a check or validation failed, 2 bad usage.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from .core.errors import FabricrefError, UsageError
from .core.paths import Layout, layout

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="fabricref: GPU-cluster network reference data, every fact traceable to the document it came from.",
    pretty_exceptions_enable=False,
)
# markup=False: vendor text (excerpts, labels) is printed as it is, never interpreted as console markup.
out = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 200)

RootOpt = Annotated[Path | None, typer.Option("--root", help="Checkout root (default: found from the cwd).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _lay(root: Path | None) -> Layout:
    return layout(root)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n")


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
) -> None:
    """Check every pinned snapshot against its SHA-256 (default), or --refresh: fetch and pin new revisions."""
    from .core.sources import load_sources
    from .retrieve import stage
    from .retrieve.fetch import FetchPolicy

    lay = _lay(root)
    sources = load_sources(lay, source)
    if not refresh:
        if mirror:
            raise UsageError("--mirror only applies with --refresh")
        entries = stage.verify(lay, sources)
        if source is None:
            stage.write_manifest(lay, entries)
        out.print(f"verified {len(entries)} pinned snapshot(s) against their SHA-256")
        return
    outcomes = stage.refresh(
        lay, sources, mirror=mirror, policy=FetchPolicy.from_env(max_bytes=max_bytes), wait_for_lock=not no_wait
    )
    table = Table("source", "outcome", "revision", "detail")
    for o in outcomes:
        table.add_row(o.source_id, o.action, str(o.revision or ""), o.detail)
    out.print(table)
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
    from .core.sources import load_sources
    from .retrieve import stage

    lay = _lay(root)
    (src,) = load_sources(lay, source)
    outcome = stage.pin_file(lay, src, file, retrieved_at)
    out.print(f"{outcome.source_id}: {outcome.action} (revision {outcome.revision}) {outcome.detail}")


@app.command()
def extract(root: RootOpt = None) -> None:
    """Run every source's rules over its current snapshot; write registry/claims/."""
    from .core.sources import load_sources
    from .extract import stage

    lay = _lay(root)
    stats = stage.run(lay, load_sources(lay))
    out.print(
        f"extracted {len(stats.parsed) + len(stats.reused)} source(s): parsed {len(stats.parsed)}, "
        f"reused {len(stats.reused)} unchanged snapshot(s)"
    )


@app.command(name="compile")
def compile_(root: RootOpt = None) -> None:
    """Resolve reference models into field records; write the registry (Parquet + DuckDB)."""
    from .compile import stage

    refs = stage.run(_lay(root))
    out.print(f"compiled {len(refs)} reference(s) into {_lay(root).relative(_lay(root).registry_dir)}/")


@app.command()
def audit(
    reference: Annotated[str, typer.Argument(help="Reference id, or traffic:TOPOLOGY:WORKLOAD for a traffic result.")],
    field: Annotated[
        str, typer.Argument(help="Field key (e.g. scale_up.bandwidth_per_accelerator), or a traffic phase.")
    ],
    as_json: JsonOpt = False,
    revision: Annotated[
        int | None, typer.Option("--revision", help="Audit the field as it stood at revision N.")
    ] = None,
    root: RootOpt = None,
) -> None:
    """Trace a field to the documents it came from, re-verifying each snapshot's SHA-256 now."""
    from . import audit as auditing

    lay = _lay(root)
    if reference.startswith(auditing.TRAFFIC_PREFIX):
        result = auditing.audit_traffic(lay, reference, field)
    elif revision is not None:
        result = auditing.audit_at_revision(lay, reference, field, revision)
    else:
        result = auditing.audit(lay, reference, field)
    if as_json:
        _print_json(result)
    else:
        tree = Tree(_audit_label(result))
        _audit_tree(tree, result)
        out.print(tree)
    if not auditing.all_verified(result):
        raise FabricrefError("a snapshot no longer matches its pinned SHA-256 (see 'verified: false' above)")


def _value_text(node: dict[str, Any]) -> str:
    value = node["value"]
    if value is None:
        return "(empty)"
    unit = node.get("unit")
    text = f"{value:g}" if isinstance(value, float) else str(value)
    if unit and unit != "count":
        text += f" {unit}"
    if node.get("direction"):
        text += f" ({node['direction'].replace('_', ' ')})"
    return text


def _audit_label(node: dict[str, Any]) -> str:
    status = f"[{node['status']}, confidence {node['confidence']}]"
    return f"{node['reference_id']} {node['field']} = {_value_text(node)}  {status}"


def _audit_tree(tree: Tree, node: dict[str, Any]) -> None:
    if node.get("chosen"):
        tree.add(f"taken from {node['chosen']}: {node['choice_reason']}")
    for p in node["provenance"]:
        mark = "verified" if p["verified"] else "HASH MISMATCH"
        leaf = tree.add(f"{p['source_id']} rule {p['rule_id']} (revision {p['revision']}, {p['origin']}) — {mark}")
        leaf.add(f"url: {p['url']}")
        leaf.add(f"retrieved_at: {p['retrieved_at']}")
        leaf.add(f"sha256: {p['sha256']}")
        leaf.add(f"snapshot: {p['snapshot_path']}")
        leaf.add(f"locator: {p['locator']}")
        leaf.add(f"excerpt: {p['excerpt']!r}")
        leaf.add(f"stated: {p['stated']}")
    if "formula" in node:
        tree.add(f"formula: {node['formula']}")
        for child in node.get("inputs", []):
            _audit_tree(tree.add(_audit_label(child)), child)
    if node.get("reason"):
        tree.add(f"unknown because: {node['reason']}")
    if node.get("why"):
        tree.add(f"design choice / assumption: {node['why']}")


@app.command()
def query(
    sql: Annotated[str | None, typer.Argument(help="A SELECT statement.")] = None,
    file: Annotated[
        Path | None, typer.Option("--file", help="Run a saved query (e.g. registry/queries/x.sql).")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
    root: RootOpt = None,
) -> None:
    """Query the registry with SQL, read-only."""
    from . import query as querying

    if fmt not in ("table", "csv", "json"):
        raise UsageError(f"--format {fmt!r}: expected table, csv or json")
    if (sql is None) == (file is None):
        raise UsageError("give either SQL or --file, not both or neither")
    lay = _lay(root)
    if file is not None:
        path = file if file.is_absolute() or file.exists() else lay.root / file
        try:
            sql = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{file}: cannot read saved query: {exc.strerror}") from None
    assert sql is not None
    columns, rows = querying.run(lay, sql)
    if fmt == "json":
        _print_json([dict(zip(columns, row, strict=True)) for row in rows])
    elif fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        sys.stdout.write(buf.getvalue())
    else:
        table = Table(*columns)
        for row in rows:
            table.add_row(*["" if v is None else str(v) for v in row])
        out.print(table)


@app.command()
def references(as_json: JsonOpt = False, root: RootOpt = None) -> None:
    """List the references: id, kind, title and counts of fields by status."""
    from . import query as querying

    columns, rows = querying.run(
        _lay(root),
        """
        SELECT r.reference_id, r.kind, r.title,
               count(*) FILTER (WHERE f.status = 'published') AS published,
               count(*) FILTER (WHERE f.status = 'preliminary') AS preliminary,
               count(*) FILTER (WHERE f.status = 'derived') AS derived,
               count(*) FILTER (WHERE f.status = 'unknown') AS unknown
        FROM reference_models r JOIN fields f USING (reference_id)
        GROUP BY ALL ORDER BY r.reference_id""",
    )
    _emit(columns, rows, as_json)


@app.command()
def show(
    reference: Annotated[str, typer.Argument(help="Reference id.")], as_json: JsonOpt = False, root: RootOpt = None
) -> None:
    """Print a reference's fields: key, value, unit, status, source."""
    from . import query as querying

    lay = _lay(root)
    columns, rows = querying.run(
        lay,
        f"""
        SELECT f.field, coalesce(printf('%g', f.value_number), f.value_text, '') AS value,
               f.unit, f.direction, f.status,
               coalesce(c.sources, f.formula, f.reason) AS source
        FROM fields f LEFT JOIN (
            SELECT reference_id, field, string_agg(source_id, ', ' ORDER BY source_id) AS sources
            FROM field_citations GROUP BY ALL) c USING (reference_id, field)
        WHERE f.reference_id = '{reference.replace("'", "''")}'
        ORDER BY f.field""",
    )
    if not rows:
        raise UsageError(f"no reference {reference!r} (see `fabricref references`)")
    _emit(columns, rows, as_json, title=reference)


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
    from .topology import stage
    from .topology.summary import summarize

    lay = _lay(root)
    if build_all:
        summaries = stage.run(lay)
        out.print(f"built {len(summaries)} topologies into {lay.relative(stage.topology_dir(lay))}/")
        return
    if topology_id is None:
        raise UsageError("give a reference or cluster id, or --all")
    summary = summarize(stage.build(lay, topology_id))
    if as_json:
        _print_json(summary)
        return
    table = Table("property", "value", title=f"{summary['topology_id']} — {summary['title']}")
    for key in (
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
    ):
        value = summary[key]
        table.add_row(key, json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value))
    out.print(table)
    out.print(summary["caveat"])


estimate_app = typer.Typer(
    no_args_is_help=True, help="Calculators: collectives, transfers, memory, KV cache, capacity, workloads."
)
app.add_typer(estimate_app, name="estimate")


# The keys every cost estimate reports (the JSON contract for `estimate collective` and `transfer`).
COST_KEYS = (
    "seconds",
    "latency_seconds",
    "bandwidth_seconds",
    "queueing_seconds",
    "bytes_on_wire_per_rank",
    "algorithm",
    "dominant",
)


def _qty(text: str, kind: str, option: str) -> float:
    """'1.5GiB' → bytes, '400Gb/s' → bytes/s, '5us' → seconds; a missing or wrong unit is bad usage."""
    from .core.units import DATA, RATE, TIME, parse_quantity, unit_info

    target = {"bytes": ("B", DATA), "rate": ("B/s", RATE), "time": ("s", TIME)}[kind]
    try:
        q = parse_quantity(text.replace(" ", ""))
        if unit_info(q.unit)[1] != target[1]:
            raise UsageError(
                f"{option} {text!r}: expected a {kind} with its unit, e.g. "
                + {"bytes": "1.5GiB", "rate": "400Gb/s or 900GB/s", "time": "5us"}[kind]
            )
        factor = unit_info(q.unit)[0]
    except FabricrefError as exc:
        raise UsageError(f"{option} {text!r}: {exc}") from None
    return q.value * factor


def _emit_estimate(data: dict[str, Any], as_json: bool, title: str) -> None:
    from .traffic import CAVEAT

    data = {**data, "caveat": CAVEAT}
    if as_json:
        _print_json(data)
        return
    table = Table("quantity", "value", title=title)
    for key, value in data.items():
        table.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
    out.print(table)


@estimate_app.command("collective")
def estimate_collective(
    op: Annotated[
        str, typer.Option("--op", help="all-reduce, reduce-scatter, all-gather, all-to-all, broadcast, send")
    ],
    ranks: Annotated[int, typer.Option("--ranks", help="Ranks in the group.")],
    size: Annotated[str, typer.Option("--bytes", help="Buffer size S as nccl-tests defines it, e.g. 1GiB.")],
    bandwidth: Annotated[str, typer.Option("--bandwidth", help="Effective per-rank bandwidth, e.g. 400Gb/s.")],
    latency: Annotated[str, typer.Option("--latency", help="Per-step latency, e.g. 5us.")],
    algorithm: Annotated[str, typer.Option("--algorithm", help="ring or tree.")] = "ring",
    direction: Annotated[
        str, typer.Option("--direction", help="per_direction (default) or bidirectional.")
    ] = "per_direction",
    efficiency: Annotated[float, typer.Option("--efficiency", help="Explicit scaling of the bandwidth (0-1].")] = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Alpha-beta cost of one collective: latency, bandwidth and queueing terms, and which dominates."""
    from .traffic import collectives

    rate = _qty(bandwidth, "rate", "--bandwidth")
    if direction not in ("per_direction", "bidirectional"):
        raise UsageError(f"--direction {direction!r}: expected per_direction or bidirectional")
    if direction == "bidirectional":
        rate /= 2
    est = collectives.estimate(
        op,
        ranks,
        _qty(size, "bytes", "--bytes"),
        rate,
        _qty(latency, "time", "--latency"),
        algorithm=algorithm,
        efficiency=efficiency,
    )
    d = est.as_dict()
    _emit_estimate(
        {k: d[k] for k in (*COST_KEYS, "op", "ranks", "bytes", "steps")}, as_json, f"{op} over {ranks} ranks"
    )


@estimate_app.command("transfer")
def estimate_transfer(
    size: Annotated[str, typer.Option("--bytes", help="Bytes to move, e.g. 10GB.")],
    bandwidth: Annotated[str, typer.Option("--bandwidth", help="Per-direction bandwidth, e.g. 400Gb/s.")],
    latency: Annotated[str, typer.Option("--latency", help="Fixed path overhead, e.g. 5us.")],
    as_json: JsonOpt = False,
) -> None:
    """One point-to-point transfer: fixed path overhead + bytes ÷ bandwidth."""
    from .traffic import collectives

    est = collectives.estimate(
        "send",
        2,
        _qty(size, "bytes", "--bytes"),
        _qty(bandwidth, "rate", "--bandwidth"),
        _qty(latency, "time", "--latency"),
    )
    d = est.as_dict()
    _emit_estimate({k: d[k] for k in COST_KEYS}, as_json, "transfer")


@estimate_app.command("memory")
def estimate_memory(
    params: Annotated[float, typer.Option("--params", help="Parameter count, e.g. 70e9.")],
    layout_name: Annotated[str, typer.Option("--layout", help="mixed-adam, bf16-weights, fp8-weights, ...")],
    as_json: JsonOpt = False,
) -> None:
    """Bytes of model state: 18 B/param for mixed-precision Adam, 2 B/param for bf16 weights, ..."""
    from .traffic import sizing

    _emit_estimate(sizing.memory(params, layout_name), as_json, "memory")


@estimate_app.command("kv")
def estimate_kv(
    layers: Annotated[int, typer.Option("--layers")],
    kv_heads: Annotated[int, typer.Option("--kv-heads", help="KV heads (grouped-query attention), not query heads.")],
    head_dim: Annotated[int, typer.Option("--head-dim")],
    dtype: Annotated[str, typer.Option("--dtype", help="bf16, fp8, fp16, fp32")],
    tokens: Annotated[int, typer.Option("--tokens")],
    as_json: JsonOpt = False,
) -> None:
    """KV-cache bytes per token and for T tokens: 2 × layers × KV heads × head dim × bytes."""
    from .traffic import sizing

    _emit_estimate(sizing.kv_cache(layers, kv_heads, head_dim, dtype, tokens), as_json, "KV cache")


@estimate_app.command("capacity")
def estimate_capacity(
    rps: Annotated[float, typer.Option("--requests-per-second")],
    output_tokens: Annotated[float, typer.Option("--output-tokens")],
    group_tps: Annotated[float, typer.Option("--group-tokens-per-second")],
    group_size: Annotated[int, typer.Option("--group-size")],
    headroom: Annotated[float, typer.Option("--headroom", help="Spare fraction, e.g. 0.2.")] = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """Fleet capacity: groups = ceil(R × T × (1 + headroom) ÷ G); accelerators = groups × group size."""
    from dataclasses import asdict

    from .traffic import sizing

    _emit_estimate(asdict(sizing.capacity(rps, output_tokens, group_tps, group_size, headroom)), as_json, "capacity")


@estimate_app.command("workload")
def estimate_workload(
    topology_id: Annotated[str, typer.Argument(help="Reference or cluster id.")],
    workload_id: Annotated[str, typer.Argument(help="Workload id (models/workloads/).")],
    as_json: JsonOpt = False,
    root: RootOpt = None,
) -> None:
    """The per-phase table of a workload laid onto a topology's installed wiring."""
    from .traffic import CAVEAT
    from .traffic.stage import estimate, lineage_text
    from .traffic.workloads import find_workload

    lay = _lay(root)
    r = estimate(lay, topology_id, find_workload(lay, workload_id))
    rows = [
        {
            "phase": p.phase,
            "collective": p.collective,
            "algorithm": p.algorithm,
            "group_size": p.group_size,
            "concurrent_groups": p.concurrent_groups,
            "count": p.count,
            "bytes_per_rank": p.bytes_per_rank,
            "bytes_on_wire_per_rank": p.bytes_on_wire_per_rank,
            "network": p.network,
            "tier": p.tier,
            "hops": p.hops,
            "bottleneck_gbps": p.bottleneck_gbps,
            "effective_gbps": p.effective_gbps,
            "latency_seconds": p.latency_s,
            "bandwidth_seconds": p.bandwidth_s,
            "queueing_seconds": p.queueing_s,
            "seconds": p.seconds,
            "total_seconds": p.total_seconds,
            "dominant": p.dominant,
            "confidence": p.confidence,
            "lineage": json.loads(lineage_text(p)),
            "description": p.description,
            "notes": p.notes,
        }
        for p in r.phases
    ]
    if as_json:
        _print_json(
            {
                "topology_id": topology_id,
                "workload_id": workload_id,
                "phases": rows,
                "revealing": r.revealing,
                "sizing": r.sizing,
                "failures": r.failures,
                "communication_seconds": r.communication_seconds,
                "confidence": r.confidence,
                "caveat": CAVEAT,
            }
        )
        return
    table = Table(
        "phase",
        "collective",
        "n",
        "network / tier",
        "bytes/rank",
        "Gb/s eff",
        "latency s",
        "bandwidth s",
        "queueing s",
        "× count",
        "total s",
        "dominant",
        "confidence",
        title=f"{workload_id} on {topology_id}",
    )
    for p in rows:
        table.add_row(
            p["phase"],
            p["collective"],
            str(p["group_size"]),
            f"{p['network']} / {p['tier']}",
            f"{p['bytes_per_rank']:.3g}",
            f"{p['effective_gbps']:.4g}" if p["effective_gbps"] else "?",
            f"{p['latency_seconds']:.3g}",
            f"{p['bandwidth_seconds']:.3g}",
            f"{p['queueing_seconds']:.3g}",
            str(p["count"]),
            f"{p['total_seconds']:.4g}",
            p["dominant"],
            p["confidence"],
        )
    out.print(table)
    rv = r.revealing
    out.print(
        f"To make progress on {rv['for']}: {rv['accelerators_per_progress']} accelerators must communicate; "
        f"{'fits' if rv['fits_in_one_domain'] else 'does not fit'} in one scale-up domain of "
        f"{rv['scale_up_domain_size']}."
    )
    for f in r.failures:
        out.print(f"failure: {f['failure']}: route {'survives' if f['route_survives'] else 'lost'}; {f['explanation']}")
    if r.failures:
        out.print(r.failures[0]["not_established"])
    out.print(CAVEAT)


@app.command()
def traffic(root: RootOpt = None) -> None:
    """Lay every shipped workload onto its targets; write registry/traffic/ (tables and metrics)."""
    from .traffic import stage

    metrics = stage.run(_lay(root))
    out.print(f"estimated {len(metrics) - 1} workload × topology pairs into registry/traffic/")


@app.command()
def diff(
    source: Annotated[str | None, typer.Argument(help="Source id.")] = None,
    from_rev: Annotated[
        int | None, typer.Option("--from", help="Older revision (default: the one before --to).")
    ] = None,
    to_rev: Annotated[int | None, typer.Option("--to", help="Newer revision (default: current).")] = None,
    all_sources: Annotated[
        bool, typer.Option("--all", help="Every source whose latest revision changed something.")
    ] = False,
    as_json: JsonOpt = False,
    root: RootOpt = None,
) -> None:
    """Field-level diff between two revisions of a source: added, removed, value changed, status changed."""
    from . import changes

    lay = _lay(root)
    if all_sources == (source is not None):
        raise UsageError("give a source id or --all")
    results = changes.diff_all(lay) if all_sources else [changes.diff(lay, source, from_rev, to_rev)]  # type: ignore[arg-type]
    if as_json:
        _print_json(results if all_sources else results[0])
        return
    if not results:
        out.print("no source's latest revision changed a field")
    for r in results:
        table = Table(
            "field",
            "rule",
            "change",
            "old",
            "new",
            "status",
            title=f"{r['source_id']}: revision {r['from']['revision']} ({r['from']['sha256'][:12]}) → "
            f"{r['to']['revision']} ({r['to']['sha256'][:12]})",
        )
        for c in r["changes"]:
            st = c["old_status"] if c["old_status"] == c["new_status"] else f"{c['old_status']} → {c['new_status']}"
            table.add_row(c["field"], c["rule"], c["change"], str(c["old"]), str(c["new"]), str(st))
        out.print(table)


@app.command()
def status(as_json: JsonOpt = False, root: RootOpt = None) -> None:
    """Per source: revision, date, rules matching, fields by status; per reference: fields by status and unknowns."""
    from .status import status as get_status

    data = get_status(_lay(root))
    if as_json:
        _print_json(data)
    else:
        table = Table("source", "revision", "retrieved_at", "origin", "hash", "rules", "fields by status")
        for s_ in data["sources"]:
            table.add_row(
                s_["source_id"],
                str(s_.get("revision")),
                str(s_.get("retrieved_at", "")),
                str(s_.get("origin", "")),
                "ok" if s_.get("hash_ok") else "MISMATCH",
                "ok" if s_.get("rules_ok") else f"failing: {', '.join(s_.get('failing_rules', []))}",
                json.dumps(s_.get("fields_by_status", {})),
            )
        out.print(table)
        refs = Table("reference", "fields by status", "unknowns")
        for r in data["references"]:
            refs.add_row(r["reference_id"], json.dumps(r["by_status"]), ", ".join(r["unknowns"]))
        out.print(refs)
        for line in data["attention"]:
            out.print(f"needs attention: {line}")
    if data["attention"]:
        raise FabricrefError(f"{len(data['attention'])} item(s) need attention")


@app.command(name="pin-model")
def pin_model(
    models: Annotated[list[str] | None, typer.Argument(help="Model ids (default: every changed model).")] = None,
    root: RootOpt = None,
) -> None:
    """Record a new revision (content hash, date) for every reference or cluster model that changed."""
    from .core import models as model_revisions

    done = model_revisions.pin(_lay(root), models or None)
    for model, revision in done:
        out.print(f"{model}: revision {revision}")
    if not done:
        out.print("every model is already pinned at its current content")


@app.command()
def report(root: RootOpt = None) -> None:
    """Build the static HTML report (registry/report/index.html) with drawings and plots, from the registry."""
    from .report import stage

    lay = _lay(root)
    path = stage.run(lay)
    out.print(f"report written to {lay.relative(path / 'index.html')}")


@app.command()
def history(
    source: Annotated[str, typer.Argument(help="Source id.")], as_json: JsonOpt = False, root: RootOpt = None
) -> None:
    """List every pinned revision of a source."""
    from .core import pins
    from .core.paths import check_slug

    lay = _lay(root)
    check_slug(source, "source id")
    hist = pins.load(lay, source)
    if hist is None:
        raise UsageError(f"no pins for source {source!r} ({lay.relative(lay.pins_file(source))} does not exist)")
    rows = [(r.revision, r.retrieved_at, r.sha256, r.size, r.origin, r.etag, r.last_modified) for r in hist.revisions]
    _emit(["revision", "retrieved_at", "sha256", "size", "origin", "etag", "last_modified"], rows, as_json)


def _emit(columns: list[str], rows: list[tuple[Any, ...]], as_json: bool, title: str | None = None) -> None:
    if as_json:
        _print_json([dict(zip(columns, row, strict=True)) for row in rows])
        return
    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*["" if v is None else str(v) for v in row])
    out.print(table)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; click reports bad usage itself (exit 2), our errors print one message (exit 1 or 2)."""
    try:
        app(args=argv, prog_name="fabricref")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except FabricrefError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
