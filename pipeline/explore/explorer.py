"""The explorer's library: one checkout's registry as `fabricref explore` reads it (`Explorer`).

Functions take ids and knobs and return the pydantic models of models.py (and formats/drawing.py), which the web
application serves as they are. They compute with the same library code as the pipeline (estimate/, inspect/) and
the Python API (api.py), read the registry's Parquet tables and graphs read-only (never registry.duckdb, which only
`fabricref query` and readers of the API create), and keep what is costly to load (graphs, views, results) in the
process, keyed by the registry's content.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import api
from ..core.format import format_count, format_percent
from ..core.paths import Layout, layout
from ..errors import FabricrefError, InputError, UsageError

if TYPE_CHECKING:
    from ..views.drawing import Groups

# Routed results and failed copies of a graph kept per process (a failed copy of the largest cluster is a few
# hundred MB).
LAID_ENTRIES = 16
FAILED_VIEWS = 2
# Results kept per process (each a few hundred kB at most): repeated requests are answered from here.
EXPLORER_CACHE_ENTRIES = 256
# How often the registry's content is looked at again (a rebuilt registry is picked up within this time).
FINGERPRINT_SECONDS = 2.0

_PHASE_KINDS = (
    ("prefill-tp-", "TP", "every layer of prefill waits for its tensor-parallel all-reduce"),
    ("decode-tp-", "TP", "every decoded token waits for its tensor-parallel all-reduces"),
    ("tp-", "TP", "every layer waits for its tensor-parallel all-reduce before the next can start"),
    ("cp-", "CP", "every attention layer waits for the K and V blocks of the other context-parallel ranks"),
    ("ep-", "EP", "each MoE layer's tokens go to their experts and back before the layer completes"),
    ("pp-", "PP neighbours", "each micro-batch's activations cross from one stage to the next (two ranks per hop)"),
    ("dp-", "DP / shard group", "the step ends only when every replica's gradients are reduced (or shards gathered)"),
    ("kv-", "KV pair", "the decode pool starts a request only once its KV cache has arrived from prefill"),
    ("frontend-", "client", "a request starts and ends at its client, over the frontend network"),
)


ExplorerInputError = InputError  # a refused request, with the field it names (errors.py)


def failure_statement() -> str:
    """What a surviving route does not establish: stated beside every failure analysis (estimate/ha.py)."""
    from ..estimate.ha import NOT_ESTABLISHED

    return NOT_ESTABLISHED


def knob_of(message: str) -> str | None:
    """The knob a library message is about: the explorer shows the CLI's message beside that control."""
    import re

    m = re.match(r"(\w+)(?:: not a knob|=)", message) or re.search(r"at \$\.(?:training|inference)\.(\w+)", message)
    if m:
        return m.group(1)
    if re.search(r"at \$\.placement", message):
        return "placement"
    if "tensor parallel" in message or "tensor-parallel" in message:
        return "tp"
    if re.search(r"needs \d+ accelerators", message):
        return "dp"
    return None


def _shown_quantity(value: Any, unit: str | None = None, direction: str | None = None) -> str:
    from ..core.format import format_quantity

    return format_quantity(value, unit, direction)


def _calibration_shown(field: str, value: float) -> str:
    """A calibration number as every explorer view prints it: the file names a number's unit in its key
    (…latency_us…), the rest are fractions and factors, printed with the digits the file states ('0.6875')."""
    import re

    from ..core.format import format_exact

    return _shown_quantity(value, "µs") if re.search(r"_us(\.|$)", field) else format_exact(value)


