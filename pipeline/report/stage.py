"""Build registry/report/ from the registry alone: pages per reference, cluster and workload, drawings, plots.

Everything is escaped (jinja2 autoescape): vendor text and excerpts are data, never markup. The report is
self-contained: relative links and local SVG files only, no scripts, no network.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from ..core.citing import check_of, check_text, conflict_text
from ..core.files import atomic_write_bytes
from ..core.format import format_field
from ..core.paths import Layout, contained
from ..core.registry import Tables, table_paths
from ..errors import FabricrefError
from . import LAYOUT_CAVEAT, drawings, heat, measured
from .cells import Cell

STATUSES = (
    "Statuses: published (a vendor document states it), preliminary (announced, not shipped), derived "
    "(computed, with formula and inputs), unknown (nobody states it: the value stays empty). Assumed figures "
    "are labelled."
)
# Two parts, one DVC stage each: the reference and cluster pages with their drawings (`models`), which take no
# traffic number, so a changed workload does not rerun them, and the workload pages with their link-load heat maps,
# the plots, the model-vs-measured page and the index (`workloads`).
MODEL_READS = (
    "reference_models",
    "fields",
    "field_citations",
    "assumptions",
    "topology_summaries",
    "topology_nodes",
    "topology_edges",
)
PAGE_READS = (
    "reference_models",
    "fields",
    "topology_summaries",
    "topology_nodes",
    "topology_edges",
    "traffic",
    "traffic_workloads",
    "traffic_failures",
    "traffic_sharing",
    "traffic_links",
)
MODEL_PARTS = ("reference", "cluster", "drawings")
PAGE_PARTS = ("workload", "load", "plots", "measured.html", "index.html")


def _caveats(lay: Layout, con: Tables) -> list[str]:
    """The caveats the stages wrote beside their numbers (traffic and failures, as the traffic stage lists them in
    registry/traffic/caveats.json; topology), then the report's own."""
    path = lay.registry_dir / "traffic" / "caveats.json"
    if not path.exists():
        raise FabricrefError(f"{lay.relative(path)} is missing: run `dvc repro` (the traffic stage writes it)")
    found = list(json.loads(path.read_text(encoding="utf-8"))["caveats"])
    found += sorted(
        {json.loads(r["summary"]).get("caveat") for r in con.rows("SELECT summary FROM topology_summaries")}
    )
    return [c for c in dict.fromkeys(found) if c] + [LAYOUT_CAVEAT, STATUSES]


def _value(f: dict[str, Any]) -> str:
    """A number with its unit and direction at its record's precision, printed by the one formatter the CLI uses."""
    return format_field(f) if f["value_number"] is not None else f["value_text"] or ""


def _evidence(f: dict[str, Any]) -> None:
    """The words every view uses for a field's evidence (core/citing.py), for the template: a conflict's claims
    with their dates, a stated figure's check."""
    f["conflict_text"] = conflict_text(f["citations"], f["resolved_by"]) if f["conflict"] else None
    check = check_of(f)
    f["check_text"] = check_text(check, f) if check is not None else None


def report_dir(lay: Layout) -> Path:
    return lay.registry_dir / "report"


