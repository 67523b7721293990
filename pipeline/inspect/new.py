"""Start a new reference model in one step: every vocabulary key that applies to its form factor declared
`unknown` (to be sourced), its permanent identity registered, its first model revision pinned, so that
`fabricref compile` accepts it at once and `fabricref show` lists what is left to source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core import model_revisions
from ..core.files import checkout_lock, transaction
from ..core.paths import Layout, check_slug
from ..core.schemas import dump_yaml, load_json, load_model
from ..core.vocabulary import vocabulary
from ..errors import FabricrefError, UsageError
from ..formats.identities import Identities
from ..formats.reference import ReferenceFile

FORM_FACTORS = ("server", "rack", "cluster", "switch", "nic")
KINDS = ("vendor", "illustrative")
TO_BE_SOURCED = "to be sourced"


def identities_json(data: dict[str, Any]) -> bytes:
    """models/identities.json in its committed layout (one line per reference, sorted by id), so adding one
    reference adds one line to the diff."""
    refs = sorted(data["references"].items())
    lines = ["{"]
    if data.get("description") is not None:
        lines.append(f'  "description": {json.dumps(data["description"], ensure_ascii=False)},')
    lines.append('  "references": {')
    for i, (ref_id, identity) in enumerate(refs):
        comma = "," if i < len(refs) - 1 else ""
        entry = json.dumps(identity, ensure_ascii=False, sort_keys=True)
        lines.append(f"    {json.dumps(ref_id)}: {entry}{comma}")
    lines += ["  }", "}"]
    return ("\n".join(lines) + "\n").encode()


def new_reference(lay: Layout, ref_id: str, form_factor: str, title: str, kind: str = "vendor") -> list[Path]:
    """Write models/references/ID.yaml, register ID in models/identities.json, pin its first model revision:
    everything validated first, then the three files written as one transaction under the checkout's lock (so
    parallel runs each see the others' identities). Bad arguments or an id in use are bad usage."""
    try:
        check_slug(ref_id, "reference id")
    except FabricrefError as exc:
        raise UsageError(str(exc)) from None
    if form_factor not in FORM_FACTORS:
        raise UsageError(f"--form-factor {form_factor!r}: expected one of {', '.join(FORM_FACTORS)}")
    if kind not in KINDS:
        raise UsageError(f"--kind {kind!r}: expected one of {', '.join(KINDS)}")
    # Every applicable vocabulary key unknown, in vocabulary order.
    fields = {k: {"unknown": TO_BE_SOURCED} for k, spec in vocabulary(lay).items() if form_factor in spec.applies_to}
    data = {"id": ref_id, "kind": kind, "title": title, "form_factor": form_factor, "fields": fields}
    try:
        load_model(ReferenceFile, data, "reference.schema.json", f"new reference {ref_id}")
    except FabricrefError as exc:
        raise UsageError(f"cannot create reference {ref_id!r}: {exc}") from None
    model_path = lay.references_dir / f"{ref_id}.yaml"
    ids_path = lay.root / "models" / "identities.json"
    text = dump_yaml(data).encode()
    model = f"references/{ref_id}"
    with checkout_lock(lay.root):
        identities = load_json(ids_path)
        Identities.model_validate(identities)
        others = (model_path, lay.root / "models" / "clusters" / f"{ref_id}.yaml")
        taken = [lay.relative(p) for p in others if p.exists()]
        if ref_id in identities["references"]:
            taken.append(f"{lay.relative(ids_path)} ({identities['references'][ref_id]['title']!r})")
        if taken:
            raise UsageError(f"id {ref_id!r} is already in use: {', '.join(taken)}; a model id is permanent")
        identities = {**identities, "references": {**identities["references"], ref_id: {"kind": kind, "title": title}}}
        load_model(Identities, identities, "identities.schema.json", ids_path)
        revisions = model_revisions.revised(lay, model, text)
        with transaction(lay.root) as tx:
            tx.write(ids_path, identities_json(identities))
            tx.write(model_path, text)
            if revisions is not None:
                tx.write_json(model_revisions.revisions_file(lay, model), revisions)
    return [ids_path, model_path, model_revisions.revisions_file(lay, model)]
