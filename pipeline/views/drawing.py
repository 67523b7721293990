"""How a topology is drawn, for the explorer and the report alike: every part and link of a system (dense links
bundled per tray), or a large cluster's tiers × pods (explore/drawing.py opens a pod or a domain); and which drawn
link each graph edge belongs to (for a workload's load per link and for failing what is clicked).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import Any

from ..core.format import format_quantity
from ..errors import InputError
from ..formats.drawing import Drawing, DrawLink, DrawNode

# Topologies with more accelerators than this are drawn tier × pod first, then one pod or one domain at a time.
DRAW_FULL_MAX_ACCELERATORS = 256
# A rack's GPU–switch links beyond this many are drawn as tray–switch bundles.
BUNDLE_SCALE_UP_ABOVE = 256
# A domain's NIC–leaf links beyond this many are drawn as tray–leaf bundles.
BUNDLE_SCALE_OUT_ABOVE = 96


class Wired:
    """What a drawing reads of a topology (the traffic library's view has the same), for the report stage."""

    def __init__(self, g: Any, summary: dict[str, Any], technology: str | None = None) -> None:
        self.g, self.summary, self.scale_up_technology = g, summary, technology
        self.reference = g.graph.get("reference")
        self.kind: dict[str, str] = {n: d.get("kind") for n, d in g.nodes(data=True)}
        self.accelerators = [n for n, k in self.kind.items() if k == "accelerator"]
        size = summary["scale_up_domain_size"]
        self.domain_size: int = size if isinstance(size, int) else min(size)


# Rows of a drawing, top first: scale-up switches above the accelerators, the scale-out fabric below the NICs.
PART_ROWS = {"scale_up_switch": 0, "accelerator": 1, "cpu": 2, "nic": 3, "frontend_nic": 4, "leaf": 5, "spine": 6}
PART_ROWS |= {"frontend_switch": 7, "core": 7}
_CONTAINERS = ("system", "tray")
# Parts whose every link stays inside their scale-up domain (GPU–switch, GPU–GPU, GPU–CPU, CPU–NIC from the NIC).
_INSIDE_DOMAINS = ("accelerator", "cpu", "scale_up_switch", "system", "tray")
_PLURAL = {"leaf": "leaves", "spine": "spines"}
FAILABLE_KINDS = ("nic", "scale_up_switch", "leaf", "spine", "core", "frontend_switch")


class Groups:
    """How one topology is drawn at each level (built once per level, then kept), and which drawn link each graph
    edge belongs to. A subclass draws more levels by extending `check_level` and `_draw`."""

    def __init__(self, view: Any) -> None:
        """`view`: the traffic library's view of the topology, or a `Wired` (the same attributes)."""
        g = view.g
        self.view, self.g = view, g
        self.topology_id: str = g.graph["topology_id"]
        self.kind: dict[str, str] = view.kind
        self.aggregated = len(view.accelerators) > DRAW_FULL_MAX_ACCELERATORS
        # Each part of a scale-up domain (GPUs, switches, CPUs, NICs, trays) by its domain; each domain by its pod.
        block_domain = {g.nodes[a].get("block"): g.nodes[a]["domain"] for a in view.accelerators}
        self.domain_of: dict[str, str] = {}
        for n, d in g.nodes(data=True):
            if "domain" in d:
                self.domain_of[n] = d["domain"]
            elif d.get("block") is not None and d["block"] in block_domain:
                self.domain_of[n] = block_domain[d["block"]]
        self.pod_of: dict[str, int] = {}
        for n, dom in self.domain_of.items():
            if self.kind[n] == "nic" and dom not in self.pod_of:
                for m in g[n]:
                    if self.kind[m] == "leaf":
                        self.pod_of[dom] = int(g.nodes[m].get("pod") or 0)
                        break
        self.domains_by_pod: dict[int, list[str]] = {}
        for dom in dict.fromkeys(g.nodes[a]["domain"] for a in view.accelerators):
            self.domains_by_pod.setdefault(self.pod_of.get(dom, 0), []).append(dom)
        self._levels: dict[str, tuple[Any, dict[tuple[str, str], tuple[str, bool]]]] = {}

    # -- levels ----------------------------------------------------------------------------------------------

    def default_level(self) -> str:
        return "aggregate" if self.aggregated else "full"

    def check_level(self, open: str | None) -> str:
        """The level `open` names (None: the default); here only the whole topology."""
        level = open or self.default_level()
        if level != self.default_level():
            raise InputError(
                f"topology {self.topology_id} is drawn {self.default_level()}; open a pod or a domain instead",
                ("query", "open"),
            )
        return level

    def level(self, open: str | None) -> tuple[Drawing, dict[tuple[str, str], tuple[str, bool]]]:
        level = self.check_level(open)
        if level not in self._levels:
            self._levels[level] = self._build(level)
        return self._levels[level]

    def drawing(self, open: str | None) -> Drawing:
        return self.level(open)[0]

    def row_of_part(self, n: str) -> int:
        kind = self.kind[n]
        if kind == "nic" and self.g.nodes[n].get("role") == "frontend":
            return PART_ROWS["frontend_nic"]
        return PART_ROWS.get(kind, 7)

    def _build(self, level: str) -> tuple[Drawing, dict[tuple[str, str], tuple[str, bool]]]:
        drawn = Drawn(self)
        bundled = self._draw(level, drawn)
        nodes = drawn.nodes
        for key, n in list(nodes.items()):
            if n.container is not None and n.container not in nodes:
                nodes[key] = n.model_copy(update={"container": None})
        bundle = self._bundles(nodes, drawn.scan) if bundled else {}
        links, edge_map = self._links(drawn.assign, drawn.scan, nodes, bundle)
        levels = [self.default_level()]
        if self.aggregated:
            levels += [f"pod:{p}" for p in sorted(self.domains_by_pod)]
        drawing = Drawing(
            topology_id=self.topology_id,
            reference=str(self.view.reference),
            title=str(self.g.graph.get("title") or self.topology_id),
            level=level,
            levels=levels,
            nodes=list(nodes.values()),
            links=links,
            counts=dict(sorted(self.view.summary["nodes_by_kind"].items())),
            caveat=str(self.g.graph.get("caveat") or ""),
        )
        return drawing, edge_map

    def _draw(self, level: str, drawn: Drawn) -> bool:
        """The nodes of `level` into `drawn`; True when its parts are drawn one by one (their dense links are then
        bundled per tray)."""
        g, kind = self.g, self.kind
        if level == "full":
            drawn.parts(g.nodes)
            return True
        # aggregate: each pod's scale-up domains, leaves and spines as three nodes, the cores and the frontend
        size = self.view.domain_size
        counts: Counter[tuple[str, int | None]] = Counter()
        for n in g.nodes:
            k = kind[n]
            if n in self.domain_of:
                drawn.assign[n] = f"pod{self.pod_of.get(self.domain_of[n], 0)}/domains"
            elif k in ("leaf", "spine"):
                p = int(g.nodes[n].get("pod") or 0)
                drawn.assign[n] = f"pod{p}/{_PLURAL[k]}"
                counts[k, p] += 1
            elif k == "core":
                drawn.assign[n] = "cores"
                counts["core", None] += 1
            elif k == "frontend_switch":
                role = "core" if g.nodes[n].get("role") == "core" else "access"
                drawn.assign[n] = f"frontend-{role}"
                counts[f"fe-{role}", None] += 1
        # Only the links that leave a scale-up domain are drawn here, and each has a NIC or a fabric switch
        # at one end: accelerators, CPUs and scale-up switches (most of a cluster's links) need no look.
        drawn.scan = [n for n in g.nodes if kind[n] not in _INSIDE_DOMAINS]
        cores = counts["core", None]
        if cores:
            drawn.aggregate("cores", "core", f"{cores:,} core switches", cores, 0)
        for p in sorted(self.domains_by_pod):
            doms = len(self.domains_by_pod[p])
            drawn.aggregate(f"pod{p}", "pod", f"pod {p}", doms, -1, opens=f"pod:{p}")
            inside = {"opens": f"pod:{p}", "container": f"pod{p}"}  # the pod's tiers open the pod, drawn in its box
            for k, row in (("spine", 1), ("leaf", 2)):
                n_k = counts[k, p]
                if n_k:
                    drawn.aggregate(f"pod{p}/{_PLURAL[k]}", k, f"{n_k:,} {_PLURAL[k]}", n_k, row, **inside)
            label = f"{doms:,} domains ({doms * size:,} acc.)"
            drawn.aggregate(f"pod{p}/domains", "domain", label, doms, 3, **inside)
        for role, row in (("access", 4), ("core", 5)):
            c = counts[f"fe-{role}", None]
            if c:
                drawn.aggregate(f"frontend-{role}", "frontend_switch", f"frontend {role} ({c:,})", c, row)
        return False

    def _bundles(self, nodes: dict[str, Any], scan: list[str]) -> dict[str, dict[str, str]]:
        """Per network whose links are too dense to draw one by one, a part → the tray it is drawn from (an NVL72's
        648 GPU–switch links become 162 tray–switch bundles)."""
        g = self.g
        out: dict[str, dict[str, str]] = {}
        for network, kind, above in (
            ("scale_up", "accelerator", BUNDLE_SCALE_UP_ABOVE),
            ("scale_out", "nic", BUNDLE_SCALE_OUT_ABOVE),
        ):
            parts = [u for u in scan if self.kind[u] == kind and nodes[u].container in nodes]
            links = sum(1 for u in parts for d in g[u].values() if d["network"] == network)
            if links > above:
                out[network] = {u: nodes[u].container for u in parts}
        return out

    def _links(
        self,
        assign: dict[str, str],
        scan: list[str],
        nodes: dict[str, Any],
        bundle: dict[str, dict[str, str]] | None = None,
    ) -> tuple[list[Any], dict[tuple[str, str], tuple[str, bool]]]:
        """Graph edges between drawn nodes, one line per (pair of drawn nodes, network): summed rates, counts.
        `bundle`: per network, drawn nodes whose links are drawn from another (an accelerator's from its tray)."""
        from ..core import confidence

        g = self.g
        acc: dict[tuple[str, str, str], dict[str, Any]] = {}
        edge_map: dict[tuple[str, str], tuple[str, bool]] = {}
        for u in scan:
            au = assign.get(u)
            if au is None:
                continue
            for v, d in g[u].items():
                bv = assign.get(v)
                if bv is None or au == bv:
                    continue
                e = (u, v) if u <= v else (v, u)
                if e in edge_map:  # seen from its other end
                    continue
                a, b = au, bv
                trays = bundle.get(d["network"]) if bundle else None
                if trays:
                    a, b = trays.get(u, a), trays.get(v, b)
                x, y = (a, b) if a <= b else (b, a)
                key = (x, y, d["network"])
                row = acc.get(key)
                if row is None:
                    row = acc[key] = {"gbps": 0.0, "unknown": False, "links": 0, "members": 0, "fields": {}, "conf": []}
                if d.get("bandwidth_gbps") is None:
                    row["unknown"] = True
                else:
                    row["gbps"] += d["bandwidth_gbps"]
                row["links"] += int(d.get("links") or 1)
                row["members"] += 1
                row["fields"][(d.get("field"), d.get("status"))] = None
                row["conf"].append(d.get("confidence") or "unknown")
                # The drawn link and whether the edge runs against it (its first end on the link's second end).
                first = a if e[0] == u else b
                edge_map[e] = (f"{x}|{y}|{d['network']}", first != x)
        out = []
        for (x, y, network), row in acc.items():
            fields = list(row["fields"])
            field, status = fields[0] if len(fields) == 1 else ("several fields", "mixed")
            gbps = None if row["unknown"] else row["gbps"]
            single = row["members"] == 1
            rate = format_quantity(gbps, "Gb/s", "per_direction") if gbps is not None else "unknown"
            out.append(
                DrawLink(
                    id=f"{x}|{y}|{network}",
                    source=x,
                    target=y,
                    network=network,
                    technology=self.view.scale_up_technology if network == "scale_up" else None,
                    gbps=gbps,
                    links=row["links"],
                    members=row["members"],
                    field=field,
                    status=status,
                    confidence=confidence.weakest(row["conf"]),
                    failable=single and x in nodes and y in nodes and nodes[x].count == 1 and nodes[y].count == 1,
                    shown={
                        "rate": rate,
                        "links": f"{row['links']:,} link{'s' if row['links'] != 1 else ''}"
                        + ("" if single else f" in {row['members']:,} connections"),
                        "network": network.replace("_", "-"),
                        "field": str(field),
                        "status": str(status),
                    },
                )
            )
        return out, edge_map


class Drawn:
    """One drawing as it is built: its nodes, the drawn node of each graph node, and the graph nodes whose edges
    are looked at (a level draws only the links that leave what it aggregates)."""

    def __init__(self, groups: Groups) -> None:
        self.groups = groups
        self.nodes: dict[str, DrawNode] = {}
        self.assign: dict[str, str] = {}  # graph node → drawn node
        self.scan: list[str] = []

    def part(self, n: str, container: str | None = None, failable: bool | None = None, row: int | None = None) -> None:
        """A part drawn as itself (in its tray or system and on its kind's row, unless told otherwise)."""
        kind = self.groups.kind[n]
        self.nodes[n] = self._node(
            n,
            container=container,
            row=self.groups.row_of_part(n) if row is None else row,
            failable=kind in FAILABLE_KINDS if failable is None else failable,
        )
        self.assign[n] = n
        self.scan.append(n)

    def box(self, n: str) -> None:
        """A tray or a system, drawn around the parts inside it."""
        self.nodes[n] = self._node(n, row=-1)

    def _node(self, n: str, container: str | None = None, **kw: Any) -> DrawNode:
        g, d = self.groups.g, self.groups.g.nodes[n]
        return DrawNode(
            id=n,
            kind=self.groups.kind[n],
            role=d.get("role"),
            label=str(d.get("label") or n),
            container=container if container is not None else _container(g, n),
            order=len(self.nodes),
            **kw,
        )

    def parts(self, ns: Collection[str]) -> None:
        """Parts as themselves, in their boxes (which come first)."""
        for n in ns:
            if self.groups.kind[n] in _CONTAINERS:
                self.box(n)
        for n in ns:
            if self.groups.kind[n] not in _CONTAINERS:
                self.part(n)

    def aggregate(
        self, key: str, k: str, label: str, count: int, row: int, opens: str | None = None, **kw: Any
    ) -> None:
        """A node standing for `count` parts (a tier of a pod, a pod's domains)."""
        self.nodes[key] = DrawNode(
            id=key, kind=k, label=label, count=count, aggregate=True, row=row, order=len(self.nodes), opens=opens, **kw
        )


def _container(g: Any, n: str) -> str | None:
    within = g.nodes[n].get("within")
    if within is not None and g.nodes.get(within, {}).get("kind") in _CONTAINERS:
        return str(within)
    return None
