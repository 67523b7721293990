"""The Typer application every verb module registers on."""

from __future__ import annotations

from typing import Annotated

import click
import typer
import typer.core

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="fabricref: GPU-cluster network reference data, every fact traceable to the document it came from.",
    pretty_exceptions_enable=False,
)


_display_type_rich = typer.core.TyperOption.display_type_rich


def _flag_without_placeholder(self: typer.core.TyperOption, ctx: click.Context) -> str | None:
    """Typer 0.29 prints `<bool>` beside every flag (`--json <bool>`), which reads as if it took a value."""
    if self.is_flag and self.metavar is None:
        return None
    return _display_type_rich(self, ctx)


typer.core.TyperOption.display_type_rich = _flag_without_placeholder  # type: ignore[method-assign]


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
    time_limit: Annotated[
        str | None,
        typer.Option(
            "--time-limit",
            metavar="SECONDS",
            help="Stop the command after this many seconds from its start (default 3600; also FABRICREF_TIME_LIMIT).",
        ),
    ] = None,
) -> None:
    """fabricref: GPU-cluster network reference data, every fact traceable to the document it came from."""
    if time_limit is not None:
        from ..core import deadline

        deadline.set_limit(deadline.parse_limit(time_limit, "--time-limit"), f"--time-limit {time_limit}")
