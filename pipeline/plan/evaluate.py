"""The narrow evaluation interface: (model, cluster summary, layout) → step time, memory per rank, fit, dominant
cost, exposed communication, the accelerators that must talk, confidence.

Everything here goes through the traffic library: the layout becomes a workload (`estimate/workloads.Workload`),
`estimate/decompose.decompose` says what it communicates, each collective is costed on its placed group shape
(`layout_eval.group_cost`, cached per operation, shape and size: one cost per distinct group shape and
tier), and `layout_eval.training` (the step model, `estimate/step.py`, with the schedule, uneven-stage,
recompute and context-parallel terms) gives memory and time. A `bound` is the same evaluation with no communication: the
memory and fit exactly, and a step time no communication can lower — what the search prunes on.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, NamedTuple

import numpy as np

from ..core import confidence as rule
from ..estimate.cost import Phase
from ..estimate.decompose import Communication, decompose
from ..estimate.workloads import Workload
from ..formats.workload import Inference, Training
from . import layout_eval
from .cluster import ClusterSummary, GroupKey, group_key
from .space import Layout, ModelSpec

ANALYTICAL = "analytical per-tier"
ROUTED = "routed per link"
GB = 1e9


class Bound(NamedTuple):
    """Memory and fit exactly, and the step time without any communication (a lower bound)."""

    memory_per_rank_bytes: float | None
    usable_memory_bytes: float | None
    headroom_bytes: float | None
    fits: bool | None
    step_lower_bound_seconds: float | None


class Evaluation(NamedTuple):
    """One evaluated layout (the interface the search, the store, the CLI and the explorer read)."""

    step_seconds: float | None
    compute_seconds: float | None
    bubble_seconds: float | None
    exposed_communication_seconds: float | None
    communication_seconds: float | None
    memory_per_rank_bytes: float | None
    headroom_bytes: float | None
    fits: bool | None
    dominant: str
    must_talk: int
    largest_group: int
    largest_group_domains: int
    largest_group_phase: str
    confidence: str
    costing: str
    phases: tuple[dict[str, Any], ...] = ()


Columns = dict[str, Any]  # field → one NumPy array over a batch's records (and a string field's vocabulary)
_NONE = ":none"  # a float field's rows that are None (absent when there are none)
_WORDS = ":words"  # a string field's distinct values; the field's array holds indices into them
_FLAGS = np.array([None, False, True], dtype=object)  # a bool | None field, stored as -1, 0, 1


def columns(records: list[Any], kind: type[Bound] | type[Evaluation]) -> Columns:
    """A batch of `kind` records as columns: what an engine's task returns (a few arrays, whatever the batch's
    size, so gathering a search costs the driver little more than concatenating them). `phases` is left out: the
    search never fills it."""
    out: Columns = {}
    by_field = list(zip(*records, strict=True)) or [()] * len(kind._fields)
    for name, values in zip(kind._fields, by_field, strict=True):
        form = _form(kind, name)
        if form == "float | None":
            out[name] = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
            if None in values:
                out[name + _NONE] = np.array([v is None for v in values], dtype=bool)
        elif form == "bool | None":
            out[name] = np.array([-1 if v is None else int(v) for v in values], dtype=np.int8)
        elif form == "int":
            out[name] = np.array(values, dtype=np.int64)
        elif form == "str":
            words = sorted(set(values))
            index = {w: i for i, w in enumerate(words)}
            out[name] = np.array([index[v] for v in values], dtype=np.int32)
            out[name + _WORDS] = words
        elif name == "phases":
            if any(values):
                raise ValueError("columns: phases (kept only for routed layouts) do not travel as columns")
        else:
            raise TypeError(f"columns: {kind.__name__}.{name} is {form}, which has no column form")
    return out


def _form(kind: type[Bound] | type[Evaluation], name: str) -> str:
    """A field's annotation as written ("float | None"; a NamedTuple keeps it as a forward reference)."""
    form = kind.__annotations__[name]
    return str(getattr(form, "__forward_arg__", form))


def values(parts: list[Columns], kind: type[Bound] | type[Evaluation]) -> dict[str, list[Any]]:
    """The batches `parts` (in order) as one list per field, rebuilt from their columns exactly: the same floats,
    ints, strings, None and booleans the evaluator returned (`phases` left out)."""
    out: dict[str, list[Any]] = {}
    for name in kind._fields:
        if name == "phases":
            continue
        form = _form(kind, name)
        if form == "str":
            out[name] = np.concatenate(
                [np.array(p[name + _WORDS], dtype=object)[p[name]] for p in parts] or [np.array([], dtype=object)]
            ).tolist()
            continue
        arrays = [p[name] for p in parts]
        joined = np.concatenate(arrays) if arrays else np.array([])
        if form == "bool | None":
            out[name] = _FLAGS[joined.astype(np.int64) + 1].tolist()
            continue
        out[name] = joined.tolist()
        if form == "float | None":
            none = [p.get(name + _NONE, np.zeros(len(p[name]), dtype=bool)) for p in parts]
            for i in np.flatnonzero(np.concatenate(none)).tolist() if none else []:
                out[name][i] = None
    return out


