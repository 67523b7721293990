"""The Typer application every verb module registers on."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="fabricref: GPU-cluster network reference data, every fact traceable to the document it came from.",
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version("fabricref")
        except PackageNotFoundError:  # running from a checkout that was never installed
            text = "unknown (not installed)"
        typer.echo(f"fabricref {text}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the installed version and exit."),
    ] = False,
) -> None:
    """fabricref: GPU-cluster network reference data, every fact traceable to the document it came from."""