class Explorer:
    """One checkout's registry as the explorer reads it. Thread-safe: the web server calls it from its worker
    threads; DuckDB reads and graph loads are serialised, results are cached."""

    def __init__(self, root: str | Path | None = None) -> None:
        import threading

        self.lay = layout(Path(root) if root is not None else None)
        self._lock = threading.RLock()
        self._state: _ExplorerState | None = None
        self._checked_at = 0.0

    # -- the registry's content, and what is kept for it --------------------------------------------------------

    def fingerprint(self) -> str:
        """A digest of what every answer depends on: the registry's tables and graphs, models/ and params.yaml
        (path, size and modification time of each file). A rebuilt registry gives a new digest, and the cache
        keyed by the old one is dropped."""
        import hashlib

        h = hashlib.sha256()
        root = self.lay.root
        files = [root / "params.yaml"]
        for sub in ("registry/tables", "registry/topology"):
            files += sorted((root / sub).glob("*.parquet"))
        files += sorted((root / "models").rglob("*.yaml"))
        for path in files:
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            h.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return h.hexdigest()

    def _current(self) -> _ExplorerState:
        import time

        with self._lock:
            now = time.monotonic()
            if self._state is not None and now - self._checked_at < FINGERPRINT_SECONDS:
                return self._state
            digest = self.fingerprint()
            self._checked_at = now
            if self._state is None or self._state.fingerprint != digest:
                if self._state is not None:
                    self._state.close()
                self._state = _ExplorerState(self.lay, digest)
            return self._state

    def close(self) -> None:
        with self._lock:
            if self._state is not None:
                self._state.close()
                self._state = None

    def memo(self, key: tuple[Any, ...], compute: Any) -> Any:
        """`compute()` once per content of the registry and `key` (for the explorer's own derived views, such
        as a drawing's layout), then answered from the cache."""
        return self._cached(("memo", *key), lambda _state: compute())

    def _cached(self, key: tuple[Any, ...], compute: Any) -> Any:
        state = self._current()
        return state.kept(state.cache, key, EXPLORER_CACHE_ENTRIES, lambda: compute(state))

    # -- references ------------------------------------------------------------------------------------------

    def index(self) -> Any:
        """Every reference with its fields counted by status, every topology, every workload and where it fits."""
        return self._cached(("index",), lambda s: s.index())

    def reference(self, reference_id: str) -> Any:
        """One reference's fields: value (the digits the record holds), unit, direction, status."""
        return self._cached(("reference", reference_id), lambda s: s.reference(reference_id))

    def provenance(self, reference_id: str, field: str) -> Any:
        """The provenance tree of one field (`fabricref audit`): every citation with its source's title, URL,
        publisher kind, retrieval date, origin and SHA-256, re-hashed on every request (never cached: the bytes
        are checked now); a derived field's formula and each input, recursively."""
        return self._current().provenance(reference_id, field)

    def calibration(self, field: str) -> Any:
        """A calibration number (models/calibration/collectives.yaml) with its status and source."""
        return self._cached(("calibration", field), lambda s: s.calibration_node(field))

    def compare(self, a: str, b: str) -> Any:
        """Two references side by side, field by field, differences marked."""
        return self._cached(("compare", a, b), lambda s: s.compare(a, b))

    # -- the model -------------------------------------------------------------------------------------------

    def drawing(self, topology_id: str, open: str | None = None) -> Any:
        """The topology as drawn: every part and link (a system), or tiers × pods for a large cluster, or one
        pod, or one scale-up domain with the leaves it reaches (`open`: 'pod:N' or 'domain:ID')."""
        return self._cached(("drawing", topology_id, open), lambda s: s.drawing(topology_id, open))

    # -- a workload on the model -----------------------------------------------------------------------------

    def estimate(self, request: Any) -> Any:
        """A workload with the request's knobs laid onto the installed wiring, by the pipeline's own estimate:
        phases, memory fit, step time or TTFT / TPOT, confidence and lineage, who must talk to make progress,
        per-link load on the drawing at `request.open`, and, with failed parts, what they change."""
        key = ("estimate", request.model_dump_json())
        return self._cached(key, lambda s: s.estimate(request))

    def validation(self) -> Any:
        """The registry's validation table (`fabricref validate`), each row as both views show it."""
        return self._cached(("validation",), lambda s: s.validation())

    def sizing(self, request: Any) -> Any:
        """Memory of weights and training state, KV cache per token and per request, fleet size."""
        return _sizing(request)

    def warm(self, topology_id: str) -> None:
        """Load a topology's graph and build its routing arrays now, so the first estimate on it need not."""
        state = self._current()
        view = state.view(topology_id)
        with state.lock_for(topology_id):
            _ = view.wiring


