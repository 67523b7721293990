"""Build networkx graphs: one building block for a reference, or a whole cluster on its fabric. Blocks are stamped
from one template (one attribute dict per link class), so a 131,072-accelerator cluster builds in seconds."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx

from ..core.graphs import EdgeAttrs
from ..errors import CompileError
from .blocks import Template, link_attrs, template
from .clusters import MAX_LINKS, MAX_NODES, Cluster
from .facts import Defaults, Fact, Facts

CAVEAT = (
    "A logical model: parts and links as the sources state them, with labelled assumptions where they do not. "
    "Nothing physical (rack positions, cable lengths, cage types) is implied."
)


def _stamp(
    g: nx.Graph, t: Template, prefix: str, block: int | None, domain: str, within: str | None, shared: _Shared
) -> None:
    """One copy of the template under `prefix`."""
    p = f"{prefix}/" if prefix else ""
    for name, attrs in t.nodes:
        a = dict(attrs)
        if "within" in a:
            a["within"] = p + a["within"]
        elif within:
            a["within"] = within
        if block is not None:
            a["block"] = block
        if a["kind"] in ("accelerator", "scale_up_switch"):
            a["domain"] = domain
        g.add_node(p + name, **a)
    _add_edges(g, [(p + a, p + b, d) for a, b, d in t.edges], shared)


class _Shared:
    """One read-only attribute dict (`EdgeAttrs`) per link class (the same items, of the same types): the
    24,576-GPU cluster's 233,792 edges share 8 dicts instead of ~150 MB of copies, and changing one raises.
    Looked up by the given dict's id first; that dict is kept alive here, so its id stays its own."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[dict[str, Any], EdgeAttrs]] = {}
        self._by_items: dict[tuple[Any, ...], EdgeAttrs] = {}

    def __call__(self, d: dict[str, Any]) -> EdgeAttrs:
        held = self._by_id.get(id(d))
        if held is None:
            items = (*d.items(), *map(type, d.values()))  # 1 == 1.0 == True, but they are not one value here
            held = self._by_id[id(d)] = (d, self._by_items.setdefault(items, EdgeAttrs(d)))
        return held[1]


def _add_edges(g: nx.Graph, edges: list[tuple[str, str, dict[str, Any]]], shared: _Shared) -> None:
    """`g.add_edges_from(edges)` with each link class's shared dict set in networkx's adjacency (its `add_edge`
    would copy one per edge); an edge added twice gets the merged attributes, as networkx merges them."""
    adj = g._adj
    for u, v, d in edges:
        if u not in adj or v not in adj:
            g.add_edge(u, v)
        old = adj[u].get(v)
        adj[u][v] = adj[v][u] = EdgeAttrs({**old, **d}) if old else shared(d)
    nx._clear_cache(g)  # as networkx does after any change (cached backend conversions)


def build_reference(facts: Facts, dflt: Defaults) -> nx.Graph:
    t = template(facts, dflt)
    g = nx.Graph(
        topology_id=facts.reference_id,
        reference=facts.reference_id,
        form_factor=facts.form_factor,
        kind=facts.kind,
        title=facts.title,
        caveat=CAVEAT,
    )
    _stamp(g, t, facts.reference_id, None, f"{facts.reference_id}/domain", None, _Shared())
    g.graph["scale_out_protocol"] = facts.text("scale_out.protocol")
    _speeds(g, t)
    return g


def _speeds(g: nx.Graph, t: Template) -> None:
    """Each NIC role's port speed and the status of the figure it rests on (an assumed one is labelled)."""
    for role, speed in (("scale_out", t.nic_speed), ("frontend", t.frontend_speed)):
        known = speed is not None and speed.known
        g.graph[f"{role}_nic_gbps"] = speed.gbps() if known else None  # type: ignore[union-attr]
        g.graph[f"{role}_nic_status"] = speed.status if known else None  # type: ignore[union-attr]


