"""Put on PYTHONPATH (with FABRICREF_STAGE_AUDIT set to a directory) by tests/conftest.py for the session's one cold
`dvc repro`: each stage's `python -m fabricref.…` process records every file it opens, renames or removes, and the
fabricref modules it loaded, so tests/e2e/test_stage_audit.py checks what every stage really touched on the same run the
end-to-end tests read, instead of running the whole pipeline a second time under a hook of its own.

Every other Python process (DVC itself, git hooks, anything without DVC_STAGE) is left alone."""

from __future__ import annotations

import atexit
import json
import os
import sys


def _audit(out_dir: str, stage: str) -> None:
    log: list[tuple[str, str]] = []

    def hook(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path, mode, flags = args
            writes = (
                (flags or 0) & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
                if mode is None
                else any(c in str(mode) for c in "wax+")
            )
            log.append(("write" if writes else "read", os.path.abspath(os.fsdecode(path))))
        elif event == "fabricref.read":
            log.append(("read", os.path.abspath(args[0])))
        elif event in ("os.rename", "os.replace"):
            log.append(("write", os.path.abspath(os.fsdecode(args[1]))))
        elif event == "os.remove":
            log.append(("write", os.path.abspath(os.fsdecode(args[0]))))

    def write() -> None:
        """At exit, as the stage left the tree: which logged paths are files now (a temporary file renamed into
        place is not), and what it loaded (fabricref's modules; which heavy libraries)."""
        loaded = sorted(
            m.__file__
            for n, m in list(sys.modules.items())
            if (n == "fabricref" or n.startswith("fabricref.")) and getattr(m, "__file__", None)
        )
        entries = [(kind, path, os.path.isfile(path)) for kind, path in log]
        heavy = sorted(m for m in ("matplotlib", "networkx", "scipy") if m in sys.modules)  # third-party, top level
        record = {
            "stage": stage,
            "argv": sys.orig_argv[1:],
            "pid": os.getpid(),
            "log": entries,
            "loaded": loaded,
            "heavy": heavy,
        }
        with open(os.path.join(out_dir, f"{os.getpid()}.json"), "w") as handle:
            json.dump(record, handle)

    sys.addaudithook(hook)
    atexit.register(write)


if (
    os.environ.get("FABRICREF_STAGE_AUDIT")
    and os.environ.get("DVC_STAGE")
    and sys.orig_argv[1:2] == ["-m"]
    and sys.orig_argv[2:3]
    and sys.orig_argv[2].startswith("fabricref")
):
    _audit(os.environ["FABRICREF_STAGE_AUDIT"], os.environ["DVC_STAGE"])
