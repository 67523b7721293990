"""Audit: walk a field back to the bytes it came from, re-hashing every snapshot on the way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core import confidence, pins
from ..core.citing import check_of
from ..core.paths import Layout, contained
from ..core.registry import Tables, open_tables
from ..core.store import sha256_file
from ..errors import IntegrityError, UnknownIdError, UsageError, ValidationError


def _problem(lay: Layout, source_id: str, snapshot_path: str, sha256: str) -> str | None:
    """What breaks the promise of a citation's hash (the stored snapshot re-hashes to it and, for a transcription,
    the file under sources/transcriptions/ is still the one pinned), or None."""
    path = lay.root / snapshot_path
    try:
        contained(path, lay.root, strict=True)  # a table's `snapshot_path` of `../..` must not read /etc
        actual = sha256_file(Path(path))
    except ValidationError as exc:
        return str(exc)
    except FileNotFoundError:
        return f"{snapshot_path}: the pinned snapshot is missing from the store"
    if actual != sha256:
        return f"{snapshot_path}: hash mismatch: pinned sha256 {sha256}, stored bytes hash to {actual}"
    history = pins.load(lay, source_id)
    return pins.edited_transcription(lay, source_id, history.current) if history else None


def _checked(lay: Layout, source_id: str, snapshot_path: str, sha256: str) -> dict[str, Any]:
    """`verified` and, when it is false, `problem`: why the hash no longer proves what it did."""
    problem = _problem(lay, source_id, snapshot_path, sha256)
    return {"verified": problem is None, "problem": problem}


def audit(lay: Layout, reference_id: str, field: str, tables: Tables | None = None) -> dict[str, Any]:
    """The provenance tree of one field. A caller auditing many fields passes `open_tables(lay)` once as `tables`
    (opening them binds every Parquet table: tens of milliseconds each time)."""
    if tables is not None:
        return _audit(tables, lay, reference_id, field, seen=())
    with open_tables(lay) as con:
        return _audit(con, lay, reference_id, field, seen=())


def _audit(con: Tables, lay: Layout, reference_id: str, field: str, seen: tuple[str, ...]) -> dict[str, Any]:
    if field.startswith("param."):
        params = con.rows(
            "SELECT * FROM parameters WHERE reference_id = ? AND name = ?", reference_id, field.removeprefix("param.")
        )
        if not params:
            raise UsageError(f"reference {reference_id} has no parameter {field!r}")
        p = params[0]
        return {
            "reference_id": reference_id,
            "field": field,
            "value": p["value"],
            "unit": p["unit"],
            "direction": p["direction"],
            "status": "design-choice",
            "confidence": confidence.of_status("design-choice"),
            "provenance": [],
            "why": p["why"],
        }
    found = con.rows("SELECT * FROM fields WHERE reference_id = ? AND field = ?", reference_id, field)
    if not found:
        refs = [r["reference_id"] for r in con.rows("SELECT reference_id FROM reference_models ORDER BY 1")]
        if reference_id not in refs:
            raise UnknownIdError("reference", reference_id, refs)
        fields = [r["field"] for r in con.rows("SELECT field FROM fields WHERE reference_id = ?", reference_id)]
        raise UnknownIdError("field", field, fields, f"`fabricref show {reference_id}` lists them", reference_id)
    f = found[0]
    result: dict[str, Any] = {
        "reference_id": reference_id,
        "field": field,
        "value": f["value_number"] if f["value_number"] is not None else f["value_text"],
        "value_text": f["value_text"],
        "unit": f["unit"],
        "direction": f["direction"],
        "status": f["status"],
        "confidence": f["confidence"],
        "digits": f["digits"],
        "provenance": [],
    }
    if f["conflict"]:
        # Every cited document's claim stays in `provenance` with its value and date; the value follows one rule.
        result["conflict"] = True
        result["resolved_by"] = f["resolved_by"]
    check = check_of(f)
    if check is not None:
        result["check"] = check
    if f["chosen"]:
        result["chosen"] = f["chosen"]
        result["choice_reason"] = f["choice_reason"]
    citations = con.rows(
        "SELECT * FROM field_citations WHERE reference_id = ? AND field = ? ORDER BY source_id, rule_id",
        reference_id,
        field,
    )
    for c in citations:
        result["provenance"].append(
            {
                "source_id": c["source_id"],
                "rule_id": c["rule_id"],
                "revision": c["revision"],
                "url": c["url"],
                "retrieved_at": c["retrieved_at"],
                "sha256": c["sha256"],
                "snapshot_path": c["snapshot_path"],
                "locator": c["locator"],
                "excerpt": c["excerpt"],
                "stated": c["stated"],
                "origin": c["origin"],
                "chosen": c["chosen"],
                "carried_from_revision": c["carried_from_revision"],
                **_checked(lay, c["source_id"], c["snapshot_path"], c["sha256"]),
                # What kind of evidence the document is, when it was published and whether it was read through a
                # copy (the source's declaration), and what this claim states in the field's unit.
                "publisher_kind": c["publisher_kind"],
                "published_on": c["published_on"],
                "read_via": c["read_via"],
                "scope": c["scope"],
                "value_number": c["value_number"],
                "value_text": c["value_text"],
                "unit": c["unit"],
                "direction": c["direction"],
                "digits": c["digits"],
                "agrees": c["agrees"],
            }
        )
    if f["status"] == "derived":
        inputs = [
            r["input"]
            for r in con.rows(
                "SELECT input FROM field_inputs WHERE reference_id = ? AND field = ? ORDER BY position",
                reference_id,
                field,
            )
        ]
        result["formula"] = f["formula"]
        result["inputs"] = [_audit(con, lay, reference_id, name, (*seen, field)) for name in inputs if name not in seen]
    if f["status"] == "unknown":
        result["reason"] = f["reason"]
        result["evidence_needed"] = f["evidence_needed"]
    return result


def unverified(node: dict[str, Any]) -> list[str]:
    """Each citation of the tree whose hash no longer proves what it did, as 'source revision N: problem'."""
    found = [
        f"{p['source_id']} revision {p['revision']}: {p.get('problem') or 'not verified'}"
        for p in node["provenance"]
        if not p["verified"]
    ]
    for child in node.get("inputs", []):
        found += [line for line in unverified(child) if line not in found]
    return found


TRAFFIC_PREFIX = "traffic:"


def calibration_node(lay: Layout, entry: dict[str, Any]) -> dict[str, Any]:
    """A calibration number (models/calibration/collectives.yaml) with the statement or log it rests on."""
    from ..estimate.calibration import CALIBRATION_PATH, load_calibration

    cal = load_calibration(lay.root)
    n = cal.number(entry["field"])
    source = cal.sources.get(n.source) if n is not None and n.source else None
    why = f"a calibration number in {CALIBRATION_PATH}"
    if source is not None:
        why += f", stated at {source.url}: {source.statement}"
    if n is not None and n.note:
        why += f" ({n.note})"
    return {
        "reference_id": "calibration",
        "field": entry["field"],
        "status": entry["status"],
        "confidence": entry["confidence"],
        "value": None if n is None else n.value,
        "provenance": [],  # pinned snapshots only; a calibration number cites a URL and its words (in `why`)
        "source_url": source.url if source else None,
        "measured_sha256": None if n is None else n.measured_sha256,
        "why": why,
    }


def audit_traffic(lay: Layout, target: str, phase: str) -> dict[str, Any]:
    """A traffic row with its lineage: each registry field it rests on is audited down to verified hashes."""
    parts = target[len(TRAFFIC_PREFIX) :].split(":")
    if len(parts) != 2:
        raise UsageError(
            f"{target!r}: expected traffic:TOPOLOGY:WORKLOAD (e.g. traffic:nvidia-gb200-nvl72:moe-train-ep16)"
        )
    topology_id, workload_id = parts
    with open_tables(lay) as con:
        rows = con.rows(
            "SELECT * FROM traffic WHERE topology_id = ? AND workload_id = ? AND phase = ?",
            topology_id,
            workload_id,
            phase,
        )
        if not rows:
            known = con.rows(
                "SELECT phase FROM traffic WHERE topology_id = ? AND workload_id = ? ORDER BY 1",
                topology_id,
                workload_id,
            )
            raise UsageError(
                f"no traffic phase {phase!r} for {workload_id} on {topology_id}"
                + (
                    f"; phases: {', '.join(r['phase'] for r in known)}"
                    if known
                    else " (run `dvc repro`, or check the ids)"
                )
            )
        row = rows[0]
        lineage = []
        for entry in row["lineage"]:
            reference_id, field = entry["reference_id"], entry["field"]
            if con.rows("SELECT 1 FROM fields WHERE reference_id = ? AND field = ?", reference_id, field):
                lineage.append(_audit(con, lay, reference_id, field, seen=()))
            elif reference_id == "calibration":
                lineage.append(calibration_node(lay, entry))
            else:
                node = {
                    "reference_id": reference_id,
                    "field": field,
                    "status": entry["status"],
                    "confidence": entry["confidence"],
                    "value": None,
                    "provenance": [],
                    "why": "a labelled topology assumption (models/topology/defaults.yaml or the model's "
                    "`assumptions:`), not a vendor fact",
                }
                lineage.append(node)
    return {
        "reference_id": target,
        "field": phase,
        "value": row["seconds"],
        "unit": "s",
        "direction": None,
        "status": "derived",
        "confidence": row["confidence"],
        "provenance": [],
        "formula": "fixed path overhead + bytes ÷ effective bandwidth + queueing",
        "terms": {
            "latency_s": row["latency_s"],
            "bandwidth_s": row["bandwidth_s"],
            "queueing_s": row["queueing_s"],
            "dominant": row["dominant"],
        },
        "row": row,
        "inputs": lineage,
    }


def audit_at_revision(lay: Layout, reference_id: str, field: str, revision: int) -> dict[str, Any]:
    """The field as it stood at revision N of the documents it cites: values re-read from the old snapshots,
    hashes re-verified now. A derived field is re-derived from its inputs' values at that revision."""
    from ..core.sources import load_sources
    from ..extract.claims import claims_at
    from .changes import require_revision

    current = audit(lay, reference_id, field)
    result = {**current, "revision": revision, "provenance": []}
    values = []
    for p in current["provenance"]:
        (source,) = load_sources(lay, p["source_id"])
        history = pins.load(lay, source.id)
        require_revision(history, revision)  # a missing revision is bad usage, not a hash mismatch
        try:
            parsed, errors, rev = claims_at(lay, source, revision)
            unread = None
        except IntegrityError as exc:  # bytes that no longer match their hash are not parsed: the leaf says why
            parsed, errors, rev, unread = {}, {}, history.get(revision), str(exc)
        value = parsed.get(p["rule_id"])
        path = lay.root / p["snapshot_path"].replace(p["sha256"], rev.sha256).replace(
            f"/{p['sha256'][:2]}/", f"/{rev.sha256[:2]}/"
        )
        leaf = {
            **p,
            "revision": rev.revision,
            "sha256": rev.sha256,
            "retrieved_at": rev.retrieved_at,
            "snapshot_path": lay.relative(path),
            "origin": rev.origin,
            **_checked(lay, source.id, lay.relative(path), rev.sha256),
        }
        if value is None:
            note = f"rule did not match revision {revision}: {errors.get(p['rule_id'])}"
            leaf.update(excerpt=None, stated=None, note=f"revision {revision} not read: {unread}" if unread else note)
        else:
            leaf.update(locator=value["locator"], excerpt=value["excerpt"], stated=value["stated"])
            leaf["status_then"] = value["status"]
            values.append(value)
        result["provenance"].append(leaf)
    if values:
        chosen = values[0]
        result["value"] = chosen["value_number"] if chosen["value_number"] is not None else chosen["value_text"]
        result["status"] = chosen["status"]
    if current["status"] == "derived":
        result["inputs"] = [
            audit_at_revision(lay, reference_id, i["field"], revision)
            for i in current.get("inputs", [])
            if not i["field"].startswith("param.")
        ]
    return result