def _checker(cluster: Cluster) -> Callable[[bool, str], None]:
    """`need(condition, message)`: a CompileError naming the cluster file unless `condition` holds."""

    def need(condition: bool, message: str) -> None:
        if not condition:
            raise CompileError(f"{cluster.path or cluster.id}: {message}")

    return need


@dataclass(frozen=True)
class SwitchProduct:
    """The switch reference a cluster names: its facts keyed `<reference>:<field>`, so a link or a traffic figure
    resting on them audits back to that reference's sources."""

    reference_id: str
    ports: Fact
    port_speed: Fact
    split: int

    @property
    def radix(self) -> int:
        return int(self.ports.value) * self.split  # type: ignore[arg-type]

    @property
    def port_gbps(self) -> float:
        return self.port_speed.gbps() / self.split  # type: ignore[operator]

    def lineage(self) -> list[dict[str, Any]]:
        shown = ("value", "unit", "direction", "status", "confidence")
        return [{"field": f.key, **{k: getattr(f, k) for k in shown}} for f in (self.ports, self.port_speed)]


def switch_product(cluster: Cluster, product: Facts) -> SwitchProduct:
    """The named switch's radix and port speed, or an error naming the cluster file and the JSON path."""
    where = f"{cluster.path or cluster.id}: at $.scale_out.switch_product"
    if product.form_factor != "switch":
        raise CompileError(
            f"{where}: {product.reference_id} is a {product.form_factor}, not a switch (form_factor: switch)"
        )
    facts = []
    for key in ("switch.ports", "switch.port_speed"):
        fact = product.get(key, required=False)
        if not fact.known:
            raise CompileError(
                f"{where}: {product.reference_id}'s {key} is unknown ({fact.note or 'no source states it'}); "
                "a fabric cannot take its radix and port speed from it"
            )
        facts.append(replace(fact, key=f"{product.reference_id}:{key}", evidence_needed=""))
    if facts[0].value != int(facts[0].value) or facts[0].value < 1:  # type: ignore[operator, arg-type]
        raise CompileError(f"{where}: {product.reference_id}'s switch.ports = {facts[0].value!r} is not a port count")
    chosen = SwitchProduct(product.reference_id, facts[0], facts[1], cluster.fabric.port_split)
    declared = cluster.fabric.radix
    if declared is not None and declared != chosen.radix:
        split = f" × port split {chosen.split}" if chosen.split != 1 else ""
        raise CompileError(
            f"{cluster.path or cluster.id}: at $.scale_out.switch_radix: declares {declared}, but "
            f"{product.reference_id} has {int(facts[0].value)} ports (switch.ports, {facts[0].status}){split} = "  # type: ignore[arg-type]
            f"{chosen.radix}; drop switch_radix or make it agree"
        )
    return chosen