class _ExplorerState:
    """What the explorer keeps for one content of the registry: open tables, loaded views, drawings' indexes."""

    def __init__(self, lay: Layout, fingerprint: str) -> None:
        import threading
        from collections import OrderedDict

        from ..core.registry import open_tables
        from ..estimate.traffic import Views

        self.lay = lay
        self.fingerprint = fingerprint
        self.tables = open_tables(lay)
        self.tables.lock_down()
        self.views = Views(lay)
        self.cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        # Heavier than answers, so fewer are kept: a workload's routed result (its links' rows), and a copy of a
        # graph with parts failed (a whole cluster's graph).
        self.laid: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self.failed_views: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self.cache_lock = threading.Lock()
        self.db_lock = threading.RLock()
        # DuckDB's connection behind the topology tables serves one thread at a time; each topology (and each
        # failed copy of one) is loaded, drawn and routed by one thread at a time, others in parallel.
        self.load_lock = threading.RLock()
        self._locks: dict[Any, threading.RLock] = {}
        self._locks_lock = threading.Lock()
        self._loaded: dict[str, Any] = {}
        self._groups: dict[str, Groups] = {}

    def close(self) -> None:
        with self.db_lock:
            self.tables.close()
        self.views.close()

    def kept(self, store: Any, key: tuple[Any, ...], entries: int, compute: Any) -> Any:
        """`store[key]`, computed once and kept among the `entries` most recently used."""
        with self.cache_lock:
            if key in store:
                store.move_to_end(key)
                return store[key]
        value = compute()
        with self.cache_lock:
            store[key] = value
            while len(store) > entries:
                store.popitem(last=False)
        return value

    def rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        with self.db_lock:
            return self.tables.rows(sql, *params)

    def lock_for(self, key: Any) -> Any:
        import threading

        with self._locks_lock:
            return self._locks.setdefault(key, threading.RLock())

    def view(self, topology_id: str) -> Any:
        from ..core.paths import check_slug

        found = self._loaded.get(topology_id)
        if found is not None:
            return found
        check_slug(topology_id, "topology id")
        with self.lock_for(topology_id):
            if topology_id not in self._loaded:
                with self.load_lock:
                    self._loaded[topology_id] = self.views(topology_id)
            return self._loaded[topology_id]

    # -- references ------------------------------------------------------------------------------------------

    def _summaries(self) -> list[Any]:
        from .models import ReferenceSummary

        counts: dict[str, dict[str, int]] = {}
        for r in self.rows("SELECT reference_id, status, count(*) AS n FROM fields GROUP BY ALL ORDER BY ALL"):
            counts.setdefault(r["reference_id"], {})[r["status"]] = r["n"]
        topologies = {r["topology_id"] for r in self.rows("SELECT topology_id FROM topology_graphs")}
        return [
            ReferenceSummary(
                reference_id=r["reference_id"],
                title=r["title"],
                form_factor=r["form_factor"],
                kind=r["kind"],
                summary=r["summary"] or "",
                counts={s: counts.get(r["reference_id"], {}).get(s, 0) for s in _STATUSES},
                topology=r["reference_id"] if r["reference_id"] in topologies else None,
            )
            for r in self.rows("SELECT * FROM reference_models ORDER BY reference_id")
        ]

    def _summary(self, reference_id: str) -> Any:
        from ..errors import UnknownIdError

        found = {s.reference_id: s for s in self._summaries()}
        if reference_id not in found:
            raise UnknownIdError("reference", reference_id, list(found))
        return found[reference_id]

    def topologies(self) -> list[Any]:
        import json

        from ..views import drawing
        from .models import TopologySummary

        summaries = {r["topology_id"]: json.loads(r["summary"]) for r in self.rows("SELECT * FROM topology_summaries")}
        out = []
        for r in self.rows("SELECT topology_id, reference, form_factor, kind, title FROM topology_graphs ORDER BY 1"):
            s = summaries[r["topology_id"]]
            size = s["scale_up_domain_size"]
            out.append(
                TopologySummary(
                    topology_id=r["topology_id"],
                    title=r["title"],
                    form_factor=r["form_factor"],
                    kind=r["kind"],
                    reference=r["reference"],
                    accelerators=s["accelerators"],
                    domain_size=size if isinstance(size, int) else min(size),
                    domains=s["scale_up_domains"],
                    aggregated=s["accelerators"] > drawing.DRAW_FULL_MAX_ACCELERATORS,
                )
            )
        return out

    def workloads(self, topologies: list[Any]) -> list[Any]:
        from ..core.paths import workload_paths
        from ..estimate.workloads import KNOBS, load_workload
        from .models import WorkloadSummary

        out = []
        for path in workload_paths(self.lay):
            w = load_workload(path)
            names = [*KNOBS[w.kind], *(("mode",) if w.kind == "inference" else ()), "placement"]
            out.append(
                WorkloadSummary(
                    workload_id=w.id,
                    title=w.title,
                    kind=w.kind,  # type: ignore[arg-type]
                    summary=w.summary,
                    accelerators=w.accelerators,
                    targets=list(w.targets),
                    fits_on=[t.topology_id for t in topologies if t.accelerators >= w.accelerators],
                    knobs=_knobs_of(w),
                    knob_names=names,
                    teaching=getattr(w, "teaching", None),
                )
            )
        return out

    def index(self) -> Any:
        from .models import Index

        refs = self._summaries()
        topologies = self.topologies()
        totals = {s: sum(r.counts.get(s, 0) for r in refs) for s in _STATUSES}
        return Index(references=refs, topologies=topologies, workloads=self.workloads(topologies), status_totals=totals)

    def _field_row(self, r: dict[str, Any], citations: list[dict[str, Any]] | None = None) -> Any:
        from ..core.citing import check_of, check_text, conflict_text
        from .models import FieldCheck, FieldRow

        shown_value = _shown_value(r["status"], r["value_text"], r["value_number"], r["unit"], r.get("digits"))
        check = check_of(r)
        # The words every view uses (core/citing.py): a conflict's every claim with its date, a check beside the
        # stated figure.
        evidence = {}
        if r.get("conflict") and citations:
            evidence["conflict"] = conflict_text(citations, r.get("resolved_by"))
        if check is not None:
            evidence["check"] = check_text(check, r)
        return FieldRow(
            field=r["field"],
            description=r["description"] or "",
            value_number=r["value_number"],
            value_text=r["value_text"],
            unit=r["unit"],
            direction=r["direction"],
            status=r["status"],
            confidence=r["confidence"],
            formula=r["formula"],
            digits=r.get("digits"),
            conflict=bool(r.get("conflict")),
            resolved_by=r.get("resolved_by"),
            check=FieldCheck(**check) if check is not None else None,
            shown={
                "field": r["field"],
                "value": shown_value,
                "unit": r["unit"] or "",
                "direction": (r["direction"] or "").replace("_", " "),
                "status": r["status"],
                **evidence,
            },
        )

    def reference(self, reference_id: str) -> Any:
        from .models import ReferenceDetail

        summary = self._summary(reference_id)
        rows = self.rows("SELECT * FROM fields WHERE reference_id = ? ORDER BY field", reference_id)
        cites: dict[str, list[dict[str, Any]]] = {}
        for c in self.rows(
            "SELECT * FROM field_citations WHERE reference_id = ? ORDER BY field, source_id, rule_id", reference_id
        ):
            cites.setdefault(c["field"], []).append(c)
        return ReferenceDetail(reference=summary, fields=[self._field_row(r, cites.get(r["field"])) for r in rows])

    def compare(self, a: str, b: str) -> Any:
        from .models import CompareRow, Comparison

        ra, rb = self.reference(a), self.reference(b)
        fa, fb = {f.field: f for f in ra.fields}, {f.field: f for f in rb.fields}
        rows = []
        for name in sorted(set(fa) | set(fb)):
            x, y = fa.get(name), fb.get(name)
            same = x is not None and y is not None and _same_value(x, y)
            rows.append(CompareRow(field=name, a=x, b=y, differs=not same))
        return Comparison(a=ra.reference, b=rb.reference, rows=rows, differing=sum(r.differs for r in rows))

    def provenance(self, reference_id: str, field: str) -> Any:
        from ..inspect.audit import audit as library_audit

        self._summary(reference_id)
        sources = {r["source_id"]: r for r in self.rows("SELECT * FROM sources")}
        with self.db_lock:
            tree = library_audit(self.lay, reference_id, field, self.tables)
        return _provenance(tree, sources)

    def calibration_node(self, field: str) -> Any:
        from ..estimate.calibration import load_calibration
        from ..inspect.audit import calibration_node
        from .models import Provenance

        n = load_calibration(self.lay.root).number(field)
        if n is None:
            raise ExplorerInputError(f"no calibration number {field!r} in models/calibration/collectives.yaml", ())
        node = calibration_node(self.lay, {"field": field, "status": n.status, "confidence": _confidence_of(n.status)})
        return Provenance(
            **{k: node[k] for k in ("reference_id", "field", "value", "status", "confidence", "why", "source_url")},
            shown={"value": _calibration_shown(field, n.value)},
        )

    # -- the model drawn -------------------------------------------------------------------------------------

    def groups(self, topology_id: str) -> Groups:
        found = self._groups.get(topology_id)
        if found is not None:
            return found
        view = self.view(topology_id)
        with self.lock_for(topology_id):
            if topology_id not in self._groups:
                from .drawing import Opened

                self._groups[topology_id] = Opened(view)
            return self._groups[topology_id]

    def drawing(self, topology_id: str, open: str | None) -> Any:
        return self.groups(topology_id).drawing(open)

    def validation(self) -> list[Any]:
        from ..views import validation
        from .models import ValidationRow

        if "validation" not in self.tables.paths:
            return []
        return [ValidationRow(**r) for r in validation.shown(self.rows(validation.SQL))]

    # -- a workload on the model -----------------------------------------------------------------------------

    def estimate(self, request: Any) -> Any:
        return _estimate(self, request)


