"""The topology stage: every reference and every shipped cluster, built and tabled deterministically."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path
from typing import Any

import networkx as nx

from ..core.facts import NETWORK_PRODUCT_FORM_FACTORS, SYSTEM_FORM_FACTORS
from ..core.files import atomic_write_json
from ..core.graphs import GRAPH_COLUMNS, TOPOLOGY_TABLES
from ..core.paths import Layout
from ..core.registry import Tables, table_paths, table_writer
from ..errors import CompileError, UnknownIdError, UsageError
from . import tables
from .build import build_cluster, build_reference, switch_product
from .clusters import Cluster, cluster_paths, find_cluster, load_cluster
from .facts import BUILT_WITH, Facts, built_with, defaults, load_facts
from .summary import summarize


def topology_dir(lay: Layout):
    return lay.registry_dir / "topology"


def _params(read: Callable[[str], Facts]) -> Callable[[str], dict[str, Any]]:
    """A reference's parameters, by id (the counts a cluster model takes from them)."""
    return lambda reference_id: read(reference_id).parameters


def build(lay: Layout, topology_id: str, read: Callable[[str], Facts] | None = None) -> nx.Graph:
    """A reference's or a cluster's topology rebuilt from the registry (`read`: how facts are read)."""
    read = read or partial(load_facts, lay)
    try:
        path = find_cluster(lay, topology_id)
    except UsageError:
        path = None  # not a cluster id; named as a topology below, with the closest ids
    if path is not None:
        return _build_cluster(lay, load_cluster(path, _params(read)), path, read)
    try:
        facts = read(topology_id)
    except UnknownIdError as exc:
        # A topology is a reference or a cluster: the closest of either.
        raise UnknownIdError("topology", topology_id, exc.known + [p.stem for p in cluster_paths(lay)]) from None
    if facts.form_factor == "cluster":
        raise UsageError(
            f"{topology_id} is a cluster-level reference: its topology is the cluster model "
            f"models/clusters/{topology_id}.yaml, which does not exist"
        )
    if facts.form_factor in NETWORK_PRODUCT_FORM_FACTORS:
        raise UsageError(
            f"{topology_id} is a {facts.form_factor} (a network product): it has no accelerators, so no system "
            "topology is built for it; a cluster names a switch product under scale_out.switch_product"
        )
    return build_reference(facts, defaults(lay))


def _build_cluster(lay: Layout, cluster: Cluster, path: Path, read: Callable[[str], Facts]) -> nx.Graph:
    product = cluster.fabric.switch_product
    switch = None
    if product:
        try:
            product_facts = read(product)
        except UsageError as exc:
            raise CompileError(f"{path}: at $.scale_out.switch_product: {exc}") from None
        switch = switch_product(cluster, product_facts)
    return build_cluster(cluster, read(cluster.building_block), defaults(lay), switch)


def run(lay: Layout) -> list[dict[str, Any]]:
    """Build every topology, one alive at a time, into the tables the traffic stage and the report read, and
    summaries.json (exports are `fabricref export graph`'s, on demand)."""
    out = topology_dir(lay)
    out.mkdir(parents=True, exist_ok=True)
    read = cache(partial(load_facts, lay))  # each reference's facts read once, for all the builds below
    with Tables({"reference_models": table_paths(lay, "tables")["reference_models"]}) as t:
        references = t.rows("SELECT reference_id, form_factor FROM reference_models")
    refs = sorted(r["reference_id"] for r in references if r["form_factor"] in SYSTEM_FORM_FACTORS)
    clusters = [(p, load_cluster(p, _params(read))) for p in cluster_paths(lay)]
    endpoint = defaults(lay).latency_ns["endpoint"]
    summaries: list[tuple[str, str]] = []
    columns = {
        "topology_graphs": (GRAPH_COLUMNS, ["topology_id"]),
        "topology_nodes": (tables.NODE_COLUMNS, ["topology_id", "node"]),
        "topology_edges": (tables.EDGE_COLUMNS, ["topology_id", "source", "target"]),
        "topology_summaries": ([("topology_id", "VARCHAR"), ("summary", "VARCHAR")], ["topology_id"]),
    }
    with table_writer(out, columns) as add:  # one graph alive at a time, its rows added as it is built
        for tid, make in [(r, partial(build, lay, r, read)) for r in refs] + [
            (c.id, partial(_build_cluster, lay, c, p, read)) for p, c in clusters
        ]:
            g = make()
            add("topology_graphs", [tables.graph_row(g, endpoint)])
            add("topology_nodes", tables.node_rows(g))
            add("topology_edges", tables.edge_rows(g))
            summaries.append((tid, json.dumps(summarize(g), sort_keys=True)))
        add("topology_summaries", summaries)
    atomic_write_json(out / "summaries.json", {tid: json.loads(s) for tid, s in summaries})
    atomic_write_json(out / BUILT_WITH, built_with(lay))
    written = {f"{name}.parquet" for name in TOPOLOGY_TABLES} | {"summaries.json", BUILT_WITH}
    written |= {f"{name}.parquet.sha256" for name in TOPOLOGY_TABLES}  # each table's recorded hash
    for stale in out.iterdir():
        if stale.is_file() and stale.name not in written:
            stale.unlink()
    return [json.loads(s) for _, s in summaries]
