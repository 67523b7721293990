"""Placement: every rank of a workload on one accelerator of the installed topology, and every group checked.

Ranks are numbered with tensor parallelism innermost, then data parallel, then pipeline stages
(rank = tp + TP·(dp + DP·pp)). Where they sit is declared by the workload (`placement`) or, when it does not
say, by the cluster (`placement`, default fill-domains):

* fill-domains: scale-up domains in topology order, accelerators inside a domain by their index, so local
  index i sits beside NIC i (rail i) in every domain: rails stay aligned;
* spread: the same inside each domain, but the domains the job needs are every k-th domain of the topology
  (k = domains available ÷ domains needed), so data-parallel rings cross leaves and pods;
* explicit: ranges of ranks on consecutive accelerators in topology order from a named (or indexed) one.
 Every TP / PP / DP / EP group is built —
not one representative — and every TP group must lie inside one scale-up domain; the error names the group
and the accelerators it spans.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import networkx as nx

from ..errors import UsageError


class PlacementError(UsageError):
    """A workload cannot be laid onto the topology as declared (exit code 2: the request is wrong)."""


# The accelerators of a graph (in order, and their domains) per graph object: a traffic process asks ~20 times per
# topology (every placement, the sharing check, the failure scenarios) and each answer walked every node (~10^5 on
# a big cluster: 1.7 s of the sharing stage's CPU, half of a small workload's on the 24,576-GPU cluster). The
# traffic code never mutates a built graph; the node count is checked as a guard.
_ACCELERATORS: weakref.WeakKeyDictionary[nx.Graph, tuple[int, tuple[str, ...], Mapping[str, str]]] = (
    weakref.WeakKeyDictionary()
)


def _accelerators(g: nx.Graph) -> tuple[int, tuple[str, ...], Mapping[str, str]]:
    """(node count, `ordered_accelerators`, `accelerator_domains`) of `g`, from one walk over its nodes."""
    seen = _ACCELERATORS.get(g)
    if seen is not None and seen[0] == g.number_of_nodes():
        return seen
    by_domain: dict[str, list[tuple[int, str]]] = {}
    domain: dict[str, str] = {}
    for n, d in g._node.items():  # networkx's own dict: no view object per node
        if d.get("kind") == "accelerator":
            dom = domain[n] = d.get("domain") or n
            by_domain.setdefault(dom, []).append((int(d.get("index", 0)), n))
    order = tuple(n for members in by_domain.values() for _, n in sorted(members))
    seen = _ACCELERATORS[g] = (g.number_of_nodes(), order, MappingProxyType(domain))
    return seen


def ordered_accelerators(g: nx.Graph) -> list[str]:
    """Accelerators domain by domain (domains in topology order), each domain by accelerator index."""
    return list(_accelerators(g)[1])


def accelerator_domains(g: nx.Graph) -> Mapping[str, str]:
    """Each accelerator's scale-up domain (itself when it names none), read-only: every placement shares it."""
    return _accelerators(g)[2]


@dataclass(frozen=True)
class Groups:
    """Rank groups by kind. `expert` groups are the ranks holding the same expert (its data-parallel replicas)."""

    tp: tuple[tuple[int, ...], ...] = ()
    pp: tuple[tuple[int, ...], ...] = ()
    dp: tuple[tuple[int, ...], ...] = ()
    ep: tuple[tuple[int, ...], ...] = ()
    expert: tuple[tuple[int, ...], ...] = ()

    def items(self) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
        return [("TP", self.tp), ("PP", self.pp), ("DP", self.dp), ("EP", self.ep), ("expert-DP", self.expert)]


