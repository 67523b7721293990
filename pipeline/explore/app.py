"""The web application: JSON endpoints under /api/ that return the models of models.py, and the pages that call them.

Safety, one rule each: every input is validated by a pydantic model or a path pattern before any library code
sees it (a bad value is a 422 naming the field, never a traceback); nothing the client sends names a file (static
files are read into memory at start and served by name from that map); the registry is opened read-only and
nothing is written; each computation runs in a bounded pool with a time limit; every response carries a
Content-Security-Policy without inline script; pages are autoescaped Jinja templates and the scripts set text with
`textContent`, so no text from a source, a model or a log is ever read as markup.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mimetypes
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from jinja2 import Environment

from ..errors import FabricrefError, UnknownIdError
from ..formats.drawing import Drawing
from ..views import render, validation
from ..views.layout import lay_out
from . import models as fmt
from .explorer import Explorer, ExplorerInputError, failure_statement, knob_of
from .plan import search as plan_search

log = logging.getLogger("fabricref.explore")

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
# A computation (an estimate on the largest cluster, a what-if) past this is answered with a 503; at most WORKERS
# run at once (the rest wait their turn within the same limit).
TIME_LIMIT_SECONDS = 30.0
# The largest request body read (an estimate request with every knob and eight failures is under 2 kB).
MAX_BODY_BYTES = 64 * 1024
WORKERS = 2
SLUG = fmt.SLUG_PARAM
REFERENCE = Annotated[str, PathParam(pattern=SLUG, max_length=80)]


class _Static:
    """The files of explore/static/, read once: a request names a key of this map, never a path."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, str]] = {}
        root = resources.files("fabricref.explore") / "static"
        for entry in root.iterdir():
            if entry.is_file() and not entry.name.startswith("."):
                kind = mimetypes.guess_type(entry.name)[0] or "application/octet-stream"
                if kind.startswith("text/") or kind in ("application/javascript",):
                    kind += "; charset=utf-8"
                self.files[entry.name] = (entry.read_bytes(), kind)


