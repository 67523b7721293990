"""Routing flows between accelerators over the installed graph, as a sparse incidence matrix (links × flows): each
direction of an edge is a link (2·edge as the graph stores it, 2·edge + 1 reversed) with the edge's per-direction
bandwidth as capacity, and a flow's column holds the fraction of its bytes on each link.

Inside a scale-up domain a pair splits uniformly over its shortest scale-up paths. Across domains: accelerator →
its scale-out NIC → leaf → equal-cost shortest paths over the switches → leaf → NIC → accelerator, with the ECMP the
cluster declares (`scale_out.ecmp`): `uniform` splits every flow evenly at every hop (a fluid average); `hash` sends
each flow down one path chosen per hop by `ecmp_choice`, so colliding flows share a link as real switches make
them. Never over the frontend network or through CPUs. Domains wired alike share one table of local paths;
switch paths are computed per pair of leaves, vectorised per destination leaf: no Python loop per flow or link.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp

from ..errors import UsageError

GBPS_TO_BYTES = 1e9 / 8
SWITCH_KINDS = ("leaf", "spine", "core")


def flow_hash(src: Sequence[str], dst: Sequence[str], seed: int) -> np.ndarray:
    """A flow's ECMP key: BLAKE2b-64 (little-endian) of "source>destination>seed", the same on every run and platform
    (Python's hash() is salted per process)."""
    return np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(f"{a}>{b}>{seed}".encode(), digest_size=8).digest(), "little")
            for a, b in zip(src, dst, strict=True)
        ),
        dtype=np.uint64,
        count=len(src),
    )


def ecmp_choice(key: np.ndarray, hop: int, candidates: np.ndarray) -> np.ndarray:
    """Which of `candidates` next hops (in topology node order) a flow takes at switch hop `hop` (0 at the
    source leaf): splitmix64(key + hop) mod candidates — each hop its own well-mixed draw from one key."""
    with np.errstate(over="ignore"):  # arithmetic mod 2**64 is the point
        z = np.asarray(key, dtype=np.uint64) + np.uint64(hop) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z % candidates.astype(np.uint64)).astype(np.int64)


def node_domain(name: str, data: dict[str, Any]) -> str:
    """An accelerator's scale-up domain: the one its node names, else itself."""
    return data.get("domain") or name


def accelerator_domains(g: nx.Graph) -> dict[str, str]:
    """Each accelerator's scale-up domain (`node_domain`), in topology order."""
    return {n: node_domain(n, d) for n, d in g.nodes(data=True) if d.get("kind") == "accelerator"}


def ordered_accelerators(g: nx.Graph, domains: dict[str, str] | None = None) -> list[str]:
    """Accelerators domain by domain (domains in topology order), each domain by accelerator index; `domains`:
    `accelerator_domains(g)` when the caller holds it."""
    by_domain: dict[str, list[tuple[int, str]]] = {}
    nodes = g._node  # the node dict itself: a `g.nodes[n]` lookup goes through a view
    for n, dom in (accelerator_domains(g) if domains is None else domains).items():
        by_domain.setdefault(dom, []).append((int(nodes[n].get("index", 0)), n))
    return [n for members in by_domain.values() for _, n in sorted(members)]


class CannotRoute(UsageError):
    """No backend path joins two accelerators (e.g. two domains of a lone server with no fabric)."""


@cache  # once per pair of kinds: a link row asks for every link
def tier_name(kind_a: str, kind_b: str) -> str:
    """Name a link by what it joins. Plain ASCII: it is an identifier in machine output (traffic_links.tier) that a
    user types in SQL as `'NIC-leaf'`."""
    pair = tuple(sorted((kind_a, kind_b)))
    return {
        ("accelerator", "scale_up_switch"): "accelerator-scale-up switch",
        ("accelerator", "accelerator"): "accelerator-accelerator (direct)",
        ("accelerator", "nic"): "accelerator-NIC (host)",
        ("leaf", "nic"): "NIC-leaf",
        ("leaf", "spine"): "leaf-spine",
        ("core", "spine"): "spine-core",
    }.get(pair, f"{pair[0]}-{pair[1]}")