def _env() -> Environment:
    return Environment(
        loader=FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _clear(out: Path, parts: tuple[str, ...]) -> None:
    """Remove what this part of the report wrote last time (a dropped page must not linger)."""
    for name in parts:
        path = contained(out / name)  # never remove what a link out of the checkout leads to
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _open(lay: Layout, reads: tuple[str, ...]) -> Tables:
    paths = table_paths(lay, "tables", "topology", *(("traffic",) if "traffic" in reads else ()))
    return Tables({name: paths[name] for name in reads})


def _references(con: Tables) -> list[dict[str, Any]]:
    return con.rows(
        """SELECT r.*, count(*) FILTER (WHERE f.status = 'published') AS published,
        count(*) FILTER (WHERE f.status = 'preliminary') AS preliminary,
        count(*) FILTER (WHERE f.status = 'derived') AS derived,
        count(*) FILTER (WHERE f.status = 'unknown') AS unknown
        FROM reference_models r JOIN fields f USING (reference_id) GROUP BY ALL ORDER BY r.reference_id""",
    )


def _summaries(con: Tables) -> dict[str, dict[str, Any]]:
    return {r["topology_id"]: json.loads(r["summary"]) for r in con.rows("SELECT * FROM topology_summaries")}


class _Common(NamedTuple):
    """What both parts of the report start from (read once, with the model tables)."""

    caveats: list[str]
    refs: list[dict[str, Any]]
    summaries: dict[str, dict[str, Any]]
    clusters: list[dict[str, Any]]  # the summaries with a bisection


def _begin(lay: Layout, con: Tables) -> _Common:
    summaries = _summaries(con)
    clusters = [s for _, s in sorted(summaries.items()) if s.get("bisection_bandwidth_gbps")]
    return _Common(_caveats(lay, con), _references(con), summaries, clusters)


def _grouped(rows: list[dict[str, Any]], key: str) -> dict[Any, list[dict[str, Any]]]:
    """Rows split by one column, each group in the order the query returned it."""
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r[key]].append(r)
    return groups


def _per_topology(con: Tables, sql: str) -> dict[str, int]:
    """`sql` returns (topology_id, n) rows: a count per topology in one query, not one query per topology."""
    return {tid: n for tid, n in con.tuples(sql)[1]}


def _cluster_pods(con: Tables) -> dict[str, int]:
    """The number of pods of every topology with leaves: its leaves' distinct pods."""
    return _per_topology(
        con, "SELECT topology_id, count(DISTINCT pod) FROM topology_nodes WHERE kind = 'leaf' GROUP BY ALL"
    )


Drawings = list[tuple[Path, Callable[..., bytes], tuple[Any, ...]]]  # (file in the report, drawing, arguments)
Render = Callable[[], None]  # writes a part's pages
PARTS = ("models", "workloads")


def run(lay: Layout, parts: tuple[str, ...] = PARTS) -> Path:
    """`python -m fabricref.report PART` (the DVC stages `report-models` and `report`, and the `fabricref report`
    verb, which writes both): the part's pages, then its drawings."""
    out = report_dir(lay)
    env = _env()
    for part in parts:
        reads, outputs, make = {
            "models": (MODEL_READS, MODEL_PARTS, _models),
            "workloads": (PAGE_READS, PAGE_PARTS, _pages),
        }[part]
        _clear(out, outputs)
        with _open(lay, reads) as con:
            found, render = make(lay, out, env, con, _begin(lay, con))
        render()
        for path, draw, args in found:
            atomic_write_bytes(path, draw(*args))
    return out