def records(parts: list[Columns], kind: type[Bound] | type[Evaluation]) -> list[Any]:
    """The records of the batches `parts` (in order), as the evaluator returned them."""
    fields = values(parts, kind)
    n = sum(len(p[kind._fields[0]]) for p in parts)
    by_field = [fields[name] if name != "phases" else itertools.repeat((), n) for name in kind._fields]
    return list(map(functools.partial(tuple.__new__, kind), zip(*by_field, strict=True)))  # kind._make


def objective_value(objective: str, step: float | None, gpus: int, tokens: float) -> float | None:
    """Lower is better for every objective: seconds per step, −tokens per second, accelerator-hours per million
    tokens (never a price)."""
    if step is None or step <= 0:
        return None
    if objective == "step":
        return step
    if objective == "tokens-per-second":
        return -tokens / step
    return gpu_hours_per_million_tokens(step, gpus, tokens)


def gpu_hours_per_million_tokens(step: float, gpus: int, tokens: float) -> float:
    return gpus * step / 3600.0 / (tokens / 1e6)


def candidate_workload(
    spec: ModelSpec,
    layout_id: str,
    cluster_id: str,
    *,
    training: Training | None = None,
    inference: Inference | None = None,
) -> Workload:
    """One candidate layout of `spec` as a workload on one cluster: training when `training` is given,
    inference otherwise."""
    return Workload(
        id=f"plan-{spec.id}",
        title=f"{spec.id} {layout_id}",
        kind="training" if training is not None else "inference",
        model=spec.shape,
        training=training,
        inference=inference,
        targets=(cluster_id,),
        shares_with=None,
        path=None,
    )


