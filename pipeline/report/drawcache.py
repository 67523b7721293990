"""Drawings reused across runs: an SVG is kept in `.fabricref-cache/report/` under a key of everything that shapes it.

Why: a changed workload reruns the whole `report` stage, yet only that workload's heat maps and the phase-times
chart change; redrawing the others with matplotlib was most of the stage's time. A drawing is a pure function of
its arguments, the report's code, matplotlib's version and settings, the font it measures text with and Python's
version; the key holds all of them, so any change to any of them draws afresh:

- the arguments, serialised exactly (pickled: floats to the bit, dict order and tuple / list kept, as the drawing
  sees them);
- the stage's code: a hash of every file of its import closure and its templates, as the `code` stage lists them
  (any edit there invalidates every entry);
- matplotlib's, numpy's, pyparsing's and FreeType's versions, Python's version, every matplotlib setting in
  effect (rcParams, so a `matplotlibrc` counts) and the SHA-256 of the font file the text is measured with.

Entries are stored by the project's one keyed cache (pipeline/core/keyed.py): a JSON line (the key and the SVG's
SHA-256), then the SVG, used only if it holds exactly the key asked for and the SVG still matches its digest;
anything else (stale, edited, torn) is drawn again and replaced. Entries are never required: a cold run (the
benchmark's, CI's) draws everything, and a checkout where the cache cannot be written draws everything each time.
Nothing here changes a byte of the report. Each cache names its directory (the report stage: `all`, one for
both parts) and keeps, after a run, only the entries that run used: the cache holds one report's drawings, not
every drawing ever made.

matplotlib is imported only on a miss (and, once per run, to read its settings for the key). The misses of a
call of `start` are drawn together, in this process and a forked helper (workers.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..core.keyed import KeyedCache, package_sha256, sha256_bytes, sha256_json
from ..core.paths import Layout
from . import STYLE, workers

CACHE_FORMAT = 2  # 2: the arguments keyed by their pickle (1: by canonical JSON)
PIPELINE_DIR = Path(__file__).resolve().parents[1]
ENTRY = "pipeline.report"


class _ArgumentPickler(pickle.Pickler):
    """Pickles None, bool, int, float, str, tuple, list, dict and dataclass instances holding those; anything else
    (a subclass of one of them, an object of another class) is a TypeError: not keyed, so drawn every time."""

    def reducer_override(self, obj: Any) -> Any:
        # Called for every object but the exact built-in types above (and bytes, set and frozenset: exact too, a
        # set in its iteration order, so at worst a miss); a dataclass instance is pickled as its class (by import
        # path) and its fields' values.
        if dataclasses.is_dataclass(obj):
            return NotImplemented
        raise TypeError(f"cannot key a drawing on a {type(obj).__name__}")


def argument_bytes(args: Any) -> bytes:
    """`args` as bytes that tell apart everything a drawing could tell apart (TypeError if they cannot).

    Pickle is exact where it matters: a float is its 8 IEEE bytes (one ulp moves it), 1, 1.0 and True, a tuple and
    a list, and a dict's order all pickle differently, and two equal pickles unpickle to equal values. "Fast" mode
    keeps no memo, so the bytes depend on the values alone, not on which of them are the same object. The C
    pickler does this ~30 times faster than building canonical JSON in Python (128,000 calls per stage)."""
    buffer = io.BytesIO()
    pickler = _ArgumentPickler(buffer, protocol=5)
    pickler.fast = True  # no memo: equal values, equal bytes
    pickler.dump(args)
    return buffer.getvalue()


def _environment() -> dict[str, Any]:
    """What besides the arguments shapes an SVG: the report's code, the libraries, settings and font."""
    import matplotlib
    import numpy
    import pyparsing  # matplotlib's mathtext parser (imported by matplotlib itself)
    from matplotlib import ft2font
    from matplotlib.font_manager import FontProperties, findfont

    with matplotlib.rc_context(STYLE):
        # dict's own view: the stored values, without resolving the backend (which would import pyplot).
        settings = {k: repr(v) for k, v in sorted(dict.items(matplotlib.rcParams)) if k != "backend"}
        font = Path(findfont(FontProperties(family=matplotlib.rcParams["font.family"])))
    return {
        # The stage's code as DVC sees it (registry/code/pipeline.report.txt): every file of `python -m
        # pipeline.report`'s static import closure, function-level imports included, and the templates.
        "code_sha256": package_sha256(),
        "python": list(sys.version_info[:2]),
        "matplotlib": matplotlib.__version__,
        "numpy": numpy.__version__,
        "pyparsing": pyparsing.__version__,
        # The FreeType that measures the text (bundled with matplotlib's wheels, a system one in a source build).
        "freetype": ft2font.__freetype_version__,
        "rcparams_sha256": sha256_json(settings),
        "font": {"name": font.name, "sha256": sha256_bytes(font.read_bytes())},
    }


def drawing(name: str) -> Callable[..., bytes]:
    """The drawing function "module.function", its module (and so matplotlib) imported only now."""
    module, _, function = name.partition(".")
    if module == "drawings":
        from . import drawings as found
    elif module == "heat":
        from . import heat as found
    elif module == "measured":
        from . import measured as found
    else:
        raise ValueError(f"no drawing module {module!r} in pipeline.report")
    return getattr(found, function)