def _models(lay: Layout, out: Path, env: Environment, con: Tables, common: _Common) -> tuple[Drawings, Render]:
    """The reference and cluster pages with their drawings (no traffic number: MODEL_READS only). Each table is
    read once (grouped per reference here), not once per reference."""
    caveats, refs, summaries, clusters = common
    cluster_ids = {s["topology_id"] for s in clusters}
    # Parts are drawn for the references that are not clusters: only their nodes and edges are read.
    drawn = sorted({r["reference_id"] for r in refs} - cluster_ids)
    in_drawn = "topology_id IN (SELECT unnest(?::VARCHAR[]))"
    fields_of = _grouped(con.rows("SELECT * FROM fields ORDER BY reference_id, field"), "reference_id")
    cites_of = _grouped(
        con.rows("SELECT * FROM field_citations ORDER BY reference_id, field, source_id"), "reference_id"
    )
    assumptions_of = _grouped(con.rows("SELECT * FROM assumptions ORDER BY reference_id, field"), "reference_id")
    nodes_of = _grouped(
        con.rows(f"SELECT * FROM topology_nodes WHERE {in_drawn} ORDER BY topology_id, node", drawn),
        "topology_id",
    )
    edges_of = _grouped(
        con.rows(f"SELECT * FROM topology_edges WHERE {in_drawn} ORDER BY topology_id, source, target", drawn),
        "topology_id",
    )
    with_nodes = {r["topology_id"] for r in con.rows("SELECT DISTINCT topology_id FROM topology_nodes")}
    pods_of = _cluster_pods(con)
    rails_of = _per_topology(
        con,
        "SELECT topology_id, count(DISTINCT rail) FROM topology_nodes WHERE kind = 'nic' AND role = 'scale_out' "
        "GROUP BY ALL",
    )
    found: Drawings = []
    for ref in refs:
        rid = ref["reference_id"]
        if rid not in cluster_ids and nodes_of.get(rid):
            found.append(
                (
                    out / "drawings" / f"{rid}.svg",
                    drawings.draw_reference,
                    (ref["title"], nodes_of[rid], edges_of.get(rid, [])),
                )
            )
    for s in clusters:
        tid = s["topology_id"]
        # No leaf or no scale-out NIC: 0, as count(DISTINCT ...) over no rows said.
        found.append(
            (
                out / "drawings" / f"{tid}.svg",
                drawings.draw_cluster,
                (s["title"], s, pods_of.get(tid, 0), rails_of.get(tid, 0)),
            )
        )

    def render() -> None:
        for ref in refs:
            rid = ref["reference_id"]
            fields = fields_of.get(rid, [])
            cites = _grouped(cites_of.get(rid, []), "field")
            for f in fields:
                f["value"] = _value(f)
                f["citations"] = cites.get(f["field"], [])
                _evidence(f)
            # A cluster-level reference is drawn by tier (as a cluster, above), not part by part: its tens of
            # thousands of parts would only be overwritten in the same file.
            has_drawing = rid in with_nodes if rid in cluster_ids else bool(nodes_of.get(rid))
            summary = summaries.get(rid)
            page = env.get_template("reference.html.j2").render(
                title=ref["title"],
                root="../",
                caveats=caveats,
                ref=ref,
                fields=fields,
                drawing=has_drawing,
                assumptions=assumptions_of.get(rid, []),
                summary=json.dumps(summary, indent=1, sort_keys=True) if summary else None,
            )
            atomic_write_bytes(out / "reference" / f"{rid}.html", page.encode())
        for s in clusters:
            tid = s["topology_id"]
            page = env.get_template("cluster.html.j2").render(title=s["title"], root="../", caveats=caveats, s=s)
            atomic_write_bytes(out / "cluster" / f"{tid}.html", page.encode())

    return found, render


def _pages(lay: Layout, out: Path, env: Environment, con: Tables, common: _Common) -> tuple[Drawings, Render]:
    """The workload pages with their heat maps, the plots, the model-vs-measured page and the index (the part a
    changed workload moves)."""
    caveats, refs, summaries, clusters = common
    pods_of = _cluster_pods(con)
    cluster_pods = {s["topology_id"]: pods_of.get(s["topology_id"], 0) for s in clusters}
    drawn = {r["topology_id"] for r in con.rows("SELECT DISTINCT topology_id FROM topology_nodes")}
    workloads = con.rows("SELECT * FROM traffic_workloads ORDER BY workload_id, topology_id")
    cells = {(tid, wid): c for tid in sorted(cluster_pods) for wid, c in _cluster_cells(con, tid).items()}
    link_loads, parts = _reference_loads(con, sorted(cluster_pods))
    traffic = con.rows("SELECT * FROM traffic ORDER BY workload_id, topology_id, phase")
    failures = con.rows("SELECT * FROM traffic_failures ORDER BY workload_id, topology_id, failure")
    sharing = con.rows("SELECT * FROM traffic_sharing ORDER BY workload_id, topology_id, phase")
    heat_maps, found = _heat_maps(summaries, cells, cluster_pods, link_loads, parts)
    plots = _plots(found, traffic, lay)
    logs = measured.read(lay)  # model vs measured logs: a page of their own, a plot each
    found += [(log["plot"], measured.plot, (log,)) for log in logs]

    def render() -> None:
        # The drawings of the other part: every reference with parts, then every cluster (the index links them).
        drawing_links = [
            {"src": f"drawings/{rid}.svg", "page": f"reference/{rid}.html", "alt": f"parts and links of {rid}"}
            for rid in (r["reference_id"] for r in refs)
            if rid in drawn
        ] + [
            {"src": f"drawings/{tid}.svg", "page": f"cluster/{tid}.html", "alt": f"structure of cluster {tid}"}
            for tid in (c["topology_id"] for c in clusters)
        ]
        by_workload: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for w in workloads:
            key = (w["topology_id"], w["workload_id"])
            by_workload[w["workload_id"]].append(
                {
                    **w,
                    "phases": [p for p in traffic if (p["topology_id"], p["workload_id"]) == key],
                    "failures": [f for f in failures if (f["topology_id"], f["workload_id"]) == key],
                    "sharing": [s for s in sharing if (s["topology_id"], s["workload_id"]) == key],
                    "missing": json.loads(w.get("step_missing") or "[]"),
                    "step_assumptions": json.loads(w.get("step_assumptions") or "[]"),
                    "heat_map": heat_maps.get(key),
                }
            )
        for wid, targets in sorted(by_workload.items()):
            page = env.get_template("workload.html.j2").render(
                title=f"Workload {wid}", root="../", caveats=caveats, targets=targets
            )
            atomic_write_bytes(out / "workload" / f"{wid}.html", page.encode())
        compared = measured.write_page(out, env, caveats, logs)
        index = env.get_template("index.html.j2").render(
            title="fabricref report",
            root="",
            caveats=caveats,
            references=refs,
            clusters=clusters,
            workloads=workloads,
            drawings=drawing_links,
            plots=plots,
            measured=compared,
        )
        atomic_write_bytes(out / "index.html", index.encode())

    return [(out / path, draw, args) for path, draw, args in found], render


