"""Where the evaluations run: in this process (the default: nothing to start), or as Ray tasks.

Both engines take the same batches and return their results in batch order, so the search, its pruning and its
table are the same whichever runs them. A search's evaluator (model, cluster summary, placed group shapes, no
graph) is put in Ray's object store once; each worker process keeps the copy it fetched, with its cost caches,
for every later task of the search. A task carries its batch's layouts (small tuples) and returns its results as
columns (`evaluate.columns`: a few NumPy arrays per batch), so the driver's share of a search is pickling each
layout once and concatenating arrays, not rebuilding result objects one by one.

A local Ray instance binds to 127.0.0.1 only, with the dashboard and usage statistics off and its object store
capped, so a search (and the tests) send nothing beyond loopback. `--address HOST:PORT` joins an existing cluster
instead; its workers must have this package installed (the same version) to import the evaluation.
"""

from __future__ import annotations

import os
import pickle
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import UsageError

OBJECT_STORE_BYTES = 100 * 1024 * 1024
ENGINES = ("local", "ray")


class LocalEngine:
    name = "local"
    workers = 1

    def warm(self) -> None:
        pass

    def map(self, task: str, job: Any, batches: list[Any]) -> Iterator[Any]:
        from .search import TASKS

        for batch in batches:
            yield TASKS[task](job, batch)

    def close(self) -> None:
        pass


# The evaluator this worker process fetched, by the token the driver gave it (one search's).
_WORKER_EVALUATORS: dict[str, Any] = {}


def _run(task: str, token: str, holder: list[Any], pickled: bytes) -> tuple[Any, int, float]:
    """A Ray task: `task` over one batch of layouts (`pickled`) with the evaluator of `token` (fetched from the store
    the first time this worker sees it, and kept with its caches); with the worker's pid and the CPU seconds the
    batch took (what the driver reports as the workers' share, and what scheduling costs beside it). `holder`
    wraps the object ref so Ray does not fetch it for every task."""
    import ray

    from .search import TASKS, Job

    start = time.process_time()
    if task == "warm":
        return None, os.getpid(), 0.0
    ev = _WORKER_EVALUATORS.get(token)
    if ev is None:
        _WORKER_EVALUATORS.clear()
        ev = _WORKER_EVALUATORS[token] = ray.get(holder[0])
    layouts = pickle.loads(pickled)
    out = TASKS[task](Job(ev, layouts), np.arange(len(layouts)))
    return out, os.getpid(), time.process_time() - start


class RayEngine:
    """Ray tasks on a local instance started here (`workers` CPUs), or on the cluster at `address`."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int = 2) -> None:
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        loopback = not address or _is_loopback(address)
        if loopback:
            # Ray turns a node address of 127.0.0.1 into the host's outward-facing one (services.
            # resolve_ip_for_localhost) unless "clusters" are off, as they are on macOS and Windows: then every
            # process of the instance (GCS, raylet, workers) listens on loopback only. Read when ray is imported.
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        try:
            import ray
        except ImportError:
            raise UsageError(
                "--engine ray needs Ray: pip install -c constraints.txt -e '.[ray]' (or choose --engine local)"
            ) from None
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            if address:
                _check_address(address)
                extra: dict[str, Any] = {}
                if loopback:
                    # A cluster on this machine's loopback (its head started with
                    # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, so its raylet is at 127.0.0.1): the driver must say
                    # 127.0.0.1 too, or it waits for a raylet at the outward-facing address that never comes.
                    from ray._private import ray_constants

                    ray_constants.ENABLE_RAY_CLUSTER = False
                    extra["_node_ip_address"] = "127.0.0.1"
                ray.init(address=address, logging_level="ERROR", log_to_driver=False, **extra)
            else:
                from ray._private import ray_constants

                ray_constants.ENABLE_RAY_CLUSTER = False  # imported before this engine set the variable above
                ray.init(
                    num_cpus=workers,
                    include_dashboard=False,
                    _node_ip_address="127.0.0.1",
                    object_store_memory=OBJECT_STORE_BYTES,
                    logging_level="ERROR",
                    log_to_driver=False,
                )
            self._started = True
        self.workers = int(ray.cluster_resources().get("CPU", workers))
        self._remote = ray.remote(_run)
        self._held: tuple[Any, str, Any] | None = None  # (the job, its token, its object ref): the last search's
        self.worker_cpu: dict[int, float] = {}  # CPU seconds of evaluation per worker process, since started
        self.driver_cpu = 0.0  # CPU seconds this process spent sending batches and gathering their results

    def warm(self) -> None:
        """Start every worker process and import the evaluation in it (what a first search would otherwise pay
        inside its timing: a worker's start and imports take seconds)."""
        self._ray.get([self._remote.remote("warm", "", [None], b"") for _ in range(self.workers)])

    def map(self, task: str, job: Any, batches: list[Any]) -> Iterator[Any]:
        """Submits every batch now (the workers start while the caller goes on); the results come in order."""
        start = time.process_time()
        if self._held is None or self._held[0] is not job.ev:
            self._held = None  # the previous search's evaluator leaves the object store
            self._held = (job.ev, uuid.uuid4().hex, self._ray.put(job.ev))
        _, token, ref = self._held
        # A batch carries its own layouts: the workers start on the first batch at once, and each unpickles only
        # the layouts it evaluates. Pickled here as one bytes object: Ray would serialize a list of tuples item by
        # item (msgpack with a pickle fallback per tuple), several times slower for the driver.
        futures = [
            self._remote.remote(task, token, [ref], pickle.dumps([job.layouts[i] for i in b.tolist()], protocol=5))
            for b in batches
        ]
        self.driver_cpu += time.process_time() - start
        return self._gather(futures)

    def _gather(self, futures: list[Any]) -> Iterator[Any]:
        for future in futures:
            start = time.process_time()
            out, pid, cpu = self._ray.get(future)
            self.worker_cpu[pid] = self.worker_cpu.get(pid, 0.0) + cpu
            self.driver_cpu += time.process_time() - start
            yield out

    def close(self) -> None:
        self._held = None
        if self._started:
            self._ray.shutdown()


def _is_loopback(address: str) -> bool:
    host = address.removeprefix("ray://").rpartition(":")[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def _check_address(address: str) -> None:
    host, sep, port = address.rpartition(":")
    if address.startswith("ray://") or address == "auto":
        return
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--address {address!r}: expected HOST:PORT of a Ray cluster's head (or ray://HOST:PORT)")


def engine(name: str, address: str | None = None, workers: int = 2) -> LocalEngine | RayEngine:
    """The engine a search runs on, its options checked for the CLI and the Python API alike."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UsageError(f"--workers {workers}: expected at least 1")
    if name not in ENGINES:
        raise UsageError(f"--engine {name!r}: expected one of {', '.join(ENGINES)}")
    if address and name != "ray":
        raise UsageError("--address names a Ray cluster: use it with --engine ray")
    if name == "local":
        return LocalEngine()
    return RayEngine(address, workers)
