"""`fabricref explore`: the local web application (pipeline/explore/) on uvicorn, on loopback by default."""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

from ..errors import UsageError
from .app import app
from .output import RootOpt, lay_of, out


@app.command("explore")
def explore(
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (default loopback; another one exposes the registry).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port (0: any free one).", min=0, max=65535)] = 8765,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the explorer in the default browser.")] = False,
    root: RootOpt = None,
) -> None:
    """Pick a reference and see its model, lay any workload onto any topology with its knobs, fail a part: in the
    browser, offline. Reads the registry (`dvc repro` builds it) and writes nothing."""
    import socket
    import webbrowser

    import uvicorn

    from ..core import deadline
    from ..explore.app import create_app

    lay = lay_of(root)
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        out.print(f"warning: listening on {host}, not loopback: anyone who can reach it can read the registry")
    allowed = ("127.0.0.1", "localhost", "::1") + (() if loopback else (host,))
    application = create_app(lay.root, allowed_hosts=allowed)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port") from None
    sock.listen(128)  # connections made as soon as the URL is printed wait in the backlog until uvicorn serves
    bound = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{bound}/"
    out.print(f"fabricref explorer at {url} (Ctrl-C stops it)")
    if open_browser:
        webbrowser.open(url)
    deadline.unbounded()  # serves until stopped: the command time limit bounds only its start
    config = uvicorn.Config(application, log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
