"""Every topology's exports, as the topology stage wrote them, read back by networkx (with the pinned version's
defaults) into the graph the stage built: same nodes in the same order, same edges in `g.edges()` order, every
attribute with its column's Python type, None left out (GraphML has no null)."""

from __future__ import annotations

import gzip
import json
import random
import zlib
from typing import Any

import networkx as nx
import pytest
from conftest import CLUSTERS, SYSTEM_REFERENCES
from fabricref.estimate.routing import no_cyclic_gc
from fabricref.topology import export

# Discovered from models/: system references (servers, racks) export plain files, clusters gzip-compressed ones.
REFERENCES = SYSTEM_REFERENCES
# Reading a cluster's GraphML back through ElementTree takes seconds (the largest: ~10 CPU s). Each format is a test
# of its own, so the two read-backs of a large cluster run on both xdist workers.
FORMATS = ["json", "graphml"]
TOPOLOGIES = [
    *((r, f) for r in REFERENCES for f in FORMATS),
    *(pytest.param(c, f, marks=pytest.mark.slow) for c in CLUSTERS for f in FORMATS),
]

_TYPES = {"VARCHAR": str, "DOUBLE": float, "INTEGER": int, "BOOLEAN": bool}


def _expected(attrs: dict[str, Any], columns: list[tuple[str, str]]) -> dict[str, tuple[type, Any]]:
    types = {c: _TYPES[t] for c, t in columns}
    return {k: (types.get(k, type(v)), types.get(k, type(v))(v)) for k, v in attrs.items() if v is not None}


def _typed(attrs: dict[str, Any]) -> dict[str, tuple[type, Any]]:
    return {k: (type(v), v) for k, v in attrs.items()}


def _assert_same(built: nx.Graph, back: nx.Graph, what: str) -> None:
    assert list(back.nodes) == list(built.nodes), what
    assert list(back.edges) == list(built.edges), what
    graph = dict(back.graph)
    if what.endswith((".graphml", ".graphml.gz")):  # read_graphml records the (absent) GraphML key defaults
        assert (graph.pop("node_default"), graph.pop("edge_default")) == ({}, {}), what
    assert _typed(graph) == {k: (type(v), v) for k, v in built.graph.items() if v is not None}, what
    for n, d in built.nodes(data=True):
        assert _typed(back.nodes[n]) == _expected(d, export.NODE_COLUMNS), (what, n)
    for a, b, d in built.edges(data=True):
        assert _typed(back.edges[a, b]) == _expected(d, export.EDGE_COLUMNS), (what, a, b)


@pytest.mark.parametrize(("tid", "fmt"), TOPOLOGIES)
def test_exports_read_back_into_the_built_graph(built_registry, built_graph, tid, fmt):
    built = built_graph(tid)
    suffix = ".gz" if tid in CLUSTERS else ""
    path = built_registry.registry_dir / "topology" / f"{tid}.{fmt}{suffix}"
    if fmt == "json":
        raw = path.read_bytes()
        back = nx.node_link_graph(json.loads(gzip.decompress(raw) if suffix else raw))
    elif suffix:
        # The 24,576-GPU cluster's GraphML: ~3 million live ElementTree elements that every automatic collection
        # would walk again (13 of its 24 CPU s); the collector resumes afterwards.
        with gzip.open(path) as f, no_cyclic_gc():
            back = nx.read_graphml(f)
    else:
        back = nx.read_graphml(path)
    _assert_same(built, back, path.name)


def test_the_exports_cover_every_topology_and_nothing_else(built_registry):
    found = (built_registry.registry_dir / "topology").iterdir()
    names = {p.name for p in found if p.suffix != ".parquet" and not p.name.endswith(".parquet.sha256")}
    expected = {f"{r}.{ext}" for r in REFERENCES for ext in ("json", "graphml")}
    expected |= {f"{c}.{ext}.gz" for c in CLUSTERS for ext in ("json", "graphml")}
    assert names - {"summaries.json"} == expected


