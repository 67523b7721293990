"""Build registry/report/ from the registry alone: pages per reference, cluster and workload, drawings, plots.

Everything is escaped (jinja2 autoescape): vendor text and excerpts are data, never markup. The report is
self-contained: relative links and local SVG files only, no scripts, no network.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from ..core.errors import FabricrefError
from ..core.files import atomic_write_bytes
from ..core.format import format_quantity
from ..core.paths import Layout
from ..core.registry import Tables, table_paths
from . import LAYOUT_CAVEAT, drawings, heat, measured

STATUSES = (
    "Statuses: published (a vendor document states it), preliminary (announced, not shipped), derived "
    "(computed, with formula and inputs), unknown (nobody states it: the value stays empty). Assumed figures "
    "are labelled."
)
# Two DVC stages (dvc.yaml declares exactly these tables for each): `report-models` writes the reference and cluster
# pages and their drawings, which no workload changes; `report` writes the workload pages with their link-load heat
# maps, the plots, the model-vs-measured page and the index.
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
READS = tuple(dict.fromkeys(MODEL_READS + PAGE_READS))
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
    """A number with its unit and direction, printed by the one formatter the CLI and diff use."""
    if f["value_number"] is not None:
        return format_quantity(f["value_number"], f.get("unit"), f.get("direction"))
    return f["value_text"] or ""


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
        path = out / name
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


def _pods(con: Tables, tid: str) -> int:
    return con.rows("SELECT count(DISTINCT pod) AS n FROM topology_nodes WHERE topology_id = ? AND kind = 'leaf'", tid)[
        0
    ]["n"]


def run(lay: Layout) -> Path:
    """The whole report in one process (the `fabricref report` verb): both DVC stages' parts."""
    run_models(lay)
    return run_pages(lay)


def _begin(lay: Layout, parts: Any, reads: Any) -> tuple[Path, Any, Any, Any, Any, Any, list[dict[str, Any]]]:
    """What both report stages start from: their parts of the report cleared, the templates, the open tables
    (the caller closes them), the caveats, references, summaries and clusters (summaries with a bisection)."""
    out = report_dir(lay)
    _clear(out, parts)
    env = _env()
    con = _open(lay, reads)
    try:
        caveats = _caveats(lay, con)
        refs = _references(con)
        summaries = _summaries(con)
    except BaseException:
        con.close()
        raise
    clusters = [s for _, s in sorted(summaries.items()) if s.get("bisection_bandwidth_gbps")]
    return out, env, con, caveats, refs, summaries, clusters


def run_models(lay: Layout) -> Path:
    """`python -m pipeline.report models`: reference and cluster pages with their drawings (no traffic number)."""
    out, env, con, caveats, refs, summaries, clusters = _begin(lay, MODEL_PARTS, MODEL_READS)
    try:
        cluster_ids = {s["topology_id"] for s in clusters}
        for ref in refs:
            rid = ref["reference_id"]
            fields = con.rows("SELECT * FROM fields WHERE reference_id = ? ORDER BY field", rid)
            cites = defaultdict(list)
            for c in con.rows("SELECT * FROM field_citations WHERE reference_id = ? ORDER BY source_id", rid):
                cites[c["field"]].append(c)
            for f in fields:
                f["value"] = _value(f)
                f["citations"] = cites.get(f["field"], [])
            # A cluster-level reference is drawn by tier below, into the same file: drawing its tens of thousands
            # of parts one by one here would only be overwritten.
            if rid in cluster_ids:
                has_drawing = bool(con.rows("SELECT 1 FROM topology_nodes WHERE topology_id = ? LIMIT 1", rid))
            else:
                nodes = con.rows("SELECT * FROM topology_nodes WHERE topology_id = ? ORDER BY node", rid)
                has_drawing = bool(nodes)
                if has_drawing:
                    edges = con.rows("SELECT * FROM topology_edges WHERE topology_id = ? ORDER BY source, target", rid)
                    svg = drawings.draw_reference(ref["title"], nodes, edges)
                    atomic_write_bytes(out / "drawings" / f"{rid}.svg", svg)
            assumptions = con.rows("SELECT * FROM assumptions WHERE reference_id = ? ORDER BY field", rid)
            summary = summaries.get(rid)
            page = env.get_template("reference.html.j2").render(
                title=ref["title"],
                root="../",
                caveats=caveats,
                ref=ref,
                fields=fields,
                drawing=has_drawing,
                assumptions=assumptions,
                summary=json.dumps(summary, indent=1, sort_keys=True) if summary else None,
            )
            atomic_write_bytes(out / "reference" / f"{rid}.html", page.encode())
        for s in clusters:
            tid = s["topology_id"]
            pods = _pods(con, tid)
            rails = con.rows(
                "SELECT count(DISTINCT rail) AS n FROM topology_nodes WHERE topology_id = ? AND "
                "kind = 'nic' AND role = 'scale_out'",
                tid,
            )[0]["n"]
            atomic_write_bytes(out / "drawings" / f"{tid}.svg", drawings.draw_cluster(s["title"], s, pods, rails))
            page = env.get_template("cluster.html.j2").render(title=s["title"], root="../", caveats=caveats, s=s)
            atomic_write_bytes(out / "cluster" / f"{tid}.html", page.encode())
    finally:
        con.close()
    return out