IN_LIST = "topology_id IN (SELECT unnest(?::VARCHAR[]))"


def _cluster_cells(con: Tables, tid: str) -> dict[str, list[Cell]]:
    """A cluster's loaded links grouped per workload, tier and pod, in one query: a link's pod is that of its first
    end with one (source, then target: a switch's own pod), else the pod of its first end's building block that has
    one. A block's pod is that of the leaf its NICs reach over the scale-out network (the lowest, if a block's
    rails reach leaves of two pods). A link's load is its busiest phase. One topology per query: joined on the
    node name alone, DuckDB plans hash joins (with the topology in the join key it paired every NIC with every
    leaf first)."""
    _, rows = con.tuples(
        """
        WITH n AS (SELECT node, kind, block, pod FROM topology_nodes WHERE topology_id = ?),
        e AS (SELECT source, target FROM topology_edges WHERE topology_id = ? AND network = 'scale_out'),
        ends AS (SELECT source AS a, target AS b FROM e UNION ALL SELECT target, source FROM e),
        block_pod AS (
            SELECT nic.block, min(leaf.pod) AS pod
            FROM ends JOIN n nic ON nic.node = ends.a JOIN n leaf ON leaf.node = ends.b
            WHERE nic.kind = 'nic' AND leaf.kind = 'leaf' AND nic.block IS NOT NULL
            GROUP BY ALL
        ),
        l AS (
            SELECT workload_id, source, target, tier, max(utilization) AS u
            FROM traffic_links WHERE topology_id = ? GROUP BY ALL
        )
        SELECT l.workload_id, l.tier, coalesce(na.pod, nb.pod, pa.pod, pb.pod) AS pod, max(l.u), count(*)
        FROM l
        LEFT JOIN n na ON na.node = l.source
        LEFT JOIN n nb ON nb.node = l.target
        LEFT JOIN block_pod pa ON pa.block = na.block
        LEFT JOIN block_pod pb ON pb.block = nb.block
        GROUP BY ALL
        """,
        tid,
        tid,
        tid,
    )
    found: dict[str, list[Cell]] = defaultdict(list)
    for wid, tier, pod, peak, links in sorted(rows, key=lambda r: (r[0], r[1], r[2] or 0, r[2] is not None)):
        found[wid].append(Cell(tier, pod, peak, links))
    return found