def build_cluster(cluster: Cluster, facts: Facts, dflt: Defaults, switch: SwitchProduct | None = None) -> nx.Graph:
    t = template(facts, dflt)
    f = cluster.fabric
    need = _checker(cluster)
    rails = len(t.scale_out_nics)
    need(rails > 0, f"building block {cluster.building_block} has no scale-out NICs")
    nodes, links = cluster.blocks * len(t.nodes), cluster.blocks * (len(t.edges) + rails)
    need(
        nodes <= MAX_NODES and links <= MAX_LINKS,
        f"at $.building_blocks: {cluster.blocks:,} blocks of {cluster.building_block} ({len(t.nodes)} nodes, "
        f"{len(t.edges) + rails} links each) make {nodes:,} nodes and {links:,} links before the fabric; expected at "
        f"most {MAX_NODES:,} nodes and {MAX_LINKS:,} links (the topology is built node by node)",
    )
    speed = t.nic_speed.gbps() if t.nic_speed else None
    need(speed is not None, "the building block's scale_out.nic.speed is unknown")
    # A named switch sets the radix and the rate of every switch-to-switch link, with its own lineage.
    trunk_gbps, trunk_fact, trunk_status = speed, t.nic_speed, None
    if switch is not None:
        need(
            speed <= switch.port_gbps + 1e-9,  # type: ignore[operator]
            f"at $.scale_out.switch_product: the building block's NICs run at {speed:g} Gb/s, faster than "
            f"{switch.reference_id}'s {switch.port_gbps:g} Gb/s ports"
            + (f" (split in {switch.split})" if switch.split != 1 else ""),
        )
        f = replace(f, radix=switch.radix)
        trunk_gbps, trunk_fact = switch.port_gbps, switch.port_speed
        trunk_status = "assumed" if switch.split != 1 else None
    endpoints = cluster.blocks * rails
    need(endpoints % f.leaf_down == 0, f"{endpoints} endpoints do not fill leaves of {f.leaf_down} down ports evenly")
    if f.rail_optimized:
        need(
            cluster.blocks % f.leaf_down == 0,
            f"rail-optimized: {cluster.blocks} blocks must be a multiple of the {f.leaf_down} leaf down ports",
        )
    leaves = endpoints // f.leaf_down
    need(leaves % f.leaves_per_pod == 0, f"{leaves} leaves do not split into pods of {f.leaves_per_pod}")
    pods = leaves // f.leaves_per_pod
    need(
        f.leaf_up % f.spines_per_pod == 0,
        f"{f.leaf_up} leaf uplinks do not split evenly over {f.spines_per_pod} spines per pod",
    )
    leaf_trunk = f.leaf_up // f.spines_per_pod
    spine_down = f.leaves_per_pod * leaf_trunk
    if f.radix:
        need(f.leaf_down + f.leaf_up <= f.radix, f"leaf uses {f.leaf_down + f.leaf_up} ports > radix {f.radix}")
    g = nx.Graph(
        topology_id=cluster.id,
        reference=cluster.building_block,
        kind=cluster.kind,
        title=cluster.title,
        form_factor="cluster",
        caveat=CAVEAT,
        scale_out_protocol=f.protocol or facts.text("scale_out.protocol"),
    )
    if f.in_network_reduction:
        # Only a declared reduction is carried: the collectives cost CollNet exactly when this is present.
        g.graph["scale_out_in_network_reduction"] = f.in_network_reduction
        g.graph["scale_out_in_network_reduction_basis"] = f.in_network_reduction_basis
    lat = dflt.latency_ns
    width = len(str(cluster.blocks - 1))
    racks = cluster.blocks_per_rack
    shared = _Shared()
    for b in range(cluster.blocks):
        within = None
        if racks:
            within = f"rack{b // racks:0{width}d}"
            if b % racks == 0:
                g.add_node(within, kind="system", role="rack", label=f"rack {b // racks}")
        _stamp(g, t, f"b{b:0{width}d}", b, f"b{b:0{width}d}", within, shared)
    nic_edge = link_attrs("scale_out", speed, t.nic_speed, lat["scale_out"], note="endpoint link")
    leaf_name = [f"leaf{i:05d}" for i in range(leaves)]
    for i, name in enumerate(leaf_name):
        g.add_node(name, kind="leaf", tier=1, pod=i // f.leaves_per_pod, label=f"leaf {i}")
    edges: list[tuple[str, str, dict[str, Any]]] = []
    for b in range(cluster.blocks):
        prefix = f"b{b:0{width}d}/"
        for r, nic in enumerate(t.scale_out_nics):
            g_index = b * rails + r
            leaf = (b // f.leaf_down) * rails + r if f.rail_optimized else g_index // f.leaf_down
            edges.append((prefix + nic, leaf_name[leaf], nic_edge))

    def trunk_of(links: int, between: str) -> dict[str, Any]:
        note = f"trunk of {links} link(s) {between}" + _split_note(switch)
        return link_attrs(
            "scale_out", trunk_gbps * links, trunk_fact, lat["scale_out"], links=links, status=trunk_status, note=note
        )

    trunk = trunk_of(leaf_trunk, "leaf → spine")
    spines = []
    for p in range(pods):
        for j in range(f.spines_per_pod):
            name = f"spine{p:03d}-{j:03d}"
            spines.append((p, j, name))
            g.add_node(name, kind="spine", tier=2, pod=p, plane=j, label=f"spine {j} of pod {p}")
            for li in range(f.leaves_per_pod):
                edges.append((leaf_name[p * f.leaves_per_pod + li], name, trunk))
    if f.tiers == 3:
        c = f.cores_per_plane
        if f.spine_up is not None:
            need(f.spine_up % c == 0, f"{f.spine_up} spine uplinks do not split over {c} cores per plane")
            links = f.spine_up // c
            core_trunk = trunk_of(links, "spine → core")
            if f.radix:
                need(
                    spine_down + f.spine_up <= f.radix, f"spine uses {spine_down + f.spine_up} ports > radix {f.radix}"
                )
                need(pods * links <= f.radix, f"core uses {pods * links} ports > radix {f.radix}")
        else:
            bw = speed * spine_down / f.spine_oversubscription / c  # type: ignore[operator]
            core_trunk = link_attrs(
                "scale_out",
                bw,
                t.nic_speed,
                lat["scale_out"],
                links=None,
                status="assumed",
                note=(
                    f"aggregation trunk carrying the published 1:{f.spine_oversubscription:g} oversubscription as "
                    "bandwidth; port counts are not published"
                ),
            )
        for j in range(f.spines_per_pod):
            for k in range(c):
                name = f"core{j:03d}-{k:03d}"
                g.add_node(name, kind="core", tier=3, plane=j, label=f"core {k} of plane {j}")
        for _pod, j, name in spines:
            for k in range(c):
                edges.append((name, f"core{j:03d}-{k:03d}", core_trunk))
    _add_edges(g, edges, shared)
    _frontend(g, cluster, t, width, lat["frontend"], shared)
    g.graph.update(pods=pods, leaves=leaves, rails=rails)
    if switch is not None:
        g.graph.update(
            switch_product=switch.reference_id,
            switch_radix=switch.radix,
            switch_port_gbps=round(switch.port_gbps, 6),
            switch_lineage=json.dumps(switch.lineage(), sort_keys=True),
        )
    # Declared by the cluster, read by the traffic stage: how switches split flows, where ranks sit by default.
    g.graph.update(ecmp_mode=f.ecmp_mode, ecmp_seed=f.ecmp_seed, placement=cluster.placement)
    _speeds(g, t)
    return g


def _split_note(switch: SwitchProduct | None) -> str:
    if switch is None:
        return ""
    if switch.split == 1:
        return f"; {switch.reference_id} ports"
    return f"; {switch.reference_id} ports, each split in {switch.split} (a design choice)"


def _frontend(g: nx.Graph, cluster: Cluster, t: Template, width: int, latency: float, shared: _Shared) -> None:
    """The frontend network: frontend NICs → frontend switches → one core."""
    if not t.frontend_nics:
        return
    speed = t.frontend_speed.gbps() if t.frontend_speed and t.frontend_speed.known else None
    per = cluster.frontend_blocks_per_switch
    switches = (cluster.blocks + per - 1) // per
    g.add_node("fe-core", kind="frontend_switch", role="core", label="frontend core")
    down = link_attrs("frontend", speed, t.frontend_speed, latency, note="frontend access link")
    for s in range(switches):
        name = f"fe{s:04d}"
        g.add_node(name, kind="frontend_switch", role="access", label=f"frontend switch {s}")
        blocks = range(s * per, min((s + 1) * per, cluster.blocks))
        up = None if speed is None else speed * len(t.frontend_nics) * len(blocks)
        uplink = link_attrs(
            "frontend",
            up,
            t.frontend_speed,
            latency,
            status="assumed",
            note="non-blocking uplink assumed; the frontend design is not sourced",
        )
        access = [(f"b{b:0{width}d}/{nic}", name, down) for b in blocks for nic in t.frontend_nics]
        _add_edges(g, [(name, "fe-core", uplink), *access], shared)