class DrawingCache:
    """SVG drawings keyed by (drawing name, arguments, environment); `draw` returns the bytes either way."""

    def __init__(self, lay: Layout, part: str, environment: Callable[[], dict[str, Any]] = _environment) -> None:
        self.directory = lay.cache_dir / "report" / part
        self.store = KeyedCache(self.directory)
        self._environment = environment
        self._env_sha256: str | None = None
        self._prefetch: tuple[int, int] | None = None  # (child pid, read end of its pipe)
        self.hits = 0
        self.misses = 0

    def prefetch(self) -> None:
        """Start computing the environment's digest in a forked child while this process reads its tables: the
        environment imports matplotlib and hashes the stage's code (~0.25 s), which a run whose drawings are all
        in the cache (a changed workload's) needs for nothing else. The child is a copy of this process, so it
        computes what this one would; `key` collects it, and computes it here if the child gave nothing (failed or
        killed: an error then surfaces here). Only with a second usable CPU and no other thread running (as
        workers forks); `close` ends a child never collected."""
        if self._env_sha256 is not None or self._prefetch or not workers.helpers() or threading.active_count() != 1:
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: 64 hex digits (one atomic write), then exit without the parent's exit handlers
            status = 1
            try:
                os.close(read)
                os.write(write, sha256_json(self._environment()).encode())
                status = 0
            finally:
                os._exit(status)
        os.close(write)
        self._prefetch = (pid, read)

    def environment_sha256(self) -> str:
        """The digest of the environment (from the `prefetch` child if one was started)."""
        if self._env_sha256 is None:
            found = b""
            if self._prefetch:
                pid, read = self._prefetch
                self._prefetch = None
                with os.fdopen(read, "rb") as handle:
                    found = handle.read()
                os.waitpid(pid, 0)
            digest = found.decode("ascii", "replace")
            if len(digest) != 64 or set(digest) - set("0123456789abcdef"):
                digest = sha256_json(self._environment())
            self._env_sha256 = digest
        return self._env_sha256

    def close(self) -> None:
        """End a `prefetch` child whose digest was never asked for (the run failed first)."""
        if self._prefetch:
            pid, read = self._prefetch
            self._prefetch = None
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read)

    def key(self, name: str, args: tuple[Any, ...]) -> dict[str, Any] | None:
        """The entry's key, or None when an argument cannot be keyed exactly (then nothing is cached)."""
        try:
            arguments = sha256_bytes(argument_bytes(args))
        except (TypeError, ValueError, pickle.PicklingError):  # ValueError: a cycle (fast mode)
            return None
        return {
            "format": CACHE_FORMAT,
            "drawing": name,
            "arguments": arguments,
            "environment": self.environment_sha256(),
        }

    def draw(self, name: str, *args: Any) -> bytes:
        """The drawing `name` ("module.function" of this package) of `args`, or the stored result of the same call
        under the same environment."""
        return self.start([(name, args)]).results()[0]

    def start(self, calls: Sequence[tuple[str, tuple[Any, ...]]], helpers: int | None = None) -> Pending:
        """Look every call up and start drawing the missing ones (in a forked helper process too, see workers:
        `helpers` of them, by default one where there are two CPUs); the caller may do other work, then collect
        all SVGs, in the calls' order, with `results()`."""
        keys = [self.key(name, args) for name, args in calls]
        svgs = [None if key is None else self.store.read(key) for key in keys]
        missing = [i for i, svg in enumerate(svgs) if svg is None]
        self.hits += len(calls) - len(missing)
        self.misses += len(missing)
        jobs = [calls[i] for i in missing]
        if jobs:  # imported before any fork, so a helper shares them
            import matplotlib.backends.backend_svg  # noqa: F401 — what savefig(format="svg") loads

            for name in {name for name, _ in jobs}:
                drawing(name)
        helper = (workers.helpers() if helpers is None else helpers) > 0 and len(jobs) > 1
        return Pending(self, keys, svgs, missing, workers.Batch(jobs, drawing, helper))

    def prune(self) -> None:
        """Remove the entries this run did not use (a finished run's drawings are the ones worth keeping)."""
        self.store.prune(keep_unused=0)


class Pending:
    """Drawings looked up and under way (DrawingCache.start)."""

    def __init__(
        self,
        cache: DrawingCache,
        keys: list[dict[str, Any] | None],
        svgs: list[bytes | None],
        missing: list[int],
        batch: workers.Batch,
    ) -> None:
        self._cache, self._keys, self._svgs, self._missing, self._batch = cache, keys, svgs, missing, batch

    def results(self) -> list[bytes]:
        """Every call's SVG, in the calls' order; the ones drawn now are stored in the cache."""
        for i, svg in zip(self._missing, self._batch.results(), strict=True):
            self._svgs[i] = svg
            key = self._keys[i]
            if key is not None:
                self._cache.store.write(key, svg)
        return [svg for svg in self._svgs if svg is not None]

    def cancel(self) -> None:
        """Stop drawing what `results` was not asked for (the caller failed first); no-op after `results`."""
        self._batch.cancel()