def run_pages(lay: Layout) -> Path:
    """`python -m pipeline.report pages`: workload pages with their heat maps, plots, the model-vs-measured page and
    the index (what a changed workload reruns)."""
    out, env, con, caveats, refs, summaries, clusters = _begin(lay, PAGE_PARTS, PAGE_READS)
    try:
        cluster_pods = {s["topology_id"]: _pods(con, s["topology_id"]) for s in clusters}
        drawn = {r["topology_id"] for r in con.rows("SELECT DISTINCT topology_id FROM topology_nodes")}
        workloads = con.rows("SELECT * FROM traffic_workloads ORDER BY workload_id, topology_id")
        heat_maps = _heat_maps(con, out, summaries, {}, cluster_pods)
        traffic = con.rows("SELECT * FROM traffic ORDER BY workload_id, topology_id, phase")
        failures = con.rows("SELECT * FROM traffic_failures ORDER BY workload_id, topology_id, failure")
        sharing = con.rows("SELECT * FROM traffic_sharing ORDER BY workload_id, topology_id, phase")
    finally:
        con.close()
    # The drawings report-models wrote: every reference with parts, then every cluster (the index links them).
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
    plots = _plots(out, traffic, lay)
    compared = measured.write(lay, out, env, caveats)  # model vs measured logs: its own page
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
    return out


def _heat_maps(
    con: Tables,
    out: Path,
    summaries: dict[str, dict[str, Any]],
    parts: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]],
    cluster_pods: dict[str, int],
) -> dict[tuple[str, str], str]:
    """One link-load heat map per topology × workload in `traffic_links`: link by link on a reference's parts
    drawing, per tier and pod on a cluster. Returns (topology, workload) → the SVG's path in the report."""
    pairs = con.rows("SELECT DISTINCT topology_id, workload_id FROM traffic_links ORDER BY 1, 2")
    found: dict[tuple[str, str], str] = {}
    block_pods: dict[str, tuple[dict[str, tuple[str, int | None, int | None]], dict[int, int]]] = {}
    for pair in pairs:
        tid, wid = pair["topology_id"], pair["workload_id"]
        _, links = con.tuples(
            "SELECT source, target, tier, max(utilization) FROM traffic_links WHERE topology_id = ? AND "
            "workload_id = ? GROUP BY ALL ORDER BY 1, 2",
            tid,
            wid,
        )
        title = f"{wid} on {summaries.get(tid, {}).get('title') or tid}"
        if tid in cluster_pods:
            if tid not in block_pods:
                block_pods[tid] = _block_pods(con, tid)
            svg = heat.draw_tier_pod_load(title, _cells(links, *block_pods[tid]), cluster_pods[tid])
        else:
            if tid not in parts:
                parts[tid] = (
                    con.rows("SELECT * FROM topology_nodes WHERE topology_id = ? ORDER BY node", tid),
                    con.rows("SELECT * FROM topology_edges WHERE topology_id = ? ORDER BY source, target", tid),
                )
            load = {(a, b): u for a, b, _, u in links}
            svg = heat.draw_link_load(title, *parts[tid], load)
        path = f"load/{tid}/{wid}.svg"
        atomic_write_bytes(out / path, svg)
        found[(tid, wid)] = path
    return found


