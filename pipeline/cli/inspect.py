"""Inspection verbs: read the registry, pins and models (audit, query, show, history, diff, status); they never
run a stage."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.tree import Tree

from ..core.citing import READ_VIA_A_COPY, address, check_text, conflict_text
from ..core.format import MISSING, format_field
from ..errors import FabricrefError, UnknownIdError, UsageError
from .app import app
from .output import (
    JsonOpt,
    RootOpt,
    emit,
    in_bits,
    lay_of,
    make_table,
    out,
    output_path,
    print_json,
    print_json_rows,
    strict,
    write_csv_batches,
    written_whole,
)

# Rows `fabricref query` shows as a table unless --limit says otherwise.
TABLE_ROWS = 100


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
    # Names from the module, not the module through the package: `fabricref.audit` is the API function.
    from ..inspect.audit import TRAFFIC_PREFIX, audit_at_revision, audit_traffic, unverified
    from ..inspect.audit import audit as audit_field

    lay = lay_of(root)
    if reference.startswith(TRAFFIC_PREFIX):
        if revision is not None:
            raise UsageError("--revision applies to a reference field, not to a traffic result")
        result = audit_traffic(lay, reference, field)
    elif revision is not None:
        result = audit_at_revision(lay, reference, field, revision)
    else:
        result = audit_field(lay, reference, field)
    if as_json:
        print_json(result)
    else:
        tree = Tree(_audit_label(result))
        _audit_tree(tree, result)
        out.print(tree)
    problems = unverified(result)
    if problems:
        raise FabricrefError("not verified: " + "; ".join(problems))


def _audit_label(node: dict[str, Any]) -> str:
    """The node's value at its record's precision (the digits the document states, or its inputs justify)."""
    value = node["value"]
    number = None if isinstance(value, str) else value
    shown = format_field({**node, "value_number": number, "value_text": value if number is None else None})
    return f"{node['reference_id']} {node['field']} = {shown}  [{node['status']}, confidence {node['confidence']}]"


_HASH_PROVES = {
    "transcription": "the project's transcription of the page is unchanged (not what the vendor's server sent)",
    "retrieved": "the bytes are those the vendor's server sent at retrieved_at",
    "measured": "the measurement log is unchanged",
}


def _audit_tree(tree: Tree, node: dict[str, Any]) -> None:
    if node.get("conflict"):
        tree.add(conflict_text(node["provenance"], node.get("resolved_by")))
    if node.get("chosen"):
        tree.add(f"taken from {node['chosen']}: {node['choice_reason']}")
    if node.get("check"):
        tree.add(check_text(node["check"], {**node, "value_number": node["value"]}))
    for p in node["provenance"]:
        mark = "verified" if p["verified"] else "NOT VERIFIED"
        leaf = tree.add(f"{p['source_id']} rule {p['rule_id']} (revision {p['revision']}, {p['origin']}) — {mark}")
        if not p["verified"]:
            leaf.add(f"problem: {p.get('problem') or 'the pinned bytes could not be re-verified'}")
        if p.get("publisher_kind"):
            leaf.add(f"publisher kind: {p['publisher_kind']}")
        if p.get("published_on"):
            leaf.add(f"published on: {p['published_on']}")
        if p.get("read_via"):
            leaf.add(f"{READ_VIA_A_COPY}: {p['read_via']}")
        if p.get("value_text") is not None and node.get("conflict"):
            leaf.add(f"states: {format_field(p)} ({'agrees' if p.get('agrees') else 'disagrees'})")
        leaf.add(f"url: {address(p['url'])}")
        leaf.add(f"retrieved_at: {p['retrieved_at']}")
        leaf.add(f"sha256: {p['sha256']}")
        leaf.add(f"the hash proves: {_HASH_PROVES.get(p['origin'], 'the pinned bytes are unchanged')}")
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
    timeout: Annotated[float, typer.Option("--timeout", help="Stop the query after this many seconds.")] = 30.0,
    memory_limit: Annotated[
        str, typer.Option("--memory-limit", help="DuckDB memory limit for the query, e.g. 512MB, 4GB.")
    ] = "1GB",
    threads: Annotated[int, typer.Option("--threads", help="DuckDB worker threads.")] = 2,
    max_rows: Annotated[int, typer.Option("--max-rows", help="Refuse results with more rows than this.")] = 1_000_000,
    limit: Annotated[
        int | None,
        typer.Option("--limit", help=f"At most this many rows (default: {TABLE_ROWS} in a table, all in csv/json)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", help="Write to this file, whole or not at all (a failed query leaves no file)."),
    ] = None,
    root: RootOpt = None,
) -> None:
    """Query the registry with SQL, read-only: one SELECT, under a time, memory and row limit.

    csv and json stream every row (or --limit's first); a query that fails midway ends stdout with an error record
    (`{"error": ..., "complete": false}`, or a `# error:` line), and --output writes a temporary file renamed into
    place only when the result is complete."""
    from ..inspect import query as querying

    limits = querying.Limits(timeout=timeout, memory_limit=memory_limit, threads=threads, max_rows=max_rows).checked()

    if fmt not in ("table", "csv", "json"):
        raise UsageError(f"--format {fmt!r}: expected table, csv or json")
    if limit is not None and limit < 1:
        raise UsageError(f"--limit {limit}: expected at least 1")
    if (sql is None) == (file is None):
        raise UsageError("give either SQL or --file, not both or neither")
    if output is not None:
        output_path(output)
    lay = lay_of(root)
    if file is not None:
        sql = querying.saved_query(file if file.is_absolute() or file.exists() else lay.root / file)
    assert sql is not None
    with (
        querying.quiet_errors(file),
        querying.stream(lay, sql, limits) as (columns, batches),
        written_whole(output),
    ):
        if fmt != "table":
            more: list[bool] = []
            first = _first_rows(batches, limit, more)
            (write_csv_batches if fmt == "csv" else print_json_rows)(columns, first)
            if more:
                print(f"stopped at --limit {limit} rows: the query returns more", file=sys.stderr)
            return
        # A terminal table of 270,000 rows takes minutes to lay out and nobody reads it: show the first rows
        # and say how many more there are (on stderr, so stdout stays the table). The rest is only counted.
        shown: list[tuple[Any, ...]] = []
        rest = 0
        for batch in batches:
            room = (limit or TABLE_ROWS) - len(shown)
            shown += batch[:room]
            rest += max(0, len(batch) - room)
        emit(columns, shown, as_json=False)
        if rest:
            print(f"{rest:,} more rows; use --limit or --format csv/json", file=sys.stderr)


def _first_rows(
    batches: Iterator[list[tuple[Any, ...]]], limit: int | None, more: list[bool]
) -> Iterator[list[tuple[Any, ...]]]:
    """The batches up to `limit` rows (all of them when None); `more` gets True when rows were left out. The rest
    is never fetched."""
    left = limit
    for batch in batches:
        if left is not None and len(batch) > left:
            if left:
                yield batch[:left]
            more.append(True)
            return
        if left is not None:
            left -= len(batch)
        yield batch


@app.command()
def references(as_json: JsonOpt = False, root: RootOpt = None) -> None:
    """List the references: id, kind, form factor, title and counts of fields by status."""
    from ..inspect import query as querying

    columns, rows = querying.reference_summaries(lay_of(root))
    emit(columns, rows, as_json)


@app.command()
def show(
    reference: Annotated[str, typer.Argument(help="Reference id.")], as_json: JsonOpt = False, root: RootOpt = None
) -> None:
    """Print a reference's fields: key, value with unit and direction (as precise as the document states it; both
    values when cited documents conflict), status, and each source with its kind and whether it was read via a
    copy."""
    from ..inspect import fields as field_view
    from ..inspect import query as querying

    lay = lay_of(root)
    rows = field_view.reference_fields(lay, reference)
    if not rows:
        _columns, refs = querying.reference_summaries(lay)
        raise UnknownIdError("reference", reference, [r[0] for r in refs], "`fabricref references` lists them")
    if as_json:  # exact values for machines
        print_json(strict([field_view.json_record(f) for f in rows]))
        return
    shown = [
        (f["field"], _with_bits(f, field_view.value_cell(f)), f["status"], field_view.source_cell(f)) for f in rows
    ]
    emit(["field", "value", "status", "source"], shown, False, title=reference)


def _with_bits(f: dict[str, Any], text: str) -> str:
    """The value cell, with a network byte rate's bit rate beside the document's figure (`in_bits`)."""
    bits = in_bits(f)
    if bits is None:
        return text
    first, sep, rest = text.partition("\n")
    return f"{first} (= {bits}){sep}{rest}"


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
    from ..inspect import changes

    lay = lay_of(root)
    if all_sources == (source is not None):
        raise UsageError("give a source id or --all")
    results = changes.diff_all(lay) if all_sources else [changes.diff(lay, source, from_rev, to_rev)]  # type: ignore[arg-type]
    if as_json:
        print_json(results if all_sources else results[0])
        return
    if not results:
        out.print("no source's latest revision changed a field")
    for r in results:
        rows = []
        for c in r["changes"]:
            old_status, new_status = (c[k] or MISSING for k in ("old_status", "new_status"))
            st = old_status if old_status == new_status else f"{old_status} → {new_status}"
            rows.append([c["field"], c["rule"], c["change"], c["old"], c["new"], st])
        title = (
            f"{r['source_id']}: revision {r['from']['revision']} ({r['from']['sha256'][:12]}) → "
            f"{r['to']['revision']} ({r['to']['sha256'][:12]})"
        )
        out.print(make_table("field", "rule", "change", "old", "new", "status", title=title, rows=rows))


@app.command()
def status(as_json: JsonOpt = False, root: RootOpt = None) -> None:
    """Per source: revision, date, rules matching, fields by status; per reference: fields by status and unknowns;
    conflicting sources and disagreeing checks, as information (they do not make it exit non-zero)."""
    from ..inspect.status import status as get_status

    data = get_status(lay_of(root))
    if as_json:
        print_json(data)
    else:
        rows = [
            [
                s_["source_id"],
                s_.get("revision"),
                s_.get("retrieved_at", ""),
                s_.get("origin", ""),
                _hash_cell(s_),
                _rules_cell(s_),
                s_.get("fields_by_status", {}),
            ]
            for s_ in data["sources"]
        ]
        columns = ("source", "revision", "retrieved_at", "origin", "hash", "rules", "fields by status")
        out.print(make_table(*columns, rows=rows))
        refs = [[r["reference_id"], r["by_status"], r["unknowns"]] for r in data["references"]]
        out.print(make_table("reference", "fields by status", "unknowns", rows=refs))
        if data["conflicts"]:
            conflicts = [[c["reference_id"], c["field"], c["value"], c["text"]] for c in data["conflicts"]]
            title = "conflicting sources (information: every claim is kept; the value follows the declared rule)"
            out.print(make_table("reference", "field", "value", "claims", keys=2, title=title, rows=conflicts))
        for check in data["disagreeing_checks"]:
            out.print(f"check disagrees (information): {check['reference_id']} {check['field']}: {check['text']}")
        for line in data["attention"]:
            out.print(f"needs attention: {line}")
    if data["attention"]:
        raise FabricrefError(f"{len(data['attention'])} item(s) need attention")


def _hash_cell(source: dict[str, Any]) -> str:
    if source.get("revision") is None:
        return "no pin"
    if not source.get("hash_ok"):
        return "MISMATCH"
    return "ok" if source.get("transcription_ok", True) else "TRANSCRIPTION EDITED"


def _rules_cell(source: dict[str, Any]) -> str:
    if "rules_ok" not in source:
        return "not read"
    return "ok" if source["rules_ok"] else f"failing: {', '.join(source['failing_rules'])}"


@app.command(name="pin-model")
def pin_model(
    models: Annotated[list[str] | None, typer.Argument(help="Model ids (default: every changed model).")] = None,
    root: RootOpt = None,
) -> None:
    """Record a new revision (content hash, date) for every reference or cluster model that changed."""
    from ..core import model_revisions

    done = model_revisions.pin(lay_of(root), models or None)
    for model, revision in done:
        out.print(f"{model}: revision {revision}")
    if not done:
        out.print("every model is already pinned at its current content")


@app.command()
def history(
    source: Annotated[str, typer.Argument(help="Source id.")], as_json: JsonOpt = False, root: RootOpt = None
) -> None:
    """List every pinned revision of a source."""
    from ..core import pins
    from ..core.paths import check_slug

    lay = lay_of(root)
    try:
        check_slug(source, "source id")
    except FabricrefError as exc:
        raise UsageError(str(exc)) from None
    hist = pins.load(lay, source)
    if hist is None:
        if not lay.source_file(source).exists():  # a wrong id: bad usage
            declared = lay.relative(lay.source_file(source))
            raise UsageError(f"no source {source!r}: neither {declared} nor its pins exist")
        raise FabricrefError(  # a declared source never pinned: a data gap
            f"source {source} has no pinned revision ({lay.relative(lay.pins_file(source))} does not exist); "
            f"pin it with `fabricref retrieve --refresh --source {source}` or `fabricref pin {source}`"
        )
    rows = [(r.revision, r.retrieved_at, r.sha256, r.size, r.origin, r.etag, r.last_modified) for r in hist.revisions]
    emit(["revision", "retrieved_at", "sha256", "size", "origin", "etag", "last_modified"], rows, as_json)


export_app = typer.Typer(no_args_is_help=True, help="Write a registry object in a format other tools read.")
app.add_typer(export_app, name="export")


@export_app.command("graph")
def export_graph(
    topology_id: Annotated[str, typer.Argument(help="Reference or cluster id (a topology `dvc repro` built).")],
    fmt: Annotated[
        str, typer.Option("--format", metavar="graphml|node-link", help="GraphML (default) or node-link JSON.")
    ] = "graphml",
    output: Annotated[Path | None, typer.Option("--output", help="File to write (default: standard output).")] = None,
    workload: Annotated[
        str | None,
        typer.Option("--workload", help="Add this workload's per-link bytes and time share (registry/traffic/)."),
    ] = None,
    aggregate: Annotated[
        bool, typer.Option("--aggregate", help="One node per tier (kind) and pod, links between them summed.")
    ] = False,
    root: RootOpt = None,
) -> None:
    """A topology's graph as GraphML (Gephi, yEd, networkx.read_graphml) or node-link JSON (networkx.node_link_graph),
    from registry/topology/. Every edge has `weight` (its rate per direction, Gb/s) and `compute_path` (false for
    frontend and management links); --workload adds that workload's bytes and time share per link; --aggregate
    writes a large cluster as tier × pod."""
    from ..core.files import atomic_write_bytes
    from ..inspect.export import FORMATS, graph_bytes

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
    if output is not None:
        output_path(output)
    data = graph_bytes(lay_of(root), topology_id, fmt, workload, aggregate)
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    atomic_write_bytes(output, data)
    out.print(f"wrote {output} ({len(data)} bytes)")