@dataclass
class Routes:
    """Flows routed: incidence (directed links × flows, fraction of each flow's bytes) and per-flow latency."""

    incidence: sp.csr_matrix
    latency_ns: np.ndarray
    hops: np.ndarray
    notes: list[str] = field(default_factory=list)


class _LocalPaths:
    """All shortest paths inside one domain's wiring, counted with matrix powers (domains are small): arc u → v lies
    on a shortest s → t path when d(s,u) + 1 + d(v,t) = d(s,t), and carries σ(s,u)·σ(v,t) / σ(s,t) of them."""

    def __init__(self, n: int, arcs: list[tuple[int, int]]) -> None:
        self.tail = np.array([u for u, _ in arcs], dtype=np.int64)
        self.head = np.array([v for _, v in arcs], dtype=np.int64)
        adj = np.zeros((n, n))
        adj[self.tail, self.head] = 1.0
        dist = np.full((n, n), np.inf)
        sigma = np.zeros((n, n))
        np.fill_diagonal(dist, 0)
        np.fill_diagonal(sigma, 1)
        walks = np.eye(n)
        for k in range(1, n):
            walks = walks @ adj
            new = (walks > 0) & np.isinf(dist)
            if not new.any():
                break
            dist[new], sigma[new] = k, walks[new]
        self.dist, self.sigma = dist, sigma

    def pair(self, s: int, t: int) -> list[tuple[int, float]]:
        d = self.dist
        if not np.isfinite(d[s, t]):
            return []
        on = d[s, self.tail] + 1 + d[self.head, t] == d[s, t]
        arcs = np.flatnonzero(on)
        share = self.sigma[s, self.tail[arcs]] * self.sigma[self.head[arcs], t] / self.sigma[s, t]
        return [(int(a), float(f)) for a, f in zip(arcs, share, strict=True)]