def create_app(
    root: str | Path | None = None,
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
    warm: bool = True,
) -> FastAPI:
    """The application over one checkout's registry. `allowed_hosts`: the Host headers answered (a page of another
    site that resolves its name to 127.0.0.1 cannot read this one: DNS rebinding). `warm`: load every topology's
    graph, routing arrays and first drawing in the background as the server starts, smallest first, so the
    first request for each finds them loaded."""
    explorer = Explorer(root)
    explorer.fingerprint()  # fails early on a checkout without a registry
    pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="fabricref-explore")
    static = _Static()
    templates = render.environment("fabricref.explore")

    stop = threading.Event()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if warm:
            threading.Thread(target=_warm, args=(explorer, stop), name="fabricref-explore-warm", daemon=True).start()
        yield
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        explorer.close()

    app = FastAPI(
        lifespan=lifespan,
        title="fabricref explorer",
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.explorer = explorer

    async def run(fn: Any, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(pool, fn, *args)
        try:
            return await asyncio.wait_for(asyncio.shield(future), TIME_LIMIT_SECONDS)
        except TimeoutError:
            raise _Refused(
                503, f"the computation took longer than {TIME_LIMIT_SECONDS:g} s; try a smaller workload"
            ) from None

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Response:
        host = (request.headers.get("host") or "").rsplit(":", 1)[0].strip("[]")
        if host not in allowed_hosts:
            return _headers(
                JSONResponse({"detail": [{"loc": ["header", "host"], "msg": "unknown host"}]}, status_code=421)
            )
        if request.method not in ("GET", "HEAD", "POST"):
            return _headers(JSONResponse({"detail": [{"loc": [], "msg": "method not allowed"}]}, status_code=405))
        if request.method == "POST":
            length = request.headers.get("content-length")
            if length is None or not length.isdigit() or int(length) > MAX_BODY_BYTES:
                msg = f"a request body states its length (Content-Length) and is at most {MAX_BODY_BYTES:,} bytes"
                return _headers(
                    JSONResponse({"detail": [{"loc": ["header", "content-length"], "msg": msg}]}, status_code=413)
                )
        started = time.perf_counter()
        response: Response = await call_next(request)
        # The server's own time for this answer (what benchmarks/explore.py reads): W3C Server-Timing.
        response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1e3:.1f}"
        return _headers(response)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return JSONResponse({"detail": detail}, status_code=422)

    @app.exception_handler(_Refused)
    async def refused(request: Request, exc: _Refused) -> Response:
        return _error(request, templates, exc.status, exc.message, list(exc.loc))

    @app.exception_handler(FabricrefError)
    async def library(request: Request, exc: FabricrefError) -> Response:
        if isinstance(exc, UnknownIdError):
            return _error(request, templates, 404, str(exc), ["path"])
        if isinstance(exc, ExplorerInputError):
            return _error(request, templates, 422, str(exc), list(exc.loc))
        knob = knob_of(str(exc))
        return _error(request, templates, 422, str(exc), ["body", "knobs", knob] if knob else [])

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s", request.url.path)
        return _error(request, templates, 500, f"internal error ({type(exc).__name__}); see the server's log", [])

    # -- JSON ------------------------------------------------------------------------------------------------

    @app.get("/api/index", response_model=fmt.Index)
    async def index_json() -> Any:
        """References with their fields counted by status, topologies, workloads and where each fits."""
        return await run(explorer.index)

    @app.get("/api/references", response_model=list[fmt.ReferenceSummary])
    async def references_json() -> Any:
        return (await run(explorer.index)).references

    @app.get("/api/references/{reference_id}", response_model=fmt.ReferenceDetail)
    async def reference_json(reference_id: REFERENCE) -> Any:
        return await run(explorer.reference, reference_id)

    @app.get("/api/references/{reference_id}/fields/{field}/provenance", response_model=fmt.Provenance)
    async def provenance_json(
        reference_id: REFERENCE, field: Annotated[str, PathParam(pattern=fmt.FIELD_PARAM, max_length=120)]
    ) -> Any:
        return await run(explorer.provenance, reference_id, field)

    @app.get("/api/calibration/{field}", response_model=fmt.Provenance)
    async def calibration_json(field: Annotated[str, PathParam(pattern=r"^[A-Za-z0-9_.\-]{1,160}$")]) -> Any:
        return await run(explorer.calibration, field)

    @app.get("/api/compare", response_model=fmt.Comparison)
    async def compare_json(
        a: Annotated[str, Query(pattern=SLUG, max_length=80)], b: Annotated[str, Query(pattern=SLUG, max_length=80)]
    ) -> Any:
        return await run(explorer.compare, a, b)

    @app.get("/api/topologies", response_model=list[fmt.TopologySummary])
    async def topologies_json() -> Any:
        return (await run(explorer.index)).topologies

    @app.get("/api/workloads", response_model=list[fmt.WorkloadSummary])
    async def workloads_json() -> Any:
        return (await run(explorer.index)).workloads

    @app.get("/api/model/{topology_id}", response_model=Drawing)
    async def model_json(
        topology_id: REFERENCE, open: Annotated[str | None, Query(pattern=fmt.OPEN_PARAM, max_length=90)] = None
    ) -> Any:
        return await run(_drawing, explorer, topology_id, open)

    @app.get("/api/validation", response_model=list[fmt.ValidationRow])
    async def validation_json() -> Any:
        """`fabricref validate`'s table as the registry holds it: model vs published, ratio, tolerance, in/out."""
        return await run(explorer.validation)

    @app.post("/api/estimate", response_model=fmt.Estimate)
    async def estimate_json(request: fmt.EstimateRequest) -> Any:
        return await run(explorer.estimate, request)

    @app.post("/api/sizing", response_model=fmt.Sizing)
    async def sizing_json(request: fmt.SizingRequest) -> Any:
        return await run(explorer.sizing, request)

    @app.post("/api/plan", response_model=fmt.PlanPage)
    async def plan_json(request: fmt.PlanRequest) -> Any:
        """`fabricref plan train` in memory: the ranked layouts and the Pareto front (nothing is written)."""
        return await run(plan_search, explorer, request)

    # -- pages -----------------------------------------------------------------------------------------------

    def page(name: str, **context: Any) -> HTMLResponse:
        return HTMLResponse(templates.get_template(name).render(**context))

    @app.get("/", response_class=HTMLResponse)
    async def index_page() -> Any:
        return page("index.j2", index=await run(explorer.index), title="References")

    @app.get("/reference/{reference_id}", response_class=HTMLResponse)
    async def reference_page(reference_id: REFERENCE) -> Any:
        detail = await run(explorer.reference, reference_id)
        index = await run(explorer.index)
        return page("reference.j2", detail=detail, index=index, title=detail.reference.title)

    @app.get("/compare", response_class=HTMLResponse)
    async def compare_page(
        a: Annotated[str | None, Query(pattern=SLUG, max_length=80)] = None,
        b: Annotated[str | None, Query(pattern=SLUG, max_length=80)] = None,
    ) -> Any:
        index = await run(explorer.index)
        comparison = await run(explorer.compare, a, b) if a and b else None
        return page("compare.j2", index=index, comparison=comparison, a=a, b=b, title="Compare references")

    @app.get("/model", response_class=HTMLResponse)
    async def model_page() -> Any:
        return page(
            "model.j2", index=await run(explorer.index), statement=failure_statement(), title="Model and workload"
        )

    @app.get("/validation", response_class=HTMLResponse)
    async def validation_page() -> Any:
        rows = [r.model_dump() for r in await run(explorer.validation)]
        return page("validation.j2", rows=rows, summary=validation.summary(rows), title="Validation")

    @app.get("/drawing/{topology_id}.svg")
    async def drawing_svg(
        topology_id: REFERENCE, open: Annotated[str | None, Query(pattern=fmt.OPEN_PARAM, max_length=90)] = None
    ) -> Response:
        """The drawing as a standalone SVG file: the same template the report draws its drawings with."""
        drawn = await run(_drawing, explorer, topology_id, open)
        body = templates.get_template("drawing.svg.j2").render(s=render.svg(drawn))
        return Response(body, media_type="image/svg+xml; charset=utf-8")

    @app.get("/sizing", response_class=HTMLResponse)
    async def sizing_page() -> Any:
        return page("sizing.j2", defaults=fmt.SizingRequest(), title="Sizing")

    @app.get("/plan", response_class=HTMLResponse)
    async def plan_page() -> Any:
        return page("plan.j2", index=await run(explorer.index), title="Plan")

    @app.get("/static/{name}")
    async def static_file(name: Annotated[str, PathParam(pattern=r"^[a-z0-9][a-z0-9._-]{0,80}$")]) -> Response:
        found = static.files.get(name)
        if found is None:
            raise _Refused(404, f"no static file {name!r}")
        body, kind = found
        return Response(body, media_type=kind, headers={"Cache-Control": "max-age=300"})

    return app


def _headers(response: Response) -> Response:
    """The headers every answer carries, refusals included."""
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cross-Origin-Opener-Policy"] = "same-origin"
    response.headers.setdefault("Cache-Control", "no-store")
    return response


class _Refused(Exception):
    def __init__(self, status: int, message: str, loc: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.status, self.message, self.loc = status, message, loc


def _warm(explorer: Explorer, stop: threading.Event) -> None:
    """Every topology loaded, its routing arrays built and its first drawing laid out, smallest first."""
    try:
        topologies = sorted(explorer.index().topologies, key=lambda t: t.accelerators)
        for t in topologies:
            if stop.is_set():
                return
            explorer.warm(t.topology_id)
            _drawing(explorer, t.topology_id, None)
    except Exception:  # a broken registry is reported by the request that needs it
        log.exception("warming the explorer's cache failed")


def _drawing(explorer: Explorer, topology_id: str, open: str | None) -> Any:
    """The drawing with its layout (computed once per topology and level, then cached with it)."""
    return explorer.memo(("layout", topology_id, open), lambda: lay_out(explorer.drawing(topology_id, open)))


def _error(request: Request, templates: Environment, status: int, message: str, loc: list[Any]) -> Response:
    """JSON for /api/ (FastAPI's 422 shape: a list of {loc, msg}), an HTML page for a page."""
    if request.url.path.startswith("/api/"):
        return JSONResponse({"detail": [{"loc": loc, "msg": message, "type": "value_error"}]}, status_code=status)
    body = templates.get_template("error.j2").render(title=f"Error {status}", status=status, message=message)
    return HTMLResponse(body, status_code=status)
