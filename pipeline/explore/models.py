"""The explorer's requests and responses (`fabricref explore`): FastAPI validates every request against these
models (a bad value is a 422 naming the field) and serialises every response through them, so the browser only
ever receives text as JSON strings, never markup.

Requests are strict and bounded: every knob has a range, every id a pattern, every list a length, so no request can
ask for work beyond what the largest shipped cluster needs. Responses carry exact numbers and, beside them in
`shown`, the text the page prints (formatted once, by pipeline/core/format.py), so an export is what is shown. A
drawing and its link loads are the models of formats/drawing.py, which the report draws too.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_type_hints

from pydantic import Field, create_model

from ..formats.common import SLUG_PATTERN, Dtype, Strict
from ..formats.drawing import LinkLoad, Response, Shown
from ..plan.layout import Layout

Slug = Annotated[str, Field(pattern=SLUG_PATTERN, min_length=1, max_length=80)]
# A node of a topology graph as the topology stage names it ('b000/gpu0', 'leaf00012', 'nvidia-dgx-h100/sus3').
NODE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,159}$(?!\n)"
NodeId = Annotated[str, Field(pattern=NODE_PATTERN, max_length=160)]
FIELD_PATTERN = r"^(param\.)?[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$(?!\n)"
# What part of a large cluster a drawing opens: one pod (`pod:3`) or one scale-up domain (`domain:b012`).
OPEN_PATTERN = r"^(pod:[0-9]{1,4}|domain:[A-Za-z0-9][A-Za-z0-9_.\-/]{0,79})$(?!\n)"
Open = Annotated[str, Field(pattern=OPEN_PATTERN, max_length=90)]

# The same patterns for FastAPI's path and query parameters, which Rust's regex engine checks: it has no
# look-ahead, and its `$` already matches only at the very end (never before a trailing newline).
SLUG_PARAM, FIELD_PARAM, OPEN_PARAM = (p.replace(r"$(?!\n)", "$") for p in (SLUG_PATTERN, FIELD_PATTERN, OPEN_PATTERN))

# Bounds on what a request may ask: above the largest shipped cluster (24,576 accelerators) and its workloads, far
# below what would take the server minutes. Products of degrees are checked against the topology by the library.
MAX_DEGREE = 131_072
MAX_TOKENS = 1_048_576


# --- references ---------------------------------------------------------------------------------------------


class ReferenceSummary(Response):
    reference_id: str
    title: str
    form_factor: str
    kind: str
    summary: str = ""
    counts: dict[str, int] = Field(description="Fields by status: published, preliminary, derived, unknown.")
    topology: str | None = Field(description="The topology drawn from this reference, if it has one.")


class TopologySummary(Response):
    topology_id: str
    title: str
    form_factor: str
    kind: str
    reference: str
    accelerators: int
    domain_size: int
    domains: int
    aggregated: bool = Field(description="Drawn tier × pod first (too many links to draw one by one).")


class WorkloadSummary(Response):
    workload_id: str
    title: str
    kind: Literal["training", "inference"]
    summary: str
    accelerators: int
    targets: list[str] = Field(description="The topologies the workload file declares.")
    fits_on: list[str] = Field(description="Every topology with enough accelerators for its ranks.")
    knobs: dict[str, Any] = Field(description="The knobs as params.yaml (or the file) sets them.")
    knob_names: list[str]
    teaching: str | None = Field(default=None, description="A teaching example's label (e.g. 'does not fit').")


class Index(Response):
    references: list[ReferenceSummary]
    topologies: list[TopologySummary]
    workloads: list[WorkloadSummary]
    status_totals: dict[str, int]


class FieldCheck(Response):
    """A stated figure's check: the registry's derivation of the same figure (`check_formula`), its precision, and
    whether it agrees with the stated value within the digits each carries."""

    formula: str
    value: float | None
    digits: int | None = None
    agrees: bool


class FieldRow(Response):
    field: str
    description: str
    value_number: float | None
    value_text: str | None = Field(description="The digits the record holds, as the document states them.")
    unit: str | None
    direction: str | None
    status: str
    confidence: str
    formula: str | None = None
    digits: int | None = Field(
        default=None, description="Significant digits the value carries (stated, or the fewest of its inputs)."
    )
    conflict: bool = Field(default=False, description="The cited documents disagree; every claim is kept.")
    resolved_by: str | None = Field(default=None, description="`rule` (the declared conflict rule) or `take`.")
    check: FieldCheck | None = None
    shown: Shown


class ReferenceDetail(Response):
    reference: ReferenceSummary
    fields: list[FieldRow]


class Citation(Response):
    source_id: str
    title: str | None
    url: str | None = Field(description="The canonical URL; null for a design statement that has none.")
    publisher: str | None
    publisher_kind: str | None
    read_via: str | None = Field(description="How the document was read from a copy, when it was (no address).")
    published_on: str | None = Field(default=None, description="The date it was published (day, month or year).")
    claim_value_number: float | None = Field(default=None, description="What it states, in the field's unit.")
    claim_value_text: str | None = Field(default=None, description="What this document states, in its own words.")
    agrees: bool | None = Field(default=None, description="Whether it agrees with the field's value.")
    rule_id: str
    revision: int
    retrieved_at: str
    sha256: str
    verified: bool = Field(description="The snapshot's bytes re-hashed now, on this request, match `sha256`.")
    problem: str | None = Field(default=None, description="Why the hash no longer proves what it did, if it does not.")
    origin: str = Field(description="How the bytes were obtained: `retrieved` or `transcription`.")
    locator: str | None
    excerpt: str | None
    stated: str | None


class Provenance(Response):
    reference_id: str
    field: str
    value: float | str | None
    value_text: str | None = None
    unit: str | None = None
    direction: str | None = None
    status: str
    confidence: str
    formula: str | None = None
    reason: str | None = None
    evidence_needed: str | None = None
    why: str | None = None
    source_url: str | None = None
    digits: int | None = None
    conflict: bool = False
    resolved_by: str | None = None
    check: FieldCheck | None = None
    citations: list[Citation] = Field(default=[])
    inputs: list[Provenance] = Field(default=[])
    shown: Shown = Field(default={})


class CompareRow(Response):
    field: str
    a: FieldRow | None
    b: FieldRow | None
    differs: bool


class Comparison(Response):
    a: ReferenceSummary
    b: ReferenceSummary
    rows: list[CompareRow]
    differing: int


# --- a workload on the model ----------------------------------------------------------------------------------


class Knobs(Strict):
    """The explorer's controls. Unset: the workload's own value (params.yaml's `workloads.<id>`)."""

    tp: int | None = Field(default=None, ge=1, le=1024, description="Tensor-parallel degree (aggregated serving too).")
    pp: int | None = Field(default=None, ge=1, le=1024)
    dp: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    ep: int | None = Field(default=None, ge=1, le=4096)
    cp: int | None = Field(default=None, ge=1, le=1024, description="Context-parallel degree.")
    micro_batch: int | None = Field(default=None, ge=1, le=65_536)
    microbatches: int | None = Field(default=None, ge=1, le=65_536, description="Micro-batches per replica.")
    seq_len: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    prefill_tp: int | None = Field(default=None, ge=1, le=1024)
    decode_tp: int | None = Field(default=None, ge=1, le=1024)
    batch: int | None = Field(default=None, ge=1, le=65_536)
    prompt_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    output_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    requests_per_second: float | None = Field(default=None, ge=0, le=10_000_000)
    mode: Literal["aggregated", "disaggregated"] | None = None
    placement: Literal["fill-domains", "spread"] | None = None

    def overrides(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class Failure(Strict):
    """A part failed by clicking it: a link (both ends) or a node (a NIC, a switch)."""

    source: NodeId
    target: NodeId | None = Field(default=None, description="Set for a link; unset for a node.")


class EstimateRequest(Strict):
    topology: Slug
    workload: Slug
    knobs: Knobs = Knobs()
    fail: list[Failure] = Field(default=[], max_length=8)
    open: Open | None = Field(default=None, description="The drawing the link loads are summed for.")
    heat: Literal["time", "bytes"] = Field(default="time", description="What the heat map's colour encodes.")


class Lineage(Response):
    reference_id: str
    field: str
    status: str
    confidence: str
    value: float | str | None = None
    unit: str | None = None
    source: str | None = Field(default=None, description="Where a calibration number is stated (a URL).")
    note: str | None = None
    shown: Shown = Field(default={})


class HotLink(Response):
    source: str
    target: str
    network: str
    tier: str
    bytes_forward: float
    bytes_reverse: float
    shown: Shown


class PhaseRow(Response):
    phase: str
    description: str
    collective: str
    algorithm: str
    group_size: int
    concurrent_groups: int
    count: int
    bytes_per_rank: float
    bytes_on_wire_per_rank: float
    network: str
    tier: str
    effective_gbps: float | None
    bottleneck_gbps: float | None
    latency_seconds: float | None
    bandwidth_seconds: float | None
    queueing_seconds: float | None
    seconds: float | None = Field(description="One occurrence: overhead + bytes ÷ effective bandwidth + queueing.")
    total_seconds: float | None = Field(description="× count per step or request.")
    dominant: str
    confidence: str
    lineage: list[Lineage]
    hot_links: list[HotLink]
    notes: str
    unknown_reason: str | None
    shown: Shown


class ProgressGroup(Response):
    kind: str = Field(description="TP, EP, PP neighbours, DP / shard group, KV pair, client.")
    phase: str
    size: int = Field(description="Accelerators (and endpoints) that must talk for this phase to complete.")
    concurrent_groups: int
    critical: bool = Field(description="Its communication lies on the critical path of one step or request.")
    why: str


class Progress(Response):
    accelerators: int
    what: str
    domain_size: int
    domains_spanned: int
    fits_in_one_domain: bool
    groups: list[ProgressGroup]


class Fit(Response):
    memory_per_rank_bytes: float | None
    accelerator_memory_bytes: float | None
    fits: bool | None
    headroom_bytes: float | None
    verdict: str
    shown: Shown


class StepFigures(Response):
    kind: str
    rows: list[dict[str, str]] = Field(description="quantity, value, meaning: as the page prints them.")
    values: dict[str, float | None]
    missing: list[str]
    assumptions: list[str]
    calibration: list[str] = Field(description="The throughput calibration numbers the step rests on, with status.")
    accelerator_fields: list[Lineage]


class WhatIfPhase(Response):
    phase: str
    seconds_before: float | None
    seconds_after: float | None
    effective_gbps_before: float | None
    effective_gbps_after: float | None
    route_survives: bool
    shown: Shown


class WhatIf(Response):
    failed: list[str]
    route_survives: bool
    capacity_lost: list[str]
    phases: list[WhatIfPhase]
    statement: str = Field(description="What a surviving route does not establish (always present).")
    error: str | None = None


class Estimate(Response):
    topology: str
    workload: str
    title: str
    kind: str
    knobs: dict[str, Any] = Field(description="The knob values the estimate used (the workload's, then the request's).")
    accelerators: int
    phases: list[PhaseRow]
    communication_seconds: float | None
    confidence: str
    fit: Fit
    step: StepFigures
    progress: Progress
    level: str
    heat: str
    link_loads: list[LinkLoad]
    what_if: WhatIf | None
    teaching: str | None
    caveat: str
    shown: Shown


# --- sizing ---------------------------------------------------------------------------------------------------


class SizingRequest(Strict):
    """The arithmetic before any network model, with the units each input is in."""

    params: float = Field(default=70e9, gt=0, le=1e14, description="Parameters.")
    layout: Literal["mixed-adam", "mixed-adam-16", "bf16-weights", "fp8-weights", "fp32-weights", "int4-weights"] = (
        "mixed-adam"
    )
    zero: Literal[0, 1, 2, 3] = 0
    tp: int = Field(default=1, ge=1, le=1024)
    pp: int = Field(default=1, ge=1, le=1024)
    dp: int = Field(default=1, ge=1, le=MAX_DEGREE)
    layers: int = Field(default=80, ge=1, le=10_000)
    kv_heads: int = Field(default=8, ge=1, le=10_000)
    head_dim: int = Field(default=128, ge=1, le=100_000)
    kv_dtype: Dtype = "bf16"
    prompt_tokens: int = Field(default=8192, ge=0, le=MAX_TOKENS)
    output_tokens: int = Field(default=200, ge=0, le=MAX_TOKENS)
    requests_per_second: float = Field(default=100, ge=0, le=1e9)
    group_tokens_per_second: float = Field(default=1000, gt=0, le=1e12)
    group_size: int = Field(default=8, ge=1, le=MAX_DEGREE)
    headroom: float = Field(default=0.0, ge=0, le=10)


class ValidationRow(Response):
    """One published result beside the model (registry/validation/, `fabricref validate`), as shown."""

    case: str = Field(description="file#result in models/validation/.")
    label: str
    target: str
    quantity: str
    source: str
    url: str
    model: str
    published: str
    ratio: str
    tolerance: str
    verdict: Literal["in", "out", "unknown"]
    role: str
    note: str
    values: dict[str, float | None] = Field(description="model, published, ratio and tolerance as numbers.")
    unit: str


class SizingRow(Response):
    quantity: str
    value: float
    unit: str
    formula: str
    shown: str


class Sizing(Response):
    sections: dict[str, list[SizingRow]]


# --- the planner (a search run in memory: `fabricref plan train` without its Parquet file) -------------------------


class PlanRequest(Strict):
    """A training search of a workload's model on a cluster; unset: the workload's own GPUs, batch and sequence."""

    model: Slug = Field(description="A training workload id (its model).")
    cluster: Slug = Field(description="A cluster or reference id.")
    gpus: int | None = Field(default=None, ge=1, le=MAX_DEGREE)
    global_batch: int | None = Field(default=None, ge=1, le=1_048_576, description="Sequences per step.")
    seq: int | None = Field(default=None, ge=1, le=MAX_TOKENS, description="Tokens per sequence.")
    objective: Literal["step", "tokens-per-second", "gpu-hours"] = "step"
    top: int = Field(default=20, ge=1, le=100, description="Layouts ranked in the table.")
    max_layouts: int = Field(default=100_000, ge=1, le=100_000, description="Refuse a larger search.")


# A ranked layout's degrees and choices: those of plan/layout.py `Layout` but its GPUs (the request's) and v (shown
# in `schedule`: 'interleaved (v = 2)').
LayoutChoices = create_model(
    "LayoutChoices",
    __base__=Response,
    **{name: (kind, ...) for name, kind in get_type_hints(Layout).items() if name not in ("gpus", "v")},
)


class PlanLayout(LayoutChoices):
    """One ranked layout: its degrees and choices (`LayoutChoices`), what the step model says of it, and how to
    open it."""

    rank: int
    layout_id: str
    describe: str
    step_seconds: float
    routed_step_seconds: float | None
    exposed_communication_seconds: float | None
    memory_per_rank_bytes: float
    headroom_bytes: float
    fits: bool | None
    dominant: str | None
    must_talk: int
    confidence: str | None
    costing: str | None
    pareto: bool
    open_url: str | None = Field(description="The model view with this layout's knobs; none when it has CP > 1.")
    open_note: str
    shown: Shown


class PlanPage(Response):
    plan_id: str
    request: dict[str, Any]
    counts: dict[str, int]
    layouts: list[PlanLayout]
    pareto: list[PlanLayout]
    rejections: list[str]
    notes: list[str]