class TrainEvaluator:
    """Evaluates training layouts of one model at one sequence length and global batch on one cluster summary.
    Holds only picklable state, so the same object evaluates in a Ray worker as in-process."""

    def __init__(self, spec: ModelSpec, seq: int, global_batch: int, cluster: ClusterSummary) -> None:
        self.spec = spec
        self.seq = seq
        self.global_batch = global_batch
        self.cluster = cluster
        self._costs: dict[tuple[str, GroupKey, float, bool], Any] = {}
        self._phases: dict[tuple[int, ...], tuple[list[Phase], tuple[int, str, int, str]]] = {}
        self.tokens = float(global_batch * seq)
        self._compute_confidence = cluster.compute_confidence

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_costs": {}, "_phases": {}}

    # The layout as the step model knows it.
    def workload(self, layout: Layout) -> Workload:
        tp = layout.tp
        training = Training.model_construct(
            tp=tp,
            pp=layout.pp,
            dp=layout.dp,
            cp=layout.cp,
            ep=layout.ep,
            sharded=layout.zero == 3,
            micro_batch=layout.micro_batch,
            microbatches=layout.microbatches,
            seq_len=self.seq,
            grad_dtype=self.spec.grad_dtype,
            optimizer_layout=self.spec.optimizer_layout,
            zero=layout.zero,
            sequence_parallel=tp > 1,
            recompute=layout.recompute,
            schedule=layout.schedule,
            virtual_stages=layout.v,
        )
        return candidate_workload(self.spec, layout.id, self.cluster.id, training=training)

    def communications(self, layout: Layout, w: Workload) -> list[Communication]:
        """The layout's communications: the one decomposition's."""
        return list(decompose(w).communications)

    def group_keys(self, layout: Layout) -> tuple[set[GroupKey], set[GroupKey]]:
        """(collective groups, send pairs) this layout needs placed."""
        w = self.workload(layout)
        groups: set[GroupKey] = set()
        sends: set[GroupKey] = set()
        for c in self.communications(layout, w):
            (sends if c.collective == "send" else groups).add(group_key(c.group, layout.gpus))
        return groups, sends

    def _phase(self, c: Communication, gpus: int) -> Phase:
        key = group_key(c.group, gpus)
        ck = (c.collective, key, c.bytes_per_rank, c.concurrency > 1)
        cost = self._costs.get(ck)
        if cost is None:
            cost = self._costs[ck] = self.cluster.cost(c.collective, key, c.bytes_per_rank, c.concurrency)
        return Phase.of(c, cost)

    def _step(self, layout: Layout, w: Workload, phases: list[Any]) -> dict[str, Any]:
        c = self.cluster
        return layout_eval.training(w, phases, c.accelerator, c.rates, c.memory_headroom)

    def bound(self, layout: Layout) -> Bound:
        st = self._step(layout, self.workload(layout), [])
        fits = st["fits"]
        return Bound(
            st["memory_per_rank_bytes"],
            st["memory"]["usable_memory_bytes"],
            st["headroom_bytes"],
            fits if isinstance(fits, bool) else None,
            st["step_seconds"],
        )

    def phases(self, layout: Layout, w: Workload) -> tuple[list[Phase], tuple[int, str, int, str]]:
        """The layout's phases on the analytical per-tier costs, and its largest group (ranks, phase, domains
        spanned) with the phases' weakest confidence. Layouts that differ only in what the communication does not
        depend on (recompute, schedule, ZeRO 0-2) share one list."""
        key = phase_key(layout)
        found = self._phases.get(key)
        if found is None:
            comms = self.communications(layout, w)
            phases = [self._phase(c, layout.gpus) for c in comms]
            largest = max(comms, key=lambda c: (c.group_size, c.phase), default=None)
            if largest is None:
                info = (1, "", 1, "published")
            else:
                shape = self.cluster.shapes.get(group_key(largest.group, layout.gpus))
                domains = shape.domains if shape is not None and largest.collective != "send" else 1
                info = (largest.group_size, largest.phase, domains, rule.weakest(p.confidence for p in phases))
            found = self._phases[key] = (phases, info)
        return found

    def step_model(self, layout: Layout) -> dict[str, Any]:
        """The step model's whole result for one layout on the analytical costs (every term, the memory tensor by
        tensor, the calibration used): what a reader opens a layout to see."""
        w = self.workload(layout)
        return self._step(layout, w, self.phases(layout, w)[0])

    def evaluate(self, layout: Layout) -> Evaluation:
        w = self.workload(layout)
        phases, largest = self.phases(layout, w)
        return self.finish(layout, w, phases, largest, ANALYTICAL)

    def finish(
        self,
        layout: Layout,
        w: Workload,
        phases: list[Any],
        largest: tuple[int, str, int, str],
        costing: str,
        detail: bool = False,
    ) -> Evaluation:
        """The evaluation from costed phases (analytical here; routed per link by `route.py`); `detail` keeps each
        phase's figures and hot links (for the few layouts shown, not the thousands searched)."""
        st = self._step(layout, w, phases)
        fits = st["fits"]
        confidence = rule.weakest(
            [self._compute_confidence, *([p.confidence for p in phases] if detail else [largest[3]])]
        )
        return Evaluation(
            step_seconds=st["step_seconds"],
            compute_seconds=st["compute_seconds"],
            bubble_seconds=st["bubble_seconds"],
            exposed_communication_seconds=st["exposed_communication_seconds"],
            communication_seconds=st["communication_seconds"],
            memory_per_rank_bytes=st["memory_per_rank_bytes"],
            headroom_bytes=st["headroom_bytes"],
            fits=fits if isinstance(fits, bool) else None,
            dominant=_dominant(st, phases),
            must_talk=layout.gpus,
            largest_group=largest[0],
            largest_group_domains=largest[2],
            largest_group_phase=largest[1],
            confidence=confidence,
            costing=costing,
            phases=tuple(
                {
                    "phase": p.phase,
                    "collective": p.collective,
                    "group_size": p.group_size,
                    "tier": p.tier,
                    "algorithm": p.algorithm,
                    "seconds": p.total_seconds,
                    "hot_links": list(p.hot_links),
                }
                for p in phases
            )
            if detail
            else (),
        )


def phase_key(layout: Layout) -> tuple[Any, ...]:
    """What a layout's communication depends on: layouts equal in it share one list of costed phases (recompute,
    the schedule and ZeRO 0-2 change the step, not what is sent)."""
    return (layout.gpus, layout.tp, layout.pp, layout.dp, layout.cp, layout.ep, layout.micro_batch,
            layout.microbatches, layout.zero == 3)  # fmt: skip


def _dominant(st: dict[str, Any], phases: list[Any]) -> str:
    """The biggest term of the step: compute, the pipeline bubble, or the phase whose exposed time is largest."""
    terms: dict[str, float] = {}
    if st.get("compute_seconds") is not None:
        terms["compute"] = st["compute_seconds"]
        terms["pipeline bubble"] = st["bubble_seconds"] or 0.0
    for name, phase in (st.get("communication_by_phase") or {}).items():
        terms[f"exposed {name}"] = phase["exposed_seconds"]
    if not terms:
        return "unknown"
    return max(terms, key=lambda k: terms[k])
