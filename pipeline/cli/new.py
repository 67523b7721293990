"""Authoring verbs: `fabricref new reference` starts a model that compiles at once, every field to be sourced."""

from __future__ import annotations

from typing import Annotated

import typer

from .app import app
from .output import RootOpt, lay_of, out

new_app = typer.Typer(no_args_is_help=True, help="Start a new model: fields declared unknown, identity registered.")
app.add_typer(new_app, name="new")


@new_app.command("reference")
def new_reference(
    reference_id: Annotated[str, typer.Argument(help="New reference id (lowercase, digits, hyphens).")],
    form_factor: Annotated[str, typer.Option("--form-factor", help="server, rack, cluster, switch or nic.")],
    title: Annotated[str, typer.Option("--title", help="Permanent title (kept in models/identities.json).")],
    kind: Annotated[str, typer.Option("--kind", help="vendor or illustrative (permanent).")] = "vendor",
    root: RootOpt = None,
) -> None:
    """Write models/references/ID.yaml with every applicable vocabulary key unknown, register its identity,
    pin its first model revision. Then cite, derive or explain each field (see docs/guide.md, "Add a reference")."""
    from ..inspect.new import TO_BE_SOURCED
    from ..inspect.new import new_reference as scaffold

    lay = lay_of(root)
    for path in scaffold(lay, reference_id, form_factor, title, kind):
        out.print(f"wrote {lay.relative(path)}")
    out.print(
        f"next: replace each `unknown: {TO_BE_SOURCED}` in models/references/{reference_id}.yaml "
        "(cite, derive, or say why it is unknown), then `fabricref compile`"
    )
