"""The explorer served by a real uvicorn on 127.0.0.1 (any free port) in a thread of the test process, for the API
and browser tests: the same server `fabricref explore` starts, over the session's built registry."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx


@contextmanager
def serve(root: Path | None = None, warm: bool = False, app: Any = None) -> Iterator[str]:
    """The explorer over `root` (or an application already made) at the base URL this yields while the block runs;
    stopped, and its thread joined, afterwards."""
    import uvicorn
    from fabricref.explore.app import create_app

    app = app if app is not None else create_app(root, warm=warm)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the explorer did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def client(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=120, trust_env=False)
