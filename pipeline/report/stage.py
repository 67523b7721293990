"""Build registry/report/ from the registry alone: pages per reference, cluster and workload, drawings, plots.
Autoescaped (vendor text is data, never markup); self-contained: relative links and local SVG only, no scripts."""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment

from ..core.citing import check_of, check_text, conflict_text
from ..core.files import atomic_write_bytes
from ..core.format import format_field
from ..core.paths import Layout, contained
from ..core.registry import Tables, table_paths
from ..errors import FabricrefError
from ..views import render, validation
from . import LAYOUT_CAVEAT, measured
from .drawn import HEAT_BASIS, Drawer, Drawings

STATUSES = (
    "Statuses: published (a vendor document states it), preliminary (announced, not shipped), derived "
    "(computed, with formula and inputs), unknown (nobody states it: the value stays empty). Assumed figures "
    "are labelled."
)
# One line on every page; the caveats themselves on the caveats page it links to.
CAVEAT_LINE = (
    "Figures teach relationships (alpha-beta costs on the installed wiring); they are not an exact NCCL/RCCL schedule "
    "and do not predict measured throughput."
)
# Two parts, one DVC stage each: `models` writes what takes no workload's number (the reference and cluster pages
# with their drawings, the measured page, the curve plots, all drawn with matplotlib), so a changed workload does
# not rerun them nor load matplotlib; `workloads` writes every other page.
MODEL_READS = ("reference_models", "fields", "field_citations", "assumptions", "topology_summaries")
PAGE_READS = (
    "reference_models",
    "fields",
    "topology_summaries",
    "traffic",
    "traffic_workloads",
    "traffic_failures",
    "traffic_sharing",
    "traffic_links",
    "validation",
)
MODEL_PARTS = ("reference", "cluster", "drawings", "plots", measured.PAGE)
PAGE_PARTS = ("workload", "load", "validation.html", "caveats.html", "index.html")
KV_PLOT = "plots/kv-transfer.svg"
# The stacked bars of the index's time table: each term's colour (the heat maps' palette stays the drawings').
TERMS = {
    "overhead": ("latency_s", "#1f77b4"),
    "bandwidth": ("bandwidth_s", "#2ca02c"),
    "queueing": ("queueing_s", "#d62728"),
}


def _caveats(lay: Layout, con: Tables) -> list[str]:
    """The caveats the traffic and topology stages wrote beside their numbers, then the report's own."""
    path = lay.registry_dir / "traffic" / "caveats.json"
    if not path.exists():
        raise FabricrefError(f"{lay.relative(path)} is missing: run `dvc repro` (the traffic stage writes it)")
    found = list(json.loads(path.read_text(encoding="utf-8"))["caveats"])
    found += sorted(
        {json.loads(r["summary"]).get("caveat") for r in con.rows("SELECT summary FROM topology_summaries")}
    )
    return [c for c in dict.fromkeys(found) if c] + [LAYOUT_CAVEAT, STATUSES]


def _value(f: dict[str, Any]) -> str:
    """A field's value as the CLI prints it."""
    return format_field(f) if f["value_number"] is not None else f["value_text"] or ""


def _evidence(f: dict[str, Any]) -> None:
    """The words every view uses for a field's conflict and check (core/citing.py)."""
    f["conflict_text"] = conflict_text(f["citations"], f["resolved_by"]) if f["conflict"] else None
    check = check_of(f)
    f["check_text"] = check_text(check, f) if check is not None else None


def _env() -> Environment:
    """The report's templates and the ones it shares with the explorer (views/templates/)."""
    env = render.environment("fabricref.report", strict=True)
    env.globals["caveat_line"] = CAVEAT_LINE
    return env