def test_text_fed_to_zlib_in_pieces_gives_gzip_compress_bytes(tmp_path):
    """The exports stream their text into one zlib stream; the file is what one-shot `gzip.compress(text,
    compresslevel=1, mtime=0)` gives, however the text is split (pieces of 1 character, uneven, non-ASCII)."""
    text = "".join(f'<edge source="b{i:05d}/gpu{i % 8}" target="leaf{i // 32}">→ ü {i * 0.1!r}\n' for i in range(20000))
    data = text.encode()
    whole = gzip.compress(data, compresslevel=1, mtime=0)
    # Split anywhere, even inside a character's UTF-8 bytes: zlib sees one byte stream.
    for pieces in ([data], [data[:1], data[1:2], data[2:]], [data[i : i + 4093] for i in range(0, len(data), 4093)]):
        path = tmp_path / "x.gz"
        export._write(path, pieces)
        assert path.read_bytes() == whole
        assert gzip.decompress(path.read_bytes()).decode() == text
    export._write(tmp_path / "x.txt", [data[:10], data[10:]])
    assert (tmp_path / "x.txt").read_text() == text
    assert zlib.decompress(whole, 31) == data


def test_insertion_order_restores_every_neighbour_order_of_random_graphs():
    """Graphs built by adding edges (self-loops included) in a random order: re-adding the edges in
    `insertion_order` gives every node its neighbours in the same order, and every edge comes once."""
    rnd = random.Random(16)
    for _ in range(300):
        n = rnd.randint(1, 10)
        g = nx.Graph(topology_id="t")
        g.add_nodes_from(range(n))
        g.add_edges_from((rnd.randrange(n), rnd.randrange(n)) for _ in range(rnd.randint(0, 25)))
        order = export.insertion_order(g)
        again = nx.Graph()
        again.add_nodes_from(g)
        again.add_edges_from((u, v) for u, v, _ in order)
        assert len(order) == g.number_of_edges()
        assert {u: list(again.adj[u]) for u in g} == {u: list(g.adj[u]) for u in g}


def test_tables_written_from_columns_are_the_bytes_rows_give(built_graph, tmp_path):
    """The stage writes its node and edge tables column by column (`write_columns`); `write_table` of the same
    rows gives the same Parquet bytes, and columns of unequal lengths are refused."""
    from fabricref.core.registry import write_columns, write_table

    columns = export.read_columns(built_graph("nvidia-dgx-h100"))
    for name, schema, order, series in (
        ("nodes", export.NODE_COLUMNS, ["topology_id", "node"], export.node_columns(columns)),
        ("edges", export.EDGE_COLUMNS, ["topology_id", "source", "target"], export.edge_columns(columns)),
    ):
        rows = list(zip(*series, strict=True))
        assert len(rows) == len(series[0]) > 0
        a = write_columns(tmp_path / "a", name, schema, order, series).read_bytes()
        b = write_table(tmp_path / "b", name, schema, order, rows).read_bytes()
        assert a == b
    nodes = export.node_columns(columns)
    with pytest.raises(ValueError, match="16 columns of lengths"):
        write_columns(tmp_path / "c", "nodes", export.NODE_COLUMNS, ["node"], [nodes[0][:1], *nodes[1:]])


def test_built_edges_of_a_link_class_share_one_read_only_dict(built_graph):
    """A link class's attributes are one read-only dict: changing them through one edge raises instead of
    silently changing every edge of the class; a copy can be changed."""
    g = built_graph("meta-style-h100-24576")
    attrs = [d for _, _, d in g.edges(data=True)]
    assert len({id(d) for d in attrs}) < 20 < len(attrs)
    a, b, d = next(iter(g.edges(data=True)))
    with pytest.raises(TypeError, match="read-only"):
        g.edges[a, b]["note"] = "changed"
    copy = dict(d)
    copy["note"] = "changed"
    assert g.edges[a, b]["note"] != "changed"


def test_pieces_laid_out_by_numpy_join_as_zip_joins_them():
    """The exports lay each row's pieces out in one object array (`_interleaved`); the text is the one joining
    the rows' tuples gives, for any widths and lengths, empty pieces and NUL bytes included (a NumPy bytes
    array would drop trailing NULs)."""
    rnd = random.Random(7)
    for _ in range(200):
        rows, width = rnd.randint(0, 12), rnd.randint(1, 5)
        cols = [
            [bytes(rnd.choice([0, 44, 65, 255]) for _ in range(rnd.randint(0, 3))) for _ in range(rows)]
            for _ in range(width)
        ]
        expected = b"".join(map(b"".join, zip(*cols, strict=True)))
        assert export._interleaved([export._objects(c) for c in cols]) == expected