class Wiring:
    """The installed graph as arrays: links with capacities, accelerators with their domains, NICs and leaves. Links
    are registered as routes touch them (a job never indexes the domains it does not use), ids stable."""

    def __init__(self, g: nx.Graph) -> None:
        self.g = g
        self.ecmp = g.graph.get("ecmp_mode") or "uniform"
        self.ecmp_seed = int(g.graph.get("ecmp_seed") or 0)
        if self.ecmp not in ("uniform", "hash"):
            raise UsageError(
                f"topology {g.graph.get('topology_id')}: ecmp mode {self.ecmp!r}: expected uniform or hash"
            )
        self.topology_id = g.graph.get("topology_id", "?")
        node_data = list(g._node.items())  # the node dict itself: no view objects per node
        self.nodes = [n for n, _ in node_data]
        self.index = dict(zip(self.nodes, range(len(self.nodes)), strict=True))
        self.kind = np.array([d.get("kind", "") for _, d in node_data], dtype=object)
        self._endpoint = np.isin(self.kind, ("accelerator", "nic"))
        # Registered edges (u, v) as the integers u * len(nodes) + v, sorted, and the edge id of each.
        self._keys, self._key_edge = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self._edge_ends: list[tuple[int, int]] = []  # node indices (u, v) of each registered edge
        self.edges: list[tuple[str, str]] = []
        self.edge_data: list[dict[str, Any]] = []
        self._arrays: dict[str, np.ndarray] = {}
        self._accelerators(node_data)
        self._switches()
        self._local_cache: dict[tuple[int, int, int], list[tuple[int, float]]] = {}

    @property
    def n_links(self) -> int:
        return 2 * len(self.edges)

    def _array(self, name: str) -> np.ndarray:
        """Per-link arrays, extended for the edges registered since last built (never rebuilt whole)."""
        done = self._arrays["eu"].size if self._arrays else 0
        if done < len(self.edges):
            data = self.edge_data[done:]
            gbps = np.array([np.nan if d["bandwidth_gbps"] is None else d["bandwidth_gbps"] for d in data], float)
            eu = np.array([u for u, _ in self._edge_ends[done:]], dtype=np.int64)
            ev = np.array([v for _, v in self._edge_ends[done:]], dtype=np.int64)
            n = eu.size
            tail, head = np.empty(2 * n, dtype=np.int64), np.empty(2 * n, dtype=np.int64)
            tail[0::2], tail[1::2], head[0::2], head[1::2] = eu, ev, ev, eu
            endpoint = self._endpoint
            new = {
                "capacity": np.repeat(gbps * GBPS_TO_BYTES, 2),  # bytes/s per direction, per directed link
                "latency": np.repeat(np.array([d["latency_ns"] or 0.0 for d in data], dtype=float), 2),
                "network": np.array([d["network"] for d in data], dtype=object),
                "eu": eu,
                "ev": ev,
                "tail": tail,
                "head": head,
                # Access links touch an accelerator or a NIC: what a rank injects or receives, shared by its flows.
                "access": endpoint[tail] | endpoint[head],
            }
            if self._arrays:
                new = {k: np.concatenate([self._arrays[k], v]) for k, v in new.items()}
            self._arrays = new
        return self._arrays[name]

    # The per-link arrays (see `_array`): capacity in bytes/s per direction, latency in ns, the edge's network and
    # its end nodes (eu, ev), each directed link's tail and head, and whether it is an access link.
    capacity = property(lambda self: self._array("capacity"))
    latency = property(lambda self: self._array("latency"))
    network = property(lambda self: self._array("network"))
    eu = property(lambda self: self._array("eu"))
    ev = property(lambda self: self._array("ev"))
    tail = property(lambda self: self._array("tail"))
    head = property(lambda self: self._array("head"))
    access = property(lambda self: self._array("access"))

    def _accelerators(self, node_data: list[tuple[str, dict[str, Any]]]) -> None:
        """Accelerators with their domain (numbered by first appearance) and local index (`ordered_accelerators`)."""
        self.acc_node = np.flatnonzero(self.kind == "accelerator")  # node index of each accelerator
        acc_data = [node_data[i] for i in self.acc_node.tolist()]
        acc = [name for name, _ in acc_data]
        self.accs = acc
        self.acc_pos = dict(zip(acc, range(len(acc)), strict=True))
        n = len(acc)
        # Per topology, read by every phase's stages and by placement (the view's `domain` and `order`).
        self.domain_of = domain = {a: node_domain(a, d) for a, d in acc_data}
        number = {name: i for i, name in enumerate(dict.fromkeys(map(domain.__getitem__, acc)))}
        self.acc_domain = np.fromiter((number[domain[a]] for a in acc), dtype=np.int64, count=n)
        self.order = names = ordered_accelerators(self.g, domain)
        order = self.positions(names)  # accelerator positions domain by domain, each in local order
        sizes = np.bincount(self.acc_domain, minlength=len(number))
        starts = np.cumsum(sizes) - sizes
        self.acc_local = np.empty(n, dtype=np.int64)
        self.acc_local[order] = np.arange(n) - np.repeat(starts, sizes)
        self.domain_members: list[list[str]] = [names[a : a + b] for a, b in zip(starts, sizes, strict=True)]
        # Filled when a route first touches an accelerator (_ensure_endpoints): the node index of its NIC's leaf, and
        # the links accelerator → NIC, NIC → accelerator, NIC → leaf, leaf → NIC.
        self.acc_has_nic = np.zeros(n, dtype=bool)
        self.acc_leaf, self.acc_up, self.acc_down, self.acc_nic_up, self.acc_nic_down = np.full((5, n), -1, np.int64)
        self.domain_ready = np.zeros(len(self.domain_members), dtype=bool)
        self.endpoint_ready = np.zeros(n, dtype=bool)
        self.domain_sig = np.full(len(self.domain_members), -1, dtype=np.int64)
        self.domain_arcs: dict[int, np.ndarray] = {}
        self._domain_local: dict[int, tuple[list[str], list[tuple[int, int]]]] = {}
        self.sig_local: list[_LocalPaths] = []
        self._sig_ids: dict[Any, int] = {}
        self._sig_arcs: list[list[tuple[int, int]]] = []  # each signature's local arcs (tail, head), in table order
        self._sig_tables: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _links_between(self, tails: Sequence[int], heads: Sequence[int]) -> np.ndarray:
        """Directed link ids tails[i] → heads[i] (node indices), registering new edges in order of first use, each
        stored (u, v) with u <= v by name: edge e's link 2e runs u → v, 2e + 1 back."""
        t, h = np.asarray(tails, dtype=np.int64), np.asarray(heads, dtype=np.int64)
        rank, n = self._name_rank, len(self.nodes)
        back = rank[t] > rank[h]
        key = np.where(back, h, t) * n + np.where(back, t, h)  # the edge (u, v) as one integer
        known = np.isin(key, self._keys)
        fresh, first = np.unique(key[~known], return_index=True)
        fresh = fresh[np.argsort(first)]  # in order of first use
        start, nodes, adj = len(self.edges), self.nodes, self.g._adj
        for k in fresh.tolist():
            u, v = divmod(k, n)
            self.edges.append((nodes[u], nodes[v]))
            self.edge_data.append(adj[nodes[u]][nodes[v]])
            self._edge_ends.append((u, v))
        keys = np.concatenate([self._keys, fresh])
        edges = np.concatenate([self._key_edge, np.arange(start, start + fresh.size, dtype=np.int64)])
        order = np.argsort(keys)
        self._keys, self._key_edge = keys[order], edges[order]
        return 2 * self._key_edge[np.searchsorted(self._keys, key)] + back

    @cached_property
    def _name_rank(self) -> np.ndarray:
        """Each node's place in name order: `u <= v by name` compared as integers."""
        rank = np.empty(len(self.nodes), dtype=np.int64)
        rank[sorted(range(len(self.nodes)), key=self.nodes.__getitem__)] = np.arange(len(self.nodes))
        return rank

    @cached_property
    def _scale_out_rail(self) -> dict[str, int]:
        """Every scale-out NIC and its rail (0 when not stated), read once from the node data."""
        data = self.g._node
        nics = (self.nodes[i] for i in np.flatnonzero(self.kind == "nic").tolist())
        return {n: int(data[n].get("rail") or 0) for n in nics if data[n].get("role") == "scale_out"}

    def _ensure_endpoints(self, positions: np.ndarray) -> None:
        """Each accelerator's scale-out NIC (the lowest rail among its neighbours), its leaf, and the links between."""
        todo = np.unique(positions[~self.endpoint_ready[positions]])
        if todo.size == 0:
            return
        adj, leaf_set, accs, rail_of = self.g._adj, self._leaves, self.accs, self._scale_out_rail
        found: list[int] = []
        nics: list[str] = []
        for i in todo.tolist():
            ranked = [(rail_of[m], k, m) for k, m in enumerate(adj[accs[i]]) if m in rail_of]
            if ranked:
                found.append(i)
                nics.append(min(ranked)[2])
        if found:
            pos = np.array(found, dtype=np.int64)
            self.acc_has_nic[pos] = True
            index = self.index
            nic_at = np.fromiter(map(index.__getitem__, nics), dtype=np.int64, count=len(nics))
            up = self._links_between(self.acc_node[pos].tolist(), nic_at.tolist())
            self.acc_up[pos], self.acc_down[pos] = up, up ^ 1
            leaves = [next((m for m in adj[nic] if m in leaf_set), None) for nic in nics]
            with_leaf = [k for k, leaf in enumerate(leaves) if leaf is not None]
            if with_leaf:
                lp = pos[with_leaf]
                leaf_at = np.array([index[leaves[k]] for k in with_leaf], dtype=np.int64)
                self.acc_leaf[lp] = leaf_at
                nic_up = self._links_between(nic_at[with_leaf].tolist(), leaf_at.tolist())
                self.acc_nic_up[lp], self.acc_nic_down[lp] = nic_up, nic_up ^ 1
        self.endpoint_ready[todo] = True

    def _ensure_domains(self, domains: np.ndarray) -> None:
        """A domain's scale-up wiring (its local paths table) the first time a route needs it."""
        todo = np.unique(domains[~self.domain_ready[domains]])
        if todo.size == 0:
            return
        pairs: list[tuple[str, str]] = []
        sizes: list[int] = []
        for d in todo.tolist():
            sig = self.domain_signature(d)
            local_nodes, arcs = self._domain_local[d]
            pairs += [(local_nodes[u], local_nodes[v]) for u, v in arcs]
            sizes.append(len(arcs))
            self._sig_tables.pop(sig, None)
        # One registration for every new domain (in domain order, arcs in table order), split per domain.
        index = self.index
        links = self._links_between([index[a] for a, _ in pairs], [index[b] for _, b in pairs])
        for d, ids in zip(todo.tolist(), np.split(links, np.cumsum(sizes)[:-1]), strict=True):
            self.domain_arcs[d] = ids
        self.domain_ready[todo] = True

    def domain_signature(self, d: int) -> int:
        """A domain's wiring class (domains wired alike share one table of local paths); local order: accelerators by
        index, then switches by name."""
        if self.domain_sig[d] < 0:
            adj = self.g._adj
            members = self.domain_members[d]
            found: set[str] = set()
            for a in members:
                found.update(adj[a].keys() & self._scale_up_switches)
            local_nodes = members + sorted(found)
            pos = dict(zip(local_nodes, range(len(local_nodes)), strict=True))
            arcs = sorted(
                (k, pos[b], data["bandwidth_gbps"])
                for k, a in enumerate(local_nodes)
                for b, data in adj[a].items()
                if b in pos and data["network"] == "scale_up"
            )
            key = (len(members), len(found), tuple(arcs))
            sig = self._sig_ids.get(key)
            if sig is None:
                sig = self._sig_ids[key] = len(self.sig_local)
                self._sig_arcs.append([(u, v) for u, v, _ in arcs])
                self.sig_local.append(_LocalPaths(len(local_nodes), self._sig_arcs[sig]))
            self.domain_sig[d] = sig
            self._domain_local[d] = (local_nodes, self._sig_arcs[sig])  # the arcs are the signature's own
        return int(self.domain_sig[d])

    @cached_property
    def _leaves(self) -> set[str]:
        return {self.nodes[i] for i in np.flatnonzero(self.kind == "leaf").tolist()}

    @cached_property
    def _scale_up_switches(self) -> set[str]:
        return {self.nodes[i] for i in np.flatnonzero(self.kind == "scale_up_switch").tolist()}

    def _sig_table(self, sig: int) -> tuple[np.ndarray, np.ndarray]:
        """(row of each domain in the table or -1, table of link ids: domains of this signature × local arcs)."""
        if sig not in self._sig_tables:
            ds = np.flatnonzero((self.domain_sig == sig) & self.domain_ready)
            row = np.full(self.domain_sig.size, -1, dtype=np.int64)
            row[ds] = np.arange(ds.size)
            self._sig_tables[sig] = (row, np.stack([self.domain_arcs[int(d)] for d in ds]))
        return self._sig_tables[sig]

    def _switches(self) -> None:
        """The switch graph (leaf, spine, core over scale-out links), indexed once: it is small."""
        self.sw_nodes = np.flatnonzero(np.isin(self.kind, SWITCH_KINDS))
        self.sw_local = np.full(len(self.nodes), -1, dtype=np.int64)
        self.sw_local[self.sw_nodes] = np.arange(self.sw_nodes.size)
        tail, head = [], []
        adj, nodes = self.g._adj, self.nodes
        names = [nodes[i] for i in self.sw_nodes.tolist()]
        local = {name: k for k, name in enumerate(names)}  # plain dict look-ups, no numpy scalars per neighbour
        for k, a in enumerate(names):
            for b, data in adj[a].items():
                j = local.get(b)
                if j is not None and data["network"] == "scale_out":
                    tail.append(k)
                    head.append(j)
        self.arc_tail = np.array(tail, dtype=np.int64)
        self.arc_head = np.array(head, dtype=np.int64)
        self.arc_link = self._links_between(
            self.sw_nodes[self.arc_tail].tolist(), self.sw_nodes[self.arc_head].tolist()
        )
        k = self.sw_nodes.size
        self.sw_adj = sp.csr_matrix((np.ones(self.arc_tail.size), (self.arc_tail, self.arc_head)), shape=(k, k))

    def positions(self, accelerators: Sequence[str]) -> np.ndarray:
        try:
            return np.fromiter(map(self.acc_pos.__getitem__, accelerators), dtype=np.int64, count=len(accelerators))
        except KeyError as exc:
            raise CannotRoute(f"{exc.args[0]} is not an accelerator of topology {self.topology_id}") from None

    def _local_paths(self, sig: int, s: int, t: int) -> list[tuple[int, float]]:
        """Arc columns and fractions of a pair inside a domain: uniform over its shortest scale-up paths."""
        key = (sig, s, t)
        if key not in self._local_cache:
            self._local_cache[key] = self.sig_local[sig].pair(s, t)
        return self._local_cache[key]

    def _intra(self, src: np.ndarray, dst: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, ...]:
        """Entries (link, column, fraction) for pairs inside one domain (accelerator positions), one Python step per
        distinct (wiring, source, destination), gathered in pair, arc, flow order (so duplicates sum to the same
        bits)."""
        if src.size == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        dom = self.acc_domain[src]
        sig = self.domain_sig[dom]
        ls, lt = self.acc_local[src], self.acc_local[dst]
        keys = np.stack([sig, ls, lt], axis=1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(uniq.shape[0] + 1))
        arcs: list[int] = []
        fracs: list[float] = []
        paths = np.zeros(uniq.shape[0], dtype=np.int64)  # arcs on each pair's shortest paths
        for u, (sg, s, t) in enumerate(uniq.tolist()):
            local = self._local_paths(sg, s, t)
            if not local:
                first = order[bounds[u]]
                raise CannotRoute(
                    f"no scale-up path between {self.accs[src[first]]} and {self.accs[dst[first]]} "
                    f"on topology {self.topology_id}"
                )
            paths[u] = len(local)
            arcs += [a for a, _ in local]
            fracs += [f for _, f in local]
        flows = np.diff(bounds)  # flows of each pair
        block = paths * flows  # entries of each pair: its arcs × its flows, arc-major
        pair = np.repeat(np.arange(uniq.shape[0]), block)
        within = np.arange(pair.size) - np.repeat(np.cumsum(block) - block, block)
        arc_at = (np.cumsum(paths) - paths)[pair] + within // flows[pair]
        flow = order[bounds[:-1][pair] + within % flows[pair]]
        arc = np.asarray(arcs, dtype=np.int64)[arc_at]
        rows = np.empty(pair.size, dtype=np.int64)
        for sg in np.unique(uniq[:, 0]).tolist():
            mine = uniq[pair, 0] == sg
            row, table = self._sig_table(sg)
            rows[mine] = table[row[dom[flow[mine]]], arc[mine]]
        return rows, cols[flow], np.asarray(fracs)[arc_at]

    def _leaf_pairs(
        self, pairs: np.ndarray, keys: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """ECMP over the switches per (source leaf, destination leaf) pair: entries (link, pair, fraction). Level by
        level, every switch splits what it holds equally over its neighbours one hop closer to the destination; with
        `keys` (hash mode, one pair per flow) each pair takes the one neighbour `ecmp_choice` picks."""
        rows, cols, vals = [], [], []
        if pairs.size == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        k = self.sw_nodes.size
        s_loc, t_loc = self.sw_local[pairs[:, 0]], self.sw_local[pairs[:, 1]]
        # Hash mode: a switch's candidates in topology node order (what `ecmp_choice` indexes).
        by_node = np.lexsort((self.arc_head, self.arc_tail))
        order = np.argsort(self.arc_tail, kind="stable") if keys is None else by_node
        a_head, a_link = self.arc_head[order], self.arc_link[order]
        indptr = np.searchsorted(self.arc_tail[order], np.arange(k + 1))
        # Here, not at the top: csgraph brings scipy.sparse.linalg and scipy.linalg, and only a route between
        # leaves needs it (a job inside one scale-up domain or under one leaf never does).
        from scipy.sparse.csgraph import shortest_path

        dests = np.unique(t_loc)
        dist = np.atleast_2d(shortest_path(self.sw_adj, directed=True, unweighted=True, indices=dests))
        row = np.searchsorted(dests, t_loc)
        unreachable = ~np.isfinite(dist[row, s_loc])
        if unreachable.any():
            bad = int(np.flatnonzero(unreachable)[0])
            raise CannotRoute(
                f"no scale-out path between leaves {self.nodes[pairs[bad, 0]]} and "
                f"{self.nodes[pairs[bad, 1]]} on topology {self.topology_id}"
            )
        flat = np.where(np.isfinite(dist), dist, -10).astype(np.int32).ravel()
        row_of = row * k  # where each pair's destination row starts in the flat distances

        def distance(pair: np.ndarray, node: np.ndarray) -> np.ndarray:
            return flat[row_of[pair] + node]

        for b0 in range(0, pairs.shape[0], 512):
            batch = np.arange(b0, min(b0 + 512, pairs.shape[0]))
            target = t_loc[batch]
            e_pair = np.arange(batch.size)
            e_node = s_loc[batch]
            e_mass = np.ones(batch.size)
            e_dist = distance(batch, e_node)  # each entry's distance to its pair's destination, carried down
            hop = 0
            while e_pair.size:
                deg = indptr[e_node + 1] - indptr[e_node]
                rep = np.repeat(np.arange(e_pair.size), deg)
                offset = np.arange(rep.size) - np.repeat(np.cumsum(deg) - deg, deg)
                arc = indptr[e_node][rep] + offset
                head = a_head[arc]
                gp = batch[e_pair[rep]]
                ok = distance(gp, head) == e_dist[rep] - 1
                rep, arc, head = rep[ok], arc[ok], head[ok]
                count = np.bincount(rep, minlength=e_pair.size)
                if keys is not None:  # hash mode: the one candidate the flow's key picks at this hop
                    rank = np.arange(rep.size) - (np.cumsum(count) - count)[rep]
                    pick = rank == ecmp_choice(keys[batch[e_pair]], hop, np.maximum(count, 1))[rep]
                    rep, arc, head = rep[pick], arc[pick], head[pick]
                    count = np.ones_like(count)
                hop += 1
                share = e_mass[rep] / count[rep]
                pair = e_pair[rep]
                rows.append(a_link[arc])
                cols.append(batch[pair])
                vals.append(share)
                going = head != target[pair]
                key = pair[going] * k + head[going]
                uk, inv = np.unique(key, return_inverse=True)
                inv = inv.ravel()
                e_mass = np.bincount(inv, weights=share[going], minlength=uk.size)
                next_dist = np.empty(uk.size, dtype=e_dist.dtype)
                next_dist[inv] = e_dist[rep[going]] - 1
                e_pair, e_node, e_dist = uk // k, uk % k, next_dist
        return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)

    def route(self, src: Sequence[str] | np.ndarray, dst: Sequence[str] | np.ndarray) -> Routes:
        """Route flows src[i] → dst[i] (accelerator names or positions)."""
        s = src if isinstance(src, np.ndarray) else self.positions(src)
        t = dst if isinstance(dst, np.ndarray) else self.positions(dst)
        nf = s.size
        if np.any(s == t):
            i = int(np.flatnonzero(s == t)[0])
            raise CannotRoute(f"a flow from {self.accs[s[i]]} to itself has no path")
        notes: list[str] = []
        same = self.acc_domain[s] == self.acc_domain[t]
        parts = []
        cols = np.arange(nf)
        if same.any():
            self._ensure_domains(self.acc_domain[s[same]])
            parts.append(self._intra(s[same], t[same], cols[same]))
        cross = ~same
        if cross.any():
            cs, ct, ccols = s[cross], t[cross], cols[cross]
            self._ensure_endpoints(np.concatenate([cs, ct]))
            missing = ~self.acc_has_nic[cs] | ~self.acc_has_nic[ct]
            if missing.any():
                i = int(np.flatnonzero(missing)[0])
                a = self.accs[cs[i]] if not self.acc_has_nic[cs[i]] else self.accs[ct[i]]
                raise CannotRoute(f"accelerator {a} has no scale-out NIC on topology {self.topology_id}")
            noleaf = (self.acc_leaf[cs] < 0) | (self.acc_leaf[ct] < 0)
            if noleaf.any():
                i = int(np.flatnonzero(noleaf)[0])
                raise CannotRoute(
                    f"topology {self.topology_id} has no backend fabric between {self.accs[cs[i]]} and "
                    f"{self.accs[ct[i]]}: build a cluster to cross scale-up domains"
                )
            for links in (self.acc_up[cs], self.acc_nic_up[cs], self.acc_nic_down[ct], self.acc_down[ct]):
                parts.append((links, ccols, np.ones(ccols.size)))
            ls, lt = self.acc_leaf[cs], self.acc_leaf[ct]
            apart = ls != lt
            if apart.any() and self.ecmp == "hash":
                flows = ccols[apart]
                keys = flow_hash([self.accs[i] for i in cs[apart]], [self.accs[i] for i in ct[apart]], self.ecmp_seed)
                r, pc, v = self._leaf_pairs(np.stack([ls[apart], lt[apart]], axis=1), keys)
                parts.append((r, flows[pc], v))
                notes.append(f"ECMP by hash (seed {self.ecmp_seed}): each flow on one of its equal-cost paths")
            elif apart.any():
                leaf_pairs = np.stack([ls[apart], lt[apart]], axis=1)
                uniq, inverse = np.unique(leaf_pairs, axis=0, return_inverse=True)
                r, pc, v = self._leaf_pairs(uniq)
                pair_matrix = sp.csc_matrix((v, (r, pc)), shape=(self.n_links, uniq.shape[0]))
                pick = sp.csr_matrix(
                    (np.ones(inverse.size), (inverse.ravel(), ccols[apart])), shape=(uniq.shape[0], nf)
                )
                fab = (pair_matrix @ pick).tocoo()
                parts.append((fab.row, fab.col, fab.data))
        rows = np.concatenate([p[0] for p in parts])
        cc = np.concatenate([p[1] for p in parts])
        vv = np.concatenate([p[2] for p in parts])
        inc = sp.csr_matrix((vv, (rows, cc)), shape=(self.n_links, nf))
        inc.sum_duplicates()
        lat = np.asarray(inc.T @ self.latency).ravel()
        hops = np.asarray(inc.sum(axis=0)).ravel()
        return Routes(inc, lat, hops, notes)

    def unknown_capacity(self, inc: sp.csr_matrix) -> list[str]:
        """Links a set of flows uses whose bandwidth no source or assumption states."""
        used = np.flatnonzero(np.asarray(inc.sum(axis=1)).ravel() > 0)
        bad = used[np.isnan(self.capacity[used])]
        return [f"{self.edges[i // 2][0]}–{self.edges[i // 2][1]}" for i in bad[:5]]