def _clear(out: Path, parts: tuple[str, ...]) -> None:
    """Remove what this part of the report wrote last time (a dropped page must not linger)."""
    for name in parts:
        path = contained(out / name)  # never remove what a link out of the checkout leads to
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _open(lay: Layout, reads: tuple[str, ...]) -> Tables:
    paths = table_paths(lay, "tables", "topology", *(("traffic", "validation") if "traffic" in reads else ()))
    return Tables({name: paths[name] for name in reads})


# What both parts of the report start from: caveats, references, summaries, clusters (the summaries with a bisection).
_Common = tuple[list[str], list[dict[str, Any]], dict[str, dict[str, Any]], list[dict[str, Any]]]


def _begin(lay: Layout, con: Tables) -> _Common:
    summaries = {r["topology_id"]: json.loads(r["summary"]) for r in con.rows("SELECT * FROM topology_summaries")}
    clusters = [s for _, s in sorted(summaries.items()) if s.get("bisection_bandwidth_gbps")]
    refs = con.rows(
        """SELECT r.*, count(*) FILTER (WHERE f.status = 'published') AS published,
        count(*) FILTER (WHERE f.status = 'preliminary') AS preliminary,
        count(*) FILTER (WHERE f.status = 'derived') AS derived,
        count(*) FILTER (WHERE f.status = 'unknown') AS unknown
        FROM reference_models r JOIN fields f USING (reference_id) GROUP BY ALL ORDER BY r.reference_id""",
    )
    return _caveats(lay, con), refs, summaries, clusters


def _grouped(rows: list[dict[str, Any]], key: str) -> dict[Any, list[dict[str, Any]]]:
    """Rows split by one column, each group in the order the query returned it."""
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r[key]].append(r)
    return groups


Made = list[tuple[Path, Callable[..., bytes], tuple[Any, ...]]]  # (file in the report, its bytes' maker, arguments)
PARTS = ("models", "workloads")


def _technology(con: Tables) -> dict[str, str]:
    """Each reference's `scale_up.technology`, for the drawings' link labels."""
    rows = con.rows("SELECT reference_id, value_text FROM fields WHERE field = 'scale_up.technology'")
    return {r["reference_id"]: r["value_text"] for r in rows if r["value_text"]}


def run(lay: Layout, parts: tuple[str, ...] = PARTS) -> Path:
    """`python -m fabricref.report PART` and `fabricref report` (both parts): each part's inputs read and checked,
    then what it wrote last time cleared (in `_models` and `_pages`) and its pages and drawings written."""
    out = contained(lay.registry_dir / "report")  # a link out of the checkout is refused before anything is read
    env = _env()
    for part in parts:
        models = part == "models"
        with _open(lay, MODEL_READS if models else PAGE_READS) as con:
            common = _begin(lay, con)
            if models:
                with Drawer(lay, _technology(con), env) as drawer:
                    _write(_models(lay, out, env, con, common, drawer))
            else:
                drawings = Drawings(out / "drawings", lay, sorted(common[2]), env)
                _write(_pages(lay, out, env, con, common, drawings))
    return out


def _write(made: Made) -> None:
    for path, draw, args in made:
        atomic_write_bytes(path, draw(*args))


def _page(env: Environment, out: Path, page: str, **context: Any) -> None:
    """One page (`reference/ID.html` from `reference.html.j2`), its links relative to the report's root."""
    template = page.split("/")[0].removesuffix(".html") + ".html.j2"
    html = env.get_template(template).render(root="../" * page.count("/"), **context)
    atomic_write_bytes(out / page, html.encode())