_STATUSES = ("published", "preliminary", "derived", "unknown")


def _same_value(x: Any, y: Any) -> bool:
    """Two fields state the same thing: equal numbers once in one unit and direction ('Eight' and '8' count, 1.8
    TB/s and 1800 GB/s), or equal text; an unknown equals only an unknown."""
    from ..core.units import convert, convert_direction

    if x.status == "unknown" or y.status == "unknown":
        return x.status == y.status
    if x.value_number is not None and y.value_number is not None:
        try:
            b = convert(y.value_number, y.unit or "count", x.unit or "count")
            if x.direction != y.direction:
                b = convert_direction(b, y.direction, x.direction)
        except FabricrefError:
            return False
        return abs(b - x.value_number) <= 1e-9 * max(abs(b), abs(x.value_number), 1e-300)
    return (x.value_text or "") == (y.value_text or "")


def _confidence_of(status: str) -> str:
    from ..core import confidence

    try:
        return confidence.of_status(status)
    except (KeyError, ValueError):
        return status


def _provenance(node: dict[str, Any], sources: dict[str, dict[str, Any]]) -> Any:
    """The audit tree as the explorer's model: each citation with its source's title, publisher and kind."""
    from .models import Citation, Provenance

    citations = []
    for p in node.get("provenance", []):
        s = sources.get(p["source_id"], {})
        citations.append(
            Citation(
                source_id=p["source_id"],
                title=s.get("title"),
                url=p["url"],
                publisher=s.get("publisher"),
                publisher_kind=s.get("publisher_kind"),
                read_via=s.get("read_via"),
                published_on=s.get("published_on"),
                claim_value_number=p.get("value_number"),
                claim_value_text=p.get("value_text"),
                agrees=p.get("agrees"),
                rule_id=p["rule_id"],
                revision=p["revision"],
                retrieved_at=str(p["retrieved_at"]),
                sha256=p["sha256"],
                verified=bool(p["verified"]),
                problem=p.get("problem"),
                origin=p["origin"],
                locator=p["locator"],
                excerpt=p["excerpt"],
                stated=p["stated"],
            )
        )
    from ..core.citing import check_text, conflict_text
    from .models import FieldCheck

    value = node.get("value")
    status = node["status"]
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    shown = {"value": _shown_value(status, node.get("value_text"), number, node.get("unit"), node.get("digits"))}
    if node.get("conflict"):
        shown["conflict"] = conflict_text(node.get("provenance", []), node.get("resolved_by"))
    if node.get("check"):
        shown["check"] = check_text(node["check"], {**node, "value_number": number})
    return Provenance(
        reference_id=node["reference_id"],
        field=node["field"],
        value=value if isinstance(value, (int, float, str)) or value is None else str(value),
        value_text=node.get("value_text"),
        unit=node.get("unit"),
        direction=node.get("direction"),
        status=status,
        confidence=node.get("confidence") or _confidence_of(status),
        formula=node.get("formula"),
        reason=node.get("reason"),
        evidence_needed=node.get("evidence_needed"),
        why=node.get("why"),
        digits=node.get("digits"),
        conflict=bool(node.get("conflict")),
        resolved_by=node.get("resolved_by"),
        check=FieldCheck(**node["check"]) if node.get("check") else None,
        citations=citations,
        inputs=[_provenance(i, sources) for i in node.get("inputs", [])],
        shown=shown,
    )


def _shown_value(
    status: str, text: str | None, number: float | None, unit: str | None, digits: int | None = None
) -> str:
    """A field's value as views print it: the document's own digits ('Eight', '80 GB'), with the unit when they
    leave it out; a derived value to the precision its inputs justify (`digits`, the record's), with its unit;
    never a bare number."""
    if status == "unknown":
        return "unknown"
    if status == "derived" and number is not None:
        from ..core.format import format_field

        return format_field({"value_number": number, "unit": unit, "direction": None, "digits": digits})
    import re

    shown = text or _shown_quantity(number, unit)
    if unit and unit not in ("count", "1") and re.fullmatch(r"[\d.,\s]+", shown):  # bare digits: say the unit
        shown += f" {unit}"
    return shown


@dataclasses.dataclass(frozen=True)
class _Laid:
    """A workload laid onto one view: the estimate's result and its step figures (kept for what-if requests)."""

    workload: Any
    result: Any
    step: dict[str, Any]


def _clean(state: _ExplorerState, message: str) -> str:
    """A library message without the server's checkout path (the page names files relative to the checkout)."""
    return message.replace(str(state.lay.root) + "/", "")


