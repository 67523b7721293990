"""The topology stage: every reference and every shipped cluster, exported and tabled deterministically."""

from __future__ import annotations

import contextlib
import json
import os
import select
import struct
import sys
import threading
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import networkx as nx

from ..core.facts import NETWORK_PRODUCT_FORM_FACTORS, SYSTEM_FORM_FACTORS
from ..core.files import atomic_write_json
from ..core.graphs import GRAPH_COLUMNS
from ..core.paths import Layout
from ..core.processes import env_count, usable_cpus
from ..core.registry import write_columns, write_table, writer_connection
from ..errors import CompileError, FabricrefError, UnknownIdError, UsageError
from . import export
from .build import build_cluster, build_reference, switch_product
from .clusters import Cluster, cluster_paths, find_cluster, load_cluster
from .facts import Facts, FactsBook, defaults, load_facts
from .summary import summarize


def topology_dir(lay: Layout):
    return lay.registry_dir / "topology"


def _params(lay: Layout, read: Callable[[str], Facts] | None = None):
    def params_for(reference_id: str) -> dict[str, Any]:
        return (read or partial(load_facts, lay))(reference_id).parameters

    return params_for


def load_clusters(lay: Layout, read: Callable[[str], Facts] | None = None) -> list[Cluster]:
    return [load_cluster(p, _params(lay, read)) for p in cluster_paths(lay)]


def build(lay: Layout, topology_id: str, read: Callable[[str], Facts] | None = None) -> nx.Graph:
    """Choosing a reference or a cluster rebuilds its topology from the registry (`read`: how facts are read,
    `load_facts` unless the caller holds them all)."""
    read = read or partial(load_facts, lay)
    try:
        path = find_cluster(lay, topology_id)
    except UsageError:
        path = None  # not a cluster id; named as a topology below, with the closest ids
    if path is not None:
        return _build_cluster(lay, load_cluster(path, _params(lay, read)), path, read)
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


WORKERS_ENV = "FABRICREF_TOPOLOGY_WORKERS"


def workers(given: int | None = None) -> int:
    """Processes that write the exports: `given`, else $FABRICREF_TOPOLOGY_WORKERS, else 2 when this process
    may run on 2 CPUs or more, can fork, and runs one thread (1: everything in this process).

    One thread only by default: a fork copies the calling thread alone, and a lock another thread held (a
    test runner's, a library's) would never be released in the helper. The DVC stage's process is single-
    threaded; asking for 2 explicitly forks anyway (the tests compare both paths)."""
    if given is None:
        given = env_count(WORKERS_ENV, "a whole number of processes (1 or 2)")
    if given is None:
        one_thread = threading.active_count() == 1
        given = 2 if usable_cpus() >= 2 and hasattr(os, "fork") and one_thread else 1
    if given not in (1, 2):
        raise UsageError(f"topology workers {given}: expected 1 (this process only) or 2 (one forked helper)")
    return given


def run(lay: Layout, workers_: int | None = None) -> list[dict[str, Any]]:
    """Build every topology, then write its exports and the tables. With 2 workers the exports go to a forked
    process while this one orders and writes the tables (a 2-CPU machine does both at once); either process
    takes the next export file off a shared queue when free. Every file is written by exactly one process from
    the same columns, so the bytes do not depend on which process wrote it or when."""
    n_workers = workers(workers_)
    out = topology_dir(lay)
    out.mkdir(parents=True, exist_ok=True)
    read = FactsBook(lay)  # every reference's facts read once, for all the builds below
    refs = sorted(r for r, row in read.references.items() if row["form_factor"] in SYSTEM_FORM_FACTORS)
    clusters = [(p, load_cluster(p, _params(lay, read))) for p in cluster_paths(lay)]
    endpoint = defaults(lay).latency_ns["endpoint"]
    summaries: list[tuple[str, str]] = []
    graph_rows, tables = [], []
    # Every topology is built (and checked) before anything is written, one graph alive at a time: each is read
    # into columns (a fraction of the graph's memory), from which the tables and both exports are written. A
    # graph's summary is made once the next one is to be built (the last one's after the exports are handed on).
    pending: tuple[str, nx.Graph, export.Columns] | None = None

    def summarize_pending() -> None:
        nonlocal pending
        if pending is not None:
            tid, g, columns = pending
            pending = None
            summaries.append((tid, json.dumps(summarize(g, columns), sort_keys=True)))

    for tid, make in [(r, partial(build, lay, r, read)) for r in refs] + [
        (c.id, partial(_build_cluster, lay, c, p, read)) for p, c in clusters
    ]:
        summarize_pending()
        g = make()
        graph_rows.append(export.graph_row(g, endpoint))
        columns = export.read_columns(g)
        tables.append(columns)
        pending = (tid, g, columns)
        del g
    # Exports for networkx, Gephi and yEd: plain per reference, gzip-compressed per cluster (tens of MB). Typed
    # here, before any process writes: a bad attribute fails the stage in this process.
    jobs: list[tuple[export._Typed, str]] = []
    for columns in tables:
        t = export.typed(columns)
        jobs += [(t, name) for name in export.export_names(t, compress=columns.tid not in refs)]
    jobs.sort(key=lambda job: -len(job[0].columns.eu))  # the largest first: the two processes end together
    written = {name for _, name in jobs}
    with _ExportQueue(jobs, out, n_workers) as queue:
        summarize_pending()
        nodes, edges, presorted = export.table_columns(tables)
        del tables
        with contextlib.closing(writer_connection()) as con:  # one DuckDB for the four tables
            write_table(out, "topology_graphs", GRAPH_COLUMNS, ["topology_id"], graph_rows, con=con)
            node_keys, edge_keys = ["topology_id", "node"], ["topology_id", "source", "target"]
            write_columns(out, "topology_nodes", export.NODE_COLUMNS, node_keys, nodes, presorted, con=con)
            del nodes
            write_columns(out, "topology_edges", export.EDGE_COLUMNS, edge_keys, edges, presorted, con=con)
            del edges
            summary_columns = [("topology_id", "VARCHAR"), ("summary", "VARCHAR")]
            write_table(out, "topology_summaries", summary_columns, ["topology_id"], summaries, con=con)
        atomic_write_json(out / "summaries.json", {tid: json.loads(s) for tid, s in summaries})
        queue.work()  # the exports the helper has not taken yet
    written |= {
        "topology_graphs.parquet",
        "topology_nodes.parquet",
        "topology_edges.parquet",
        "topology_summaries.parquet",
        "summaries.json",
    }
    written |= {f"{name}.sha256" for name in written if name.endswith(".parquet")}  # each table's recorded hash
    for stale in out.iterdir():
        if stale.is_file() and stale.name not in written:
            stale.unlink()
    return [json.loads(s) for _, s in summaries]