def _models(lay: Layout, out: Path, env: Environment, con: Tables, common: _Common, drawer: Drawer) -> Made:
    """The reference and cluster pages with their drawings (each as a picture and as data, drawn.py), the measured
    page with a plot per log, the KV-transfer curve; each table read once, grouped per reference here."""
    caveats, refs, summaries, clusters = common
    fields_of = _grouped(con.rows("SELECT * FROM fields ORDER BY reference_id, field"), "reference_id")
    cites_of = _grouped(
        con.rows("SELECT * FROM field_citations ORDER BY reference_id, field, source_id"), "reference_id"
    )
    assumptions_of = _grouped(con.rows("SELECT * FROM assumptions ORDER BY reference_id, field"), "reference_id")
    logs = measured.read(lay)  # model vs measured logs: a page of their own, a plot each
    kv_plot = _kv_plot(out, lay)
    _clear(out, MODEL_PARTS)  # every input read
    drawn = set(drawer.ids)
    found: Made = []
    for tid in drawer.ids:
        found += [
            (out / "drawings" / f"{tid}.svg", drawer.svg, (tid,)),
            (out / "drawings" / f"{tid}.json", drawer.data, (tid,)),
        ]

    for ref in refs:
        rid = ref["reference_id"]
        fields = fields_of.get(rid, [])
        cites = _grouped(cites_of.get(rid, []), "field")
        for f in fields:
            f["value"] = _value(f)
            f["citations"] = cites.get(f["field"], [])
            _evidence(f)
        _page(
            env,
            out,
            f"reference/{rid}.html",
            title=ref["title"],
            caveats=caveats,
            ref=ref,
            fields=fields,
            drawn=drawer.drawing(rid) if rid in drawn else None,
            assumptions=assumptions_of.get(rid, []),
            summary=summaries.get(rid),
        )
    for s in clusters:
        tid = s["topology_id"]
        drawing = drawer.drawing(tid) if tid in drawn else None
        _page(env, out, f"cluster/{tid}.html", title=s["title"], caveats=caveats, s=s, drawn=drawing)
    found += [(out / log["plot"], measured.plot, (log,)) for log in logs]
    measured.write_page(out, env, caveats, logs)
    return found + kv_plot


def _pages(lay: Layout, out: Path, env: Environment, con: Tables, common: _Common, drawer: Drawings) -> Made:
    """The workload pages with their heat maps (on the models part's drawings), the validation and caveats pages,
    the index (with the time per workload, and the models part's curve plot)."""
    caveats, refs, _summaries, clusters = common
    drawn = set(drawer.ids)
    workloads = con.rows("SELECT * FROM traffic_workloads ORDER BY workload_id, topology_id")
    traffic = con.rows("SELECT * FROM traffic ORDER BY workload_id, topology_id, phase")
    failures = con.rows("SELECT * FROM traffic_failures ORDER BY workload_id, topology_id, failure")
    sharing = con.rows("SELECT * FROM traffic_sharing ORDER BY workload_id, topology_id, phase")
    checks = validation.shown(con.rows(validation.SQL))
    edge_bytes = _edge_bytes(con)
    times = _phase_times(traffic)
    logs = len(measured.read(lay))
    _clear(out, PAGE_PARTS)  # every input read and checked
    found: Made = []
    heat_maps: dict[tuple[str, str], dict[str, Any]] = {}
    for w in workloads:
        tid, wid = w["topology_id"], w["workload_id"]
        if tid not in drawn:
            continue
        loads = drawer.loads(tid, edge_bytes.get((tid, wid), []), w["communication_seconds"])
        if not loads:
            continue
        path = f"load/{tid}/{wid}.svg"
        found.append((out / path, drawer.svg, (tid, loads)))
        heat_maps[(tid, wid)] = {"src": path, "drawing": drawer.drawing(tid), "basis": HEAT_BASIS}

    # The pages of the other part that carry a drawing: every reference with a topology, then every cluster.
    cluster_ids = {c["topology_id"] for c in clusters}
    drawing_links = [
        {"page": f"reference/{rid}.html", "title": r["title"], "id": rid}
        for r in refs
        if (rid := r["reference_id"]) in drawn and rid not in cluster_ids
    ] + [{"page": f"cluster/{c['topology_id']}.html", "title": c["title"], "id": c["topology_id"]} for c in clusters]
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
        _page(env, out, f"workload/{wid}.html", title=f"Workload {wid}", caveats=caveats, targets=targets)
    summary = validation.summary(checks)
    _page(env, out, "validation.html", title="Validation: model vs published", rows=checks, summary=summary)
    _page(env, out, "caveats.html", title="Caveats", caveats=caveats)
    _page(
        env,
        out,
        "index.html",
        title="fabricref report",
        caveats=caveats,
        references=refs,
        clusters=clusters,
        workloads=workloads,
        drawings=drawing_links,
        phase_times=times,
        terms=[(name, colour) for name, (_, colour) in TERMS.items()],
        plots=[{"src": KV_PLOT, "alt": "KV transfer time local vs cross-domain"}] if (out / KV_PLOT).exists() else [],
        measured={"page": measured.PAGE, "logs": logs},
        validation=summary,
    )

    return found