def _reference_loads(
    con: Tables, clusters: list[str]
) -> tuple[
    dict[tuple[str, str], dict[tuple[str, str], float]],
    dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]],
]:
    """Every non-cluster topology × workload's link loads ((source, target) → utilisation in its busiest phase),
    and the nodes and edges of those topologies (their parts drawing's layout), each table read once."""
    _, rows = con.tuples(
        f"SELECT topology_id, workload_id, source, target, max(utilization) FROM traffic_links "
        f"WHERE NOT {IN_LIST} GROUP BY ALL ORDER BY 1, 2, 3, 4",
        clusters,
    )
    loads: dict[tuple[str, str], dict[tuple[str, str], float]] = defaultdict(dict)
    for tid, wid, a, b, u in rows:
        loads[(tid, wid)][(a, b)] = u
    tids = sorted({tid for tid, _ in loads})
    nodes = _grouped(
        con.rows(f"SELECT * FROM topology_nodes WHERE {IN_LIST} ORDER BY topology_id, node", tids), "topology_id"
    )
    edges = _grouped(
        con.rows(f"SELECT * FROM topology_edges WHERE {IN_LIST} ORDER BY topology_id, source, target", tids),
        "topology_id",
    )
    return loads, {tid: (nodes.get(tid, []), edges.get(tid, [])) for tid in tids}


PageDrawings = list[tuple[str, Callable[..., bytes], tuple[Any, ...]]]  # (path in the report, drawing, arguments)


def _heat_maps(
    summaries: dict[str, dict[str, Any]],
    cells: dict[tuple[str, str], list[Cell]],
    cluster_pods: dict[str, int],
    loads: dict[tuple[str, str], dict[tuple[str, str], float]],
    parts: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]],
) -> tuple[dict[tuple[str, str], str], PageDrawings]:
    """One link-load heat map per topology × workload in `traffic_links`: link by link on a reference's parts
    drawing, per tier and pod on a cluster. Returns (topology, workload) → the SVG's path in the report, and the
    drawings to make."""
    found: dict[tuple[str, str], str] = {}
    made: PageDrawings = []
    for tid, wid in sorted({*cells, *loads}):
        title = f"{wid} on {summaries.get(tid, {}).get('title') or tid}"
        path = f"load/{tid}/{wid}.svg"
        if tid in cluster_pods:
            made.append((path, heat.draw_tier_pod_load, (title, cells[(tid, wid)], cluster_pods[tid])))
        else:
            made.append((path, heat.draw_link_load, (title, *parts[tid], loads[(tid, wid)])))
        found[(tid, wid)] = path
    return found, made


def _plots(made: PageDrawings, traffic: list[dict[str, Any]], lay: Layout) -> list[dict[str, str]]:
    """The index's plots (their drawings appended to `made`)."""
    cases: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for p in traffic:
        key = f"{p['workload_id']} @ {p['topology_id']}"
        for i, term in enumerate(("latency_s", "bandwidth_s", "queueing_s")):
            cases[key][i] += p[term] * p["count"]
    labels = sorted(cases)
    series = {name: [cases[k][i] for k in labels] for i, name in enumerate(("overhead", "bandwidth", "queueing"))}
    title = "Communication time per step / request: overhead, bandwidth, queueing"
    made.append(("plots/phase-times.svg", drawings.bar_chart, (title, labels, series, "seconds")))
    kv_csv = lay.registry_dir / "traffic" / "plots" / "kv_transfer.csv"
    result = [{"src": "plots/phase-times.svg", "alt": "time per workload split into overhead, bandwidth, queueing"}]
    if kv_csv.exists():
        lines = [line.split(",") for line in kv_csv.read_text().splitlines()[1:]]
        if lines:
            x = [float(r[0]) for r in lines]
            title = "KV-cache transfer: local inside NVL72 vs across the fabric (70B, per decode rank)"
            series = {
                "local (NVL72 scale-up)": [float(r[1]) for r in lines],
                "cross-domain (400G fabric)": [float(r[2]) for r in lines],
            }
            made.append(("plots/kv-transfer.svg", drawings.line_chart, (title, x, series, "prompt tokens", "seconds")))
            result.append({"src": "plots/kv-transfer.svg", "alt": "KV transfer time local vs cross-domain"})
    return result