_JOB = struct.Struct("<I")  # one job number: 4 bytes, well under PIPE_BUF, so one read takes one whole job


class _ExportQueue:
    """Export files as jobs on a pipe that both processes read; `with` forks the helper (workers=2) and, on
    leaving, waits for it and raises what it failed with.

    A pipe rather than multiprocessing: the helper is a fork that already holds every column (nothing is
    pickled), and a read of one 4-byte job from a pipe is atomic, so each job goes to exactly one process
    without a lock. The helper leaves with `os._exit`: no atexit handlers, buffers or audit records of the
    parent's run twice."""

    def __init__(self, jobs: list[tuple[export._Typed, str]], out: Path, n_workers: int) -> None:
        self.jobs, self.out, self.n_workers = jobs, out, n_workers
        self.pid = 0
        self.errors = self.read_fd = -1

    def __enter__(self) -> _ExportQueue:
        # All jobs are written before anyone reads: they must fit in the pipe at once, which POSIX promises up to
        # PIPE_BUF bytes (4096 on Linux: 1,024 jobs; the shipped models make 28). More: no helper.
        if self.n_workers > 1 and len(self.jobs) * _JOB.size <= select.PIPE_BUF:
            self.read_fd, write_fd = os.pipe()
            try:
                os.write(write_fd, b"".join(_JOB.pack(i) for i in range(len(self.jobs))))
            finally:
                os.close(write_fd)
            self.errors, errors_w = os.pipe()
            sys.stdout.flush()
            sys.stderr.flush()
            try:
                self.pid = os.fork()
            except OSError:  # no helper (out of processes or memory): this process writes every export
                os.close(self.errors)
                os.close(errors_w)
                self.pid = 0
                return self
            if self.pid == 0:  # the helper
                code = 1
                try:
                    os.close(self.errors)
                    self.work()
                    code = 0
                except FabricrefError as exc:
                    _write_all(errors_w, f"F{exc}".encode())
                except BaseException:
                    _write_all(errors_w, f"T{traceback.format_exc()}".encode())
                finally:
                    os._exit(code)
            os.close(errors_w)
        return self

    def work(self) -> None:
        """Take jobs off the pipe and write them until none is left (without a pipe: every job, here)."""
        if self.read_fd < 0:
            for t, name in self.jobs:
                export.write_export(t, self.out / name)
            return
        while record := os.read(self.read_fd, _JOB.size):
            t, name = self.jobs[_JOB.unpack(record)[0]]
            export.write_export(t, self.out / name)

    def __exit__(self, *exc: object) -> None:
        failure = ""
        try:
            if self.pid:
                with os.fdopen(self.errors, "rb") as errors:  # until the helper ends (it holds the write end)
                    failure = errors.read().decode(errors="replace")
                _, status = os.waitpid(self.pid, 0)
                if status != 0 and not failure:
                    failure = f"Tthe export helper process ended with wait status {status}"
        finally:
            if self.read_fd >= 0:
                os.close(self.read_fd)
        if failure and exc[0] is None:
            if failure.startswith("F"):
                raise FabricrefError(failure[1:])
            raise RuntimeError(f"writing the topology exports in a helper process failed:\n{failure[1:]}")


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]