def _edge_bytes(con: Tables) -> dict[tuple[str, str], list[tuple[str, str, float, float]]]:
    """Per (topology, workload), its bytes on each graph edge over one step or request, in edge order."""
    _, rows = con.tuples(
        "SELECT topology_id, workload_id, source, target, bytes_forward, bytes_reverse FROM traffic_link_steps "
        "ORDER BY 1, 2, 3, 4"
    )
    out: dict[tuple[str, str], list[tuple[str, str, float, float]]] = defaultdict(list)
    for tid, wid, a, b, f, r in rows:
        out[(tid, wid)].append((a, b, f, r))
    return out


def _phase_times(traffic: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per workload @ topology, its phases' overhead, bandwidth and queueing seconds per step or request, each with
    its bar segment (x, width) on a 0..100 scale shared by every row, the longest total spanning it. Drawn as
    rectangles in the page rather than by matplotlib: a knob reruns this part, and loading matplotlib was half its
    time (benchmarks/README.md)."""
    cases: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(TERMS, 0.0))
    for p in traffic:
        case = cases[f"{p['workload_id']} @ {p['topology_id']}"]
        for name, (column, _) in TERMS.items():
            value = p[column] * p["count"] if p[column] is not None and p["count"] is not None else None
            if value is None or not math.isfinite(value) or value < 0:
                raise FabricrefError(
                    f"registry/traffic/traffic.parquet: {p['workload_id']} on {p['topology_id']}, phase "
                    f"{p['phase']}: {column} {p[column]!r} × count {p['count']!r}; expected a finite number of "
                    "seconds ≥ 0; rebuild it with `dvc repro --force traffic`"
                )
            case[name] += value
    longest = max((sum(c.values()) for c in cases.values()), default=0.0) or 1.0
    rows = []
    for label, case in sorted(cases.items()):
        x, segments = 0.0, []
        for name, (_, colour) in TERMS.items():
            width = 100.0 * case[name] / longest
            segments.append({"term": name, "x": f"{x:.3f}", "width": f"{width:.3f}", "colour": colour})
            x += width
        rows.append({"label": label, **case, "total": sum(case.values()), "segments": segments})
    return rows


def _kv_plot(out: Path, lay: Layout) -> Made:
    """The KV-transfer curve (registry/traffic/plots/kv_transfer.csv, the curves stage's), when it has points."""
    from ..views.charts import line_chart  # matplotlib: loaded by the models part alone

    kv_csv = lay.registry_dir / "traffic" / "plots" / "kv_transfer.csv"
    lines = [line.split(",") for line in kv_csv.read_text().splitlines()[1:]] if kv_csv.exists() else []
    if not lines:
        return []
    x = [float(r[0]) for r in lines]
    title = "KV-cache transfer: local inside NVL72 vs across the fabric (70B, per decode rank)"
    series = {
        "local (NVL72 scale-up)": [float(r[1]) for r in lines],
        "cross-domain (400G fabric)": [float(r[2]) for r in lines],
    }
    return [(out / KV_PLOT, line_chart, (title, x, series, "prompt tokens", "seconds"))]