def training_groups(tp: int, pp: int, dp: int, ep: int = 1) -> Groups:
    """All groups of a TP × PP × DP (× EP over the TP·DP plane of each stage) layout."""

    def rank(t: int, d: int, p: int) -> int:
        return t + tp * (d + dp * p)

    tps = tuple(tuple(rank(t, d, p) for t in range(tp)) for p in range(pp) for d in range(dp))
    pps = tuple(tuple(rank(t, d, p) for p in range(pp)) for d in range(dp) for t in range(tp))
    dps = tuple(tuple(rank(t, d, p) for d in range(dp)) for p in range(pp) for t in range(tp))
    eps: tuple[tuple[int, ...], ...] = ()
    experts: tuple[tuple[int, ...], ...] = ()
    if ep > 1:
        plane = tp * dp
        # The EP group walks the TP·DP plane in rank order: flat index i = t + TP·d.
        flat = [[rank(i % tp, i // tp, p) for i in range(plane)] for p in range(pp)]
        eps = tuple(tuple(f[k : k + ep]) for f in flat for k in range(0, plane, ep))
        experts = tuple(tuple(f[k + e] for k in range(0, plane, ep)) for f in flat for e in range(ep))
    return Groups(tps, pps, dps, eps, experts)


@dataclass
class Placement:
    """Which accelerator each rank runs on, the groups, and the scale-up domain of every accelerator."""

    topology_id: str
    accelerators: list[str]
    groups: Groups
    domain: Mapping[str, str] = field(default_factory=dict)
    declared: bool = False

    def members(self, group: Sequence[int]) -> list[str]:
        return [self.accelerators[r] for r in group]

    def domains(self, group: Sequence[int]) -> list[str]:
        return [self.domain[self.accelerators[r]] for r in group]


def place(
    g: nx.Graph,
    ranks: int,
    groups: Groups,
    *,
    offset: int = 0,
    declared: Sequence[str] | None = None,
    what: str = "workload",
) -> Placement:
    """Map ranks to accelerators (declared, or domains filled in order from `offset`) and validate every group."""
    tid = g.graph.get("topology_id", "?")
    domain = accelerator_domains(g)
    if declared is not None:
        accs = list(declared)
        if len(accs) != ranks:
            raise PlacementError(f"{what}: the declared placement names {len(accs)} accelerators for {ranks} ranks")
        unknown = [a for a in accs if a not in domain]
        if unknown:
            raise PlacementError(f"{what}: declared accelerators not in topology {tid}: {', '.join(unknown[:5])}")
        seen: set[str] = set()
        again: set[str] = set()
        for a in accs:  # one pass: 131,072 ranks must not cost n² look-ups
            (again if a in seen else seen).add(a)
        twice = sorted(again)
        if twice:
            raise PlacementError(f"{what}: declared placement uses an accelerator twice: {', '.join(twice[:5])}")
    else:
        order = ordered_accelerators(g)
        if offset < 0 or offset + ranks > len(order):
            raise PlacementError(
                f"{what} needs {ranks} accelerators from index {offset}; topology {tid} has {len(order)}"
            )
        accs = order[offset : offset + ranks]
    p = Placement(tid, accs, groups, domain, declared is not None)
    validate(p, what)
    return p


def _span(p: Placement, group: Sequence[int]) -> str:
    by: dict[str, list[str]] = {}
    for r in group:
        a = p.accelerators[r]
        by.setdefault(p.domain[a], []).append(a)
    return "; ".join(f"domain {d}: {', '.join(members)}" for d, members in by.items())


def validate(p: Placement, what: str) -> None:
    """Every TP group inside one scale-up domain (tensor parallelism never crosses the scale-out fabric)."""
    for i, group in enumerate(p.groups.tp):
        if len(set(p.domains(group))) > 1:
            raise PlacementError(
                f"{what} on {p.topology_id}: TP group {i} (ranks {group[0]}–{group[-1]}) straddles "
                f"{len(set(p.domains(group)))} scale-up domains ({_span(p, group)}); tensor parallelism must stay "
                "inside one scale-up domain: choose a TP degree that divides the domain size"
            )


STRATEGIES = ("fill-domains", "spread", "explicit")


def used_ranks(w: Any) -> list[int]:
    """The ranks a workload occupies (a disaggregated service may leave a gap before its decode pool)."""
    if w.training is not None:
        t = w.training
        return list(range(t.tp * t.pp * t.dp))
    i = w.inference
    if i.mode == "aggregated":
        return list(range(i.tp))
    start = i.prefill_tp if i.decode_pool_start is None else i.decode_pool_start
    return sorted(set(range(i.prefill_tp)) | set(range(start, start + i.decode_tp)))


def strategy_of(g: nx.Graph, w: Any) -> str:
    """The workload's declared strategy, else the cluster's default, else fill-domains."""
    declared = getattr(w, "placement", None)
    if declared is not None:
        return declared.strategy
    return g.graph.get("placement") or "fill-domains"


def rank_accelerators(g: nx.Graph, w: Any, offset: int = 0) -> dict[int, str]:
    """The accelerator of every rank `w` uses, by its placement strategy (declared or the cluster's default).

    `offset` (a co-running job placed after another) moves fill-domains and spread past the first `offset`
    accelerators in topology order; explicit ranges name absolute accelerators and ignore it."""
    tid = g.graph.get("topology_id", "?")
    where = f"{w.path}" if getattr(w, "path", None) else f"workload {w.id}"
    ranks = used_ranks(w)
    span = max(ranks) + 1
    strategy = strategy_of(g, w)
    order = ordered_accelerators(g)
    declared = getattr(w, "placement", None)
    key = "$.placement" if declared is not None else f"topology {tid}'s default placement"
    if strategy == "fill-domains":
        if offset < 0 or offset + span > len(order):
            raise PlacementError(
                f"workload {w.id} needs {span} accelerators from index {offset}; topology {tid} has {len(order)}"
            )
        return {r: order[offset + r] for r in ranks}
    if strategy == "spread":
        return {r: a for r, a in zip(ranks, _spread(g, order, span, offset, f"{where}: at {key}"), strict=True)}
    if strategy != "explicit":
        raise PlacementError(f"{where}: at {key}: unknown strategy {strategy!r}; expected one of {STRATEGIES}")
    index = {a: i for i, a in enumerate(order)}
    out: dict[int, str] = {}
    range_of: dict[int, int] = {}  # rank -> the index of the range that placed it, to name colliding ranges
    for k, rng in enumerate(declared.ranges):
        at = f"{where}: at $.placement.ranges[{k}]"
        first = rng.accelerator if isinstance(rng.accelerator, int) else index.get(rng.accelerator)
        if first is None:
            raise PlacementError(f"{at}.accelerator: {rng.accelerator!r} is not an accelerator of topology {tid}")
        if first + rng.ranks > len(order):
            raise PlacementError(
                f"{at}: {rng.ranks} ranks from accelerator {first} (topology order) run past the {len(order)} "
                f"accelerators of topology {tid}"
            )
        for j in range(rng.ranks):
            out[rng.first_rank + j] = order[first + j]
            range_of[rng.first_rank + j] = k
    missing = [r for r in ranks if r not in out]
    if missing:
        raise PlacementError(f"{where}: at $.placement.ranges: ranks {_runs(missing)} are not placed")
    seen: dict[str, int] = {}
    for r in ranks:
        if out[r] in seen:
            a, b = range_of[seen[out[r]]], range_of[r]
            raise PlacementError(
                f"{where}: at $.placement.ranges[{a}] and $.placement.ranges[{b}]: ranks {seen[out[r]]} and {r} "
                f"are both on accelerator {out[r]}; expected ranges on distinct accelerators"
            )
        seen[out[r]] = r
    return {r: out[r] for r in ranks}


def _spread(g: nx.Graph, order: list[str], span: int, offset: int, where: str) -> list[str]:
    """Every k-th scale-up domain (k = domains available ÷ domains needed), each filled by accelerator index."""
    tid = g.graph.get("topology_id", "?")
    domains: list[list[str]] = []
    for a in order:
        d = g.nodes[a].get("domain") or a
        if not domains or (g.nodes[domains[-1][0]].get("domain") or domains[-1][0]) != d:
            domains.append([])
        domains[-1].append(a)
    sizes = {len(d) for d in domains}
    if len(sizes) != 1:
        raise PlacementError(f"{where}: spread needs scale-up domains of one size; topology {tid} has {sorted(sizes)}")
    size = sizes.pop()
    start = -(-offset // size)  # the first domain wholly past `offset`
    need = -(-span // size)
    available = len(domains) - start
    if need > available:
        raise PlacementError(
            f"{where}: spread needs {need} scale-up domains of {size} from domain {start}; topology {tid} has "
            f"{len(domains)}"
        )
    stride = available // need
    flat = [a for k in range(need) for a in domains[start + k * stride]]
    return flat[:span]


def _runs(ranks: list[int]) -> str:
    """1, 2, 3, 7 → '1–3, 7' (short messages for long lists)."""
    out: list[str] = []
    for r in ranks:
        if out and r == int(out[-1].split("–")[-1]) + 1:
            out[-1] = f"{out[-1].split('–')[0]}–{r}"
        else:
            out.append(str(r))
    return ", ".join(out[:6]) + (" …" if len(out) > 6 else "")


def as_dict(obj: Any) -> dict[str, Any]:
    """A workload section as a plain mapping, whether it arrives as a dict or a typed (pydantic) model."""
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        return dict(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    return dict(vars(obj))


def check_degrees(model: Any, training: Any, what: str) -> None:
    """Degrees must divide what they split: TP the hidden size and the KV heads, EP the experts. PP need not divide
    the layers: stages may be uneven (`schedule.stage_layers`), as Llama 3's 126 layers on 16 stages were."""
    model, training = as_dict(model), as_dict(training)
    tp, pp, dp, ep = training["tp"], training["pp"], training["dp"], training.get("ep") or 1
    checks = [(tp, "training.tp", model["hidden"], "model.hidden")]
    if pp > model["layers"]:
        raise PlacementError(f"{what}: at $.training.pp: {pp} stages for {model['layers']} layers")
    if model["kv_heads"] >= tp:
        checks.append((tp, "training.tp", model["kv_heads"], "model.kv_heads"))
    experts = model.get("experts")
    if ep > 1 and experts:
        checks.append((ep, "training.ep", experts["count"], "model.experts.count"))
        checks.append((ep, "training.ep", tp * dp, "training.tp × training.dp"))
    for degree, key, value, of in checks:
        if value % degree:
            raise PlacementError(f"{what}: at $.{key}: {degree} must divide {of} = {value}")


def attention_params(model: Any) -> float:
    """Parameters of the attention projections (Q and O: hidden², K and V: hidden × kv_heads × head_dim, per layer).

    An MoE workload declares its total parameters, not how they split; this is the part that every expert-parallel
    rank holds (replicated across EP), everything else is counted as expert weights — a labelled derivation."""
    model = as_dict(model)
    h, kv = model["hidden"], model["kv_heads"] * model["head_dim"]
    return float(model["layers"] * (2 * h * h + 2 * h * kv))


@dataclass(frozen=True)
class GradientShards:
    """Gradient parameters a rank holds: dense ones (split by TP·PP, replicated over DP) and expert ones
    (split by EP·PP, replicated over the ranks holding the same expert)."""

    dense_params_per_rank: float
    expert_params_per_rank: float
    formula: str

    @property
    def params_per_rank(self) -> float:
        return self.dense_params_per_rank + self.expert_params_per_rank


def gradient_shards(model: Any, training: Any) -> GradientShards:
    """Count expert weights once per EP shard: an expert lives on one rank of each EP group, not on every rank."""
    model, training = as_dict(model), as_dict(training)
    tp, pp, ep = training["tp"], training["pp"], training.get("ep") or 1
    params = float(model["params"])
    if ep <= 1 or not model.get("experts"):
        return GradientShards(params / (tp * pp), 0.0, "params / (tp · pp)")
    dense = min(params, attention_params(model))
    return GradientShards(
        dense / (tp * pp),
        (params - dense) / (ep * pp),
        "dense / (tp · pp) + (params − dense) / (ep · pp); dense = layers · (2·hidden² + 2·hidden·kv_heads·head_dim) "
        "(attention projections; embeddings and norms counted with the experts — a labelled derivation)",
    )
