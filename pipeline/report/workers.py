"""Drawings made in two processes: this one and one forked helper, both taking the next drawing from one queue.

Why: a cold report draws ~35 SVGs with matplotlib, one CPU-bound figure after another, most of the two report
stages' time; DVC runs the stages one at a time, so the machine's second core sat idle. A drawing is a pure
function of its arguments (see drawcache), so which process draws it changes no byte: each result goes to its own
slot, in the callers' order, whatever the scheduling.

How: the queue is a pipe holding every drawing's index (4 bytes each, written once before the fork; a read of 4
bytes from a pipe is atomic, so the two processes never take the same one). The helper is forked after matplotlib
and the drawing modules are imported (it shares them, importing nothing), after the registry's tables are closed
and only while this process runs no other Python thread; it keeps its drawings and sends them through a second
pipe when the queue is empty, then exits without running the parent's exit handlers. The caller does its own
work meanwhile (the pages), then draws from the same queue and collects the helper's drawings. If the helper
fails or dies, whatever it did not deliver is drawn here, so a drawing's error surfaces in this process with its
traceback. One CPU (or no fork): everything is drawn here. Each batch has its own queue and helper: the report
starts two (its reference and cluster drawings as soon as their tables are read, then the workload part's), so for
a while three processes share the two cores, and this one draws from both queues when its pages are written.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..core.processes import usable_cpus

Job = tuple[str, tuple[Any, ...]]
INDEX = struct.Struct("<I")
MAX_QUEUED = 65536 // INDEX.size  # what a pipe holds on Linux without blocking the one write


def helpers() -> int:
    """How many processes to fork beside this one: 1 with two or more usable CPUs, else 0."""
    return 1 if hasattr(os, "fork") and usable_cpus() >= 2 else 0


def _weight(job: Job) -> int:
    """A rough cost: how many items the drawing receives (a rack's thousands of parts before a chart's handful)."""
    return sum(len(a) for a in job[1] if isinstance(a, (list, tuple, dict)))


class Batch:
    """Drawings under way; `results()` returns every job's SVG in the order the jobs were given."""

    def __init__(self, jobs: Sequence[Job], draw: Callable[[str], Callable[..., bytes]], helper: bool) -> None:
        self._jobs = list(jobs)
        self._draw = draw
        self._svgs: list[bytes | None] = [None] * len(self._jobs)
        self._pid = 0
        self._queue = -1
        self._returns = -1
        # Forked only from a single-threaded process: a thread holding a lock at the fork would leave it held in
        # the helper forever (the report's file writers start after the fork; pytest-xdist workers run threads).
        if helper and 1 < len(self._jobs) <= MAX_QUEUED and threading.active_count() == 1:
            self._fork()

    def _fork(self) -> None:
        order = sorted(range(len(self._jobs)), key=lambda i: -_weight(self._jobs[i]))
        queue_r, queue_w = os.pipe()
        os.write(queue_w, b"".join(INDEX.pack(i) for i in order))
        os.close(queue_w)  # empty queue: a read returns b"" in both processes
        returns_r, returns_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the helper
            os.close(returns_r)
            drawn: dict[int, bytes] = {}
            status = 0
            try:
                self._take(queue_r, drawn)
            except BaseException:  # the parent draws what it did not get, and so reports the error
                status = 1
            try:
                with os.fdopen(returns_w, "wb") as out:
                    out.write(pickle.dumps(drawn, protocol=pickle.HIGHEST_PROTOCOL))
            finally:
                os._exit(status)
        os.close(returns_w)
        self._pid, self._queue, self._returns = pid, queue_r, returns_r

    def _take(self, queue: int, drawn: dict[int, bytes]) -> None:
        """Draw jobs from the queue into `drawn` until it is empty; a failure stops it (that job stays undrawn)."""
        while len(head := os.read(queue, INDEX.size)) == INDEX.size:
            (i,) = INDEX.unpack(head)
            name, args = self._jobs[i]
            drawn[i] = self._draw(name)(*args)

    def results(self) -> list[bytes]:
        if self._pid:
            mine: dict[int, bytes] = {}
            try:
                self._take(self._queue, mine)
            except BaseException:
                self.cancel()  # this drawing's error is the answer: the helper's work is not waited for
                raise
            os.close(self._queue)
            with os.fdopen(self._returns, "rb") as returns:
                data = returns.read()  # until the helper exits
            os.waitpid(self._pid, 0)
            self._pid = 0
            try:
                theirs = pickle.loads(data) if data else {}
            except (pickle.UnpicklingError, EOFError, ValueError):
                theirs = {}
            for i, svg in (mine | theirs).items():
                self._svgs[i] = svg
        found: list[bytes] = []
        for i, svg in enumerate(self._svgs):  # what the helper did not deliver (or no helper): drawn here
            if svg is None:
                name, args = self._jobs[i]
                svg = self._svgs[i] = self._draw(name)(*args)
            found.append(svg)
        return found

    def cancel(self) -> None:
        """End the helper, if still running, and release its pipes (the caller failed before `results`)."""
        if self._pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
            self._pid = 0
            os.close(self._queue)
            os.close(self._returns)