def _lay_workload(state: _ExplorerState, view: Any, request: Any) -> _Laid:
    """The workload with the request's knobs on `view` (the installed wiring, or a copy with parts failed), by the
    pipeline's estimate and step model; a refusal names the knob it is about."""
    from ..errors import UnknownIdError
    from ..estimate.traffic import estimate
    from ..estimate.workloads import find_workload, with_knobs

    try:
        w = with_knobs(find_workload(state.lay, request.workload), request.knobs.overrides())
    except UnknownIdError:
        raise
    except FabricrefError as exc:
        knob = knob_of(str(exc))
        raise ExplorerInputError(
            _clean(state, str(exc)), ("body", "knobs", knob) if knob else ("body", "workload")
        ) from None
    try:
        with state.lock_for(request.topology):
            result = estimate(state.lay, request.topology, w, 0, view)
        with state.load_lock:
            st = state.views.step(view, w, result)
    except UsageError as exc:
        if isinstance(exc, ExplorerInputError):
            raise
        knob = knob_of(str(exc))
        if knob == "dp":  # too many accelerators: the degree the request changed, if it changed one
            given = [k for k in ("dp", "tp", "pp", "prefill_tp", "decode_tp") if k in request.knobs.overrides()]
            knob = given[0] if given else ("dp" if w.kind == "training" else None)
        raise ExplorerInputError(_clean(state, str(exc)), ("body", "knobs", knob) if knob else ("body",)) from None
    return _Laid(w, result, st)


def _estimate(state: _ExplorerState, request: Any) -> Any:
    from ..estimate import CAVEAT
    from .models import Estimate

    view = state.view(request.topology)
    groups = state.groups(request.topology)
    level = groups.check_level(request.open)
    base_key = ("laid", request.topology, request.workload, request.knobs.model_dump_json())
    laid = state.kept(state.laid, base_key, LAID_ENTRIES, lambda: _lay_workload(state, view, request))
    w, result, st = laid.workload, laid.result, laid.step
    what_if, loaded = None, result
    if request.fail:
        what_if, failed = _what_if(state, view, request, laid)
        loaded = failed if failed is not None else result
    fields = _field_values(state, view.reference)
    phases = [_phase_row(r, fields, state) for r in api.phase_records(result)]
    _, edge_map = groups.level(level)
    drawing = groups.drawing(level)
    comm = result.communication_seconds
    return Estimate(
        topology=request.topology,
        workload=w.id,
        title=w.title,
        kind=w.kind,
        knobs=_knobs_of(w),
        accelerators=w.accelerators,
        phases=phases,
        communication_seconds=comm,
        confidence=result.confidence,
        fit=_fit(st),
        step=_step_figures(st, fields),
        progress=_progress(result),
        level=level,
        heat=request.heat,
        link_loads=_link_loads(loaded, edge_map, drawing, request.heat),
        what_if=what_if,
        teaching=getattr(w, "teaching", None),
        caveat=CAVEAT,
        shown={
            "communication": _shown_quantity(comm, "s") if comm is not None else "unknown",
            "accelerators": f"{w.accelerators:,}",
        },
    )


def _knobs_of(w: Any) -> dict[str, Any]:
    """A workload's knobs as set (estimate/workloads.py `KNOBS`), its serving mode and its placement."""
    from ..estimate.workloads import KNOBS

    block = w.training if w.training is not None else w.inference
    knobs = {k: getattr(block, k) for k in KNOBS[w.kind]}
    if w.inference is not None:
        knobs["mode"] = w.inference.mode
    knobs["placement"] = w.placement.strategy if w.placement is not None else "fill-domains"
    return knobs