def _block_pods(con: Tables, tid: str) -> tuple[dict[str, tuple[str, int | None, int | None]], dict[int, int]]:
    """A cluster's nodes (kind, block, pod), and the pod of each building block: that of the leaf its NICs
    reach (the lowest, if a block's rails reach leaves of two pods)."""
    _, rows = con.tuples("SELECT node, kind, block, pod FROM topology_nodes WHERE topology_id = ?", tid)
    nodes = {n: (k, b, p) for n, k, b, p in rows}
    _, edges = con.tuples(
        "SELECT source, target FROM topology_edges WHERE topology_id = ? AND network = 'scale_out'", tid
    )
    pods: dict[int, int] = {}
    for a, b in edges:
        for nic, leaf in ((a, b), (b, a)):
            if nodes[nic][0] == "nic" and nodes[leaf][0] == "leaf" and nodes[nic][1] is not None:
                block, pod = nodes[nic][1], nodes[leaf][2]
                pods[block] = pod if block not in pods else min(pods[block], pod)
    return nodes, pods


def _cells(
    links: list[tuple[Any, ...]], nodes: dict[str, tuple[str, int | None, int | None]], pods: dict[int, int]
) -> list[heat.Cell]:
    """Loaded links grouped per tier and pod: a switch's own pod, else its building block's."""
    peak: dict[tuple[str, int | None], float] = {}
    count: dict[tuple[str, int | None], int] = defaultdict(int)
    for a, b, tier, u in links:
        pod = next((nodes[n][2] for n in (a, b) if nodes[n][2] is not None), None)
        if pod is None:
            pod = next((pods[nodes[n][1]] for n in (a, b) if nodes[n][1] in pods), None)
        key = (tier, pod)
        peak[key] = max(peak.get(key, 0.0), u)
        count[key] += 1
    return [heat.Cell(t, p, peak[(t, p)], count[(t, p)]) for t, p in sorted(peak, key=lambda k: (k[0], k[1] or 0))]


def _plots(out: Path, traffic: list[dict[str, Any]], lay: Layout) -> list[dict[str, str]]:
    cases: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for p in traffic:
        key = f"{p['workload_id']} @ {p['topology_id']}"
        for i, term in enumerate(("latency_s", "bandwidth_s", "queueing_s")):
            cases[key][i] += p[term] * p["count"]
    labels = sorted(cases)
    series = {name: [cases[k][i] for k in labels] for i, name in enumerate(("overhead", "bandwidth", "queueing"))}
    atomic_write_bytes(
        out / "plots" / "phase-times.svg",
        drawings.bar_chart(
            "Communication time per step / request: overhead, bandwidth, queueing", labels, series, "seconds"
        ),
    )
    kv_csv = lay.registry_dir / "traffic" / "plots" / "kv_transfer.csv"
    result = [{"src": "plots/phase-times.svg", "alt": "time per workload split into overhead, bandwidth, queueing"}]
    if kv_csv.exists():
        lines = [line.split(",") for line in kv_csv.read_text().splitlines()[1:]]
        if lines:
            x = [float(r[0]) for r in lines]
            atomic_write_bytes(
                out / "plots" / "kv-transfer.svg",
                drawings.line_chart(
                    "KV-cache transfer: local inside NVL72 vs across the fabric (70B, per decode rank)",
                    x,
                    {
                        "local (NVL72 scale-up)": [float(r[1]) for r in lines],
                        "cross-domain (400G fabric)": [float(r[2]) for r in lines],
                    },
                    "prompt tokens",
                    "seconds",
                ),
            )
            result.append({"src": "plots/kv-transfer.svg", "alt": "KV transfer time local vs cross-domain"})
    return result