def _field_values(state: _ExplorerState, reference_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    rows = state.rows(
        "SELECT reference_id, field, value_number, value_text, unit, direction FROM fields WHERE reference_id = ?",
        reference_id,
    )
    return {(r["reference_id"], r["field"]): r for r in rows}


def _lineage_row(x: dict[str, Any], fields: dict[tuple[str, str], dict[str, Any]], state: _ExplorerState) -> Any:
    import re

    from ..estimate.calibration import load_calibration
    from .models import Lineage

    value: Any = None
    unit = source = note = None
    shown_value = "—"
    if x["reference_id"] == "calibration":
        cal = load_calibration(state.lay.root)
        n = cal.number(x["field"])
        if n is not None:
            value, note = n.value, n.note
            src = cal.sources.get(n.source) if n.source else None
            source = src.url if src is not None else None
            unit = "µs" if re.search(r"_us(\.|$)", x["field"]) else None
            shown_value = _calibration_shown(x["field"], value)
    elif (x["reference_id"], x["field"]) in fields:
        f = fields[(x["reference_id"], x["field"])]
        value = f["value_text"] if f["value_text"] is not None else f["value_number"]
        unit = f["unit"]
        shown_value = _shown_value(x["status"], f["value_text"], f["value_number"], unit)
    else:
        note = "a labelled topology assumption (models/topology/defaults.yaml or the model's `assumptions:`)"
    return Lineage(
        reference_id=x["reference_id"],
        field=x["field"],
        status=x["status"],
        confidence=x["confidence"],
        value=value,
        unit=unit,
        source=source,
        note=note,
        shown={"value": shown_value},
    )


def _phase_row(r: dict[str, Any], fields: dict[tuple[str, str], dict[str, Any]], state: _ExplorerState) -> Any:
    """One phase as the explorer shows it, from its record in the Python API (`api.phase_records`)."""
    from .models import HotLink, PhaseRow

    def s(x: float | None) -> str:
        return "unknown" if x is None else _shown_quantity(x, "s")

    groups = r["concurrent_groups"]
    # The record's figures as they are; what the explorer links (lineage, hot links) or prints (shown) is its own.
    figures = {k: r[k] for k in PhaseRow.model_fields if k not in ("lineage", "hot_links", "shown")}
    return PhaseRow(
        **figures,
        lineage=[_lineage_row(x, fields, state) for x in r["lineage"]],
        hot_links=[
            HotLink(
                **{k: h[k] for k in HotLink.model_fields if k != "shown"},
                shown={
                    "link": f"{h['source']} – {h['target']}",
                    "tier": h["tier"],
                    "bytes": f"{_shown_quantity(h['bytes_forward'], 'B')} → / "
                    f"{_shown_quantity(h['bytes_reverse'], 'B')} ←",
                },
            )
            for h in r["hot_links"]
        ],
        shown={
            "phase": r["phase"],
            "collective": r["collective"],
            "algorithm": r["algorithm"],
            "group": f"{r['group_size']:,}" + (f" × {groups:,} groups" if groups > 1 else ""),
            "network": f"{r['network'].replace('_', '-')} · {r['tier']}",
            "tier": r["tier"],
            "bytes": _shown_quantity(r["bytes_per_rank"], "B"),
            "wire": _shown_quantity(r["bytes_on_wire_per_rank"], "B"),
            "bandwidth": _shown_quantity(r["effective_gbps"], "Gb/s", "per_direction")
            if r["effective_gbps"]
            else "unknown",
            "overhead": s(r["latency_seconds"]),
            "transfer": s(r["bandwidth_seconds"]),
            "queueing": s(r["queueing_seconds"]),
            "time": s(r["seconds"]),
            "count": f"× {r['count']:,}",
            "total": s(r["total_seconds"]),
            "dominant": r["dominant"],
            "confidence": r["confidence"],
        },
    )


def _fit(st: dict[str, Any]) -> Any:
    from ..estimate.step import fit_verdict
    from .models import Fit

    mem = st.get("memory", {})
    return Fit(
        memory_per_rank_bytes=st.get("memory_per_rank_bytes"),
        accelerator_memory_bytes=mem.get("accelerator_memory_bytes"),
        fits=st.get("fits"),
        headroom_bytes=st.get("headroom_bytes"),
        verdict=fit_verdict(st),
        shown={
            "memory_per_rank": _shown_quantity(st.get("memory_per_rank_bytes"), "B"),
            "accelerator_memory": _shown_quantity(mem.get("accelerator_memory_bytes"), "B"),
            "fits": {True: "fits", False: "does not fit", None: "unknown"}[st.get("fits")],
            "headroom": _shown_quantity(st.get("headroom_bytes"), "B"),
        },
    )


_STEP_ROWS = {
    "training": (
        ("step_seconds", "step time", "s", "compute + exposed communication + pipeline bubble + optimizer"),
        ("compute_seconds", "compute", "s", "each layer's kernels at the calibrated achieved rates"),
        ("exposed_communication_seconds", "exposed communication", "s", "communication not hidden behind compute"),
        ("bubble_seconds", "pipeline bubble", "s", "stages idle while the pipeline fills and drains"),
        ("optimizer_seconds", "optimizer step", "s", "the optimizer's pass over its shard of the state"),
        ("communication_seconds", "all communication", "s", "the sum of the phases, hidden or not"),
        ("tokens_per_step", "tokens per step", "count", "DP × micro-batch × micro-batches × sequence length"),
        ("tflops_per_accelerator", "achieved TFLOP/s per accelerator", "TFLOP/s", "model FLOPs ÷ step time"),
        ("mfu", "MFU (an output)", "%", "model FLOPs utilisation against the registry's peak"),
    ),
    "inference": (
        ("ttft_seconds", "time to first token (TTFT)", "s", "prefill compute + prefill communication (+ KV)"),
        ("tpot_seconds", "time per output token (TPOT)", "s", "the larger of the memory floor and compute, + comm"),
        ("tpot_memory_floor_seconds", "TPOT memory floor", "s", "weights + KV read once per token at HBM bandwidth"),
        ("prefill_compute_seconds", "prefill compute", "s", "the prompt's kernels at the calibrated achieved rates"),
        ("communication_seconds", "communication per request", "s", "the sum of the phases"),
        ("tokens_per_second_per_group", "tokens/s of one serving group", "tokens/s", "batch ÷ TPOT"),
        ("max_concurrent_sequences", "concurrent sequences that fit", "count", "free memory ÷ KV cache per sequence"),
    ),
}


def _step_figures(st: dict[str, Any], fields: dict[tuple[str, str], dict[str, Any]]) -> Any:
    from .models import Lineage, StepFigures

    rows, values = [], {}
    for key, name, unit, meaning in _STEP_ROWS[st["kind"]]:
        value = st.get(key)
        if key not in st:
            continue
        values[key] = None if value is None else float(value)
        if value is None:
            shown = "unknown"
        elif unit == "%":
            shown = format_percent(value)
        else:
            shown = _shown_quantity(value, unit)
        if key == "tpot_seconds" and st.get("tpot_bound"):
            shown += f" ({st['tpot_bound']}-bound)"
        rows.append({"quantity": name, "value": shown, "meaning": meaning})
    lineage = []
    for x in st.get("accelerator_fields", []):
        f = fields.get((x["reference_id"], x["field"]))
        value = None if f is None else (f["value_text"] if f["value_text"] is not None else f["value_number"])
        lineage.append(
            Lineage(
                **x,
                value=value,
                unit=None if f is None else f["unit"],
                shown={
                    "value": "—"
                    if f is None
                    else _shown_value(x["status"], f["value_text"], f["value_number"], f["unit"])
                },
            )
        )
    return StepFigures(
        kind=st["kind"],
        rows=rows,
        values=values,
        missing=list(st.get("missing", [])),
        assumptions=list(st.get("assumptions", [])),
        calibration=[str(c) for c in st.get("calibration", [])],
        accelerator_fields=lineage,
    )


def _progress(result: Any) -> Any:
    from .models import Progress, ProgressGroup

    rv = result.revealing
    groups = []
    for p in result.phases:
        kind, why = "other", "a communication of the step"
        for prefix, k, reason in _PHASE_KINDS:
            if p.phase.startswith(prefix):
                kind, why = k, reason
                break
        groups.append(
            ProgressGroup(
                kind=kind,
                phase=p.phase,
                size=p.group_size,
                concurrent_groups=p.concurrent_groups,
                critical=True,
                why=why,
            )
        )
    return Progress(
        accelerators=rv["accelerators_per_progress"],
        what=rv["for"],
        domain_size=rv["scale_up_domain_size"],
        domains_spanned=rv["domains_spanned"],
        fits_in_one_domain=rv["fits_in_one_domain"],
        groups=groups,
    )


def _link_loads(result: Any, edge_map: dict[tuple[str, str], tuple[str, bool]], drawing: Any, heat: str) -> list[Any]:
    """Load per drawn link over one step or request (views/loads.py, as the report draws it)."""
    from ..views.loads import link_loads

    rows = (
        (row["source"], row["target"], row["bytes_forward"] * p.count, row["bytes_reverse"] * p.count)
        for p in result.phases
        for row in p.links
    )
    return link_loads(rows, edge_map, drawing, heat, result.known_communication_seconds)


def _failed_view(state: _ExplorerState, view: Any, request: Any) -> tuple[Any, list[str], list[str]]:
    """A copy of the installed wiring with the clicked parts removed (the installed graph is never changed), what
    was failed, and the capacity each failure takes away."""

    from ..estimate.view import View
    from ..views.drawing import FAILABLE_KINDS

    g = view.g
    names, lost, edges, nodes = [], [], [], []
    for i, f in enumerate(request.fail):
        where = ("body", "fail", str(i))
        if f.target is None:
            if f.source not in g:
                raise ExplorerInputError(f"no part {f.source!r} in topology {request.topology}", where)
            kind = view.kind[f.source]
            if kind not in FAILABLE_KINDS:
                raise ExplorerInputError(
                    f"{f.source} is a {kind.replace('_', ' ')}: fail a NIC, a switch or a link", where
                )
            nodes.append(f.source)
            by_net: dict[str, float] = {}
            for _, d in g[f.source].items():
                by_net[d["network"]] = by_net.get(d["network"], 0.0) + (d.get("bandwidth_gbps") or 0.0)
            names.append(f"{kind.replace('_', ' ')} {f.source}")
            lost.append(
                f"{f.source}: "
                + ", ".join(
                    f"{_shown_quantity(v, 'Gb/s', 'per_direction')} of {k.replace('_', '-')}"
                    for k, v in sorted(by_net.items())
                )
            )
        else:
            if not g.has_edge(f.source, f.target):
                raise ExplorerInputError(f"no link {f.source} – {f.target} in topology {request.topology}", where)
            d = g[f.source][f.target]
            edges.append((f.source, f.target))
            names.append(f"link {f.source} – {f.target}")
            lost.append(
                f"{f.source} – {f.target}: {_shown_quantity(d.get('bandwidth_gbps'), 'Gb/s', 'per_direction')} "
                f"({d['network'].replace('_', '-')})"
            )
            lost += _uplink_note(g, view.kind, f.source, f.target)
    key = (request.topology, tuple(sorted(nodes)), tuple(sorted(tuple(sorted(e)) for e in edges)))

    def copy() -> Any:
        g2 = _wiring_copy(g)
        g2.remove_edges_from(edges)
        g2.remove_nodes_from(nodes)
        failed = View(g2, view.endpoint_s * 1e9, view.summary)
        failed.calibration = view.calibration
        failed.scale_up_technology = view.scale_up_technology
        return failed

    found = state.kept(state.failed_views, key, FAILED_VIEWS, copy)
    return found, names, lost


def _wiring_copy(g: Any) -> Any:
    """A copy of a topology's graph whose wiring can be changed (links and parts removed) while its attribute
    dicts stay shared with the installed graph: nothing changes an attribute (a topology's edge attributes are
    read-only, core/graphs.py `EdgeAttrs`; the estimate only reads node attributes). `Graph.copy()` copies every
    attribute dict, ~4 s for the 24,576-GPU cluster against ~0.2 s for its adjacency alone."""
    import networkx as nx

    copy = nx.Graph()
    copy.graph.update(g.graph)
    copy._node = dict(g._node)  # type: ignore[attr-defined]
    copy._adj = {u: dict(nbrs) for u, nbrs in g._adj.items()}  # type: ignore[attr-defined]
    return copy


def _uplink_note(g: Any, kind: dict[str, str], a: str, b: str) -> list[str]:
    """For a leaf's uplink (`g` a topology's graph, `kind` each part's kind): the leaf's uplink capacity and
    oversubscription before and after (as estimate/ha.py reports its built-in scenario), through the one
    formatter."""
    from ..views.render import ratio

    leaf = a if kind[a] == "leaf" else b if kind[b] == "leaf" else None
    other = b if leaf == a else a
    if leaf is None or kind[other] not in ("spine", "core"):
        return []
    up = sum(d.get("bandwidth_gbps") or 0 for m, d in g[leaf].items() if kind[m] in ("spine", "core"))
    down = sum(d.get("bandwidth_gbps") or 0 for m, d in g[leaf].items() if kind[m] == "nic")
    gone = g[a][b].get("bandwidth_gbps") or 0
    if not up or up - gone <= 0:
        return [f"{leaf} loses its last uplink"]
    return [
        f"{leaf}'s uplink capacity falls from {_shown_quantity(up, 'Gb/s')} to {_shown_quantity(up - gone, 'Gb/s')}"
        f" per direction: oversubscription {ratio(down / up)} becomes {ratio(down / (up - gone))} for traffic "
        "leaving the leaf"
    ]


def _what_if(state: _ExplorerState, view: Any, request: Any, laid: _Laid) -> tuple[Any, Any]:
    """The workload again on the wiring with the clicked parts failed: does every route survive, and what happens
    to each phase's time and bandwidth. Always with what a surviving route does not establish."""
    from ..estimate.ha import NOT_ESTABLISHED
    from ..estimate.traffic import estimate
    from .models import WhatIf, WhatIfPhase

    failed_view, names, lost = _failed_view(state, view, request)
    error = None
    result = None
    try:
        with state.lock_for(id(failed_view)):
            result = estimate(state.lay, request.topology, laid.workload, 0, failed_view)
    except UsageError as exc:
        error = _clean(state, str(exc))
    after = {p.phase: p for p in result.phases} if result is not None else {}
    rows = []
    for p in laid.result.phases:
        q = after.get(p.phase)
        rows.append(
            WhatIfPhase(
                phase=p.phase,
                seconds_before=p.total_seconds,
                seconds_after=None if q is None else q.total_seconds,
                effective_gbps_before=p.effective_gbps,
                effective_gbps_after=None if q is None else q.effective_gbps,
                route_survives=q is not None,
                shown={
                    "phase": p.phase,
                    "before": _shown_quantity(p.total_seconds, "s"),
                    "after": "no route" if q is None else _shown_quantity(q.total_seconds, "s"),
                    "bandwidth_before": _shown_quantity(p.effective_gbps, "Gb/s", "per_direction"),
                    "bandwidth_after": "—" if q is None else _shown_quantity(q.effective_gbps, "Gb/s", "per_direction"),
                    "change": _change(p.total_seconds, None if q is None else q.total_seconds),
                },
            )
        )
    what = WhatIf(
        failed=names,
        route_survives=result is not None,
        capacity_lost=lost,
        phases=rows,
        statement=NOT_ESTABLISHED,
        error=error,
    )
    return what, result


def _change(before: float | None, after: float | None) -> str:
    if before is None or after is None or before == 0:
        return "—"
    ratio = after / before - 1
    return "unchanged" if abs(ratio) < 5e-4 else format_percent(ratio, digits=3, signed=True)


def _sizing(request: Any) -> Any:
    """The calculators of `fabricref estimate memory / kv / capacity`, by the same library functions."""
    import math

    from ..estimate import memory, sizing
    from .models import Sizing, SizingRow

    r = request

    def row(quantity: str, value: float, unit: str, formula: str) -> SizingRow:
        return SizingRow(quantity=quantity, value=value, unit=unit, formula=formula, shown=_shown_quantity(value, unit))

    state_rows = []
    if r.layout in sizing.TRAINING_LAYOUTS:
        m = memory.training_state(r.params, r.layout, dp=r.dp, zero=r.zero, tp=r.tp, pp=r.pp)
        state_rows += [
            row("bytes per parameter", m["bytes_per_param"], "B", m["breakdown"]),
            row("model state, whole model", m["total_bytes"], "B", "parameters × bytes per parameter"),
            row("weights per rank", m["weights_bytes"], "B", "split over TP × PP; over DP too at ZeRO-3"),
            row("gradients per rank", m["gradients_bytes"], "B", "split over TP × PP; over DP too from ZeRO-2"),
            row("optimizer state per rank", m["optimizer_bytes"], "B", "split over TP × PP; over DP from ZeRO-1"),
            row("model state per rank", m["bytes"], "B", f"ZeRO-{r.zero}: {m['zero_meaning']}; before activations"),
        ]
    else:
        m = sizing.memory(r.params, r.layout)
        state_rows += [
            row("bytes per parameter", m["bytes_per_param"], "B", str(m["breakdown"])),
            row("weights, whole model", m["bytes"], "B", "parameters × bytes per parameter"),
            row("weights per rank", m["bytes"] / (r.tp * r.pp), "B", "split over TP × PP"),
        ]
    kv = sizing.kv_cache(r.layers, r.kv_heads, r.head_dim, r.kv_dtype, r.prompt_tokens + r.output_tokens)
    per_token = kv["bytes_per_token"]
    kv_rows = [
        row(
            "KV cache per token",
            per_token,
            "B",
            f"2 × layers × KV heads × head dim × bytes = 2 × {r.layers} × {r.kv_heads} × {r.head_dim} × "
            f"{format_count(sizing.dtype_bytes(r.kv_dtype))} B ({r.kv_dtype})",
        ),
        row(
            "KV cache per request",
            kv["bytes"],
            "B",
            f"per token × (prompt + output) = × {r.prompt_tokens + r.output_tokens:,} tokens",
        ),
        row("KV cache per request per rank", kv["bytes"] / r.tp, "B", "split over the TP group's KV heads"),
    ]
    cap = sizing.capacity(r.requests_per_second, r.output_tokens, r.group_tokens_per_second, r.group_size, r.headroom)
    fleet = [
        row("demand", cap.demand_tokens_per_second, "tokens/s", "request rate × output tokens per request"),
        row(
            "serving groups",
            cap.groups,
            "count",
            f"⌈demand × (1 + headroom {format_count(r.headroom)}) ÷ throughput of one group "
            f"({format_count(r.group_tokens_per_second)} tokens/s)⌉",
        ),
        row("accelerators", cap.accelerators, "count", f"groups × group size ({r.group_size})"),
    ]
    if not math.isfinite(cap.demand_tokens_per_second):
        raise ExplorerInputError("the demand is not a finite number", ("body", "requests_per_second"))
    return Sizing(sections={"memory": state_rows, "kv_cache": kv_rows, "fleet": fleet})
