"""Reference models (`models/references/<id>.yaml`) resolved into field records.

Cited fields take their value from claims (both cited when two documents state it; a disagreement
fails unless the model names the one it takes and why). Derived fields are evaluated with the safe
formula language in dependency order. Unknown fields stay empty with their reason.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import confidence, expr
from ..core.paths import Layout, check_slug
from ..core.schemas import load_json, load_model, load_yaml, validate
from ..core.units import Quantity
from ..core.vocabulary import FieldSpec, vocabulary
from ..errors import CompileError, FabricrefError
from ..formats.identities import Identities
from ..formats.reference import Assumption, FieldDecl, Parameter, ReferenceFile, Unknown

PARAM_PREFIX = "param."


@dataclass
class Reference:
    """A reference model as loaded: its typed declarations (pipeline/formats/reference.py, defaults included),
    the file it came from, the vocabulary it was checked against, and (after `resolve`) its field records."""

    id: str
    kind: str
    title: str
    form_factor: str
    summary: str
    parameters: dict[str, Parameter]
    assumptions: dict[str, Assumption]
    fields: dict[str, FieldDecl]
    path: Path
    model_sha256: str
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    vocab: dict[str, FieldSpec] = field(default_factory=dict, repr=False)


def load_reference(path: Path, lay: Layout | None = None) -> Reference:
    """One reference model, checked against its format and the vocabulary of `lay` (default: the checkout the
    file sits in, `<root>/models/references/<id>.yaml`)."""
    data, doc = load_yaml(path)
    model: ReferenceFile = load_model(ReferenceFile, data, "reference.schema.json", path, doc)
    check_slug(model.id, f"reference id in {path}")
    if model.id != path.stem:
        raise CompileError(f"{path}: at $.id: {model.id!r} must equal the file name {path.stem!r}")
    vocab = vocabulary(lay or _checkout_of(path))
    for key in model.fields:
        spec = vocab.get(key)
        if spec is None:
            raise CompileError(f"{path}: at $.fields.{key}: not a key of schemas/vocabulary.json")
        if model.form_factor not in spec.applies_to:
            raise CompileError(f"{path}: at $.fields.{key}: does not apply to a {model.form_factor}")
    for key, assumption in model.assumptions.items():
        spec = vocab.get(key)
        if spec is None:
            raise CompileError(f"{path}: at $.assumptions.{key}: not a key of schemas/vocabulary.json")
        if not isinstance(model.fields.get(key), Unknown):
            raise CompileError(
                f"{path}: at $.assumptions.{key}: only an unknown field may carry an assumption; {key} is stated"
            )
        try:
            assumed = Quantity(float(assumption.value), assumption.unit, assumption.direction).to(
                spec.stored_unit or "count", spec.direction
            )
        except FabricrefError as exc:
            raise CompileError(f"{path}: at $.assumptions.{key}: {exc}") from None
        _check_minimum(key, spec, assumed.value, f"{path}: at $.assumptions.{key}")
    missing = [k for k, s in vocab.items() if model.form_factor in s.applies_to and k not in model.fields]
    if missing:
        raise CompileError(
            f"{path}: at $.fields: {len(missing)} vocabulary key(s) left out: {', '.join(missing)}; "
            "cite them, derive them, or declare them unknown with a reason"
        )
    return Reference(
        id=model.id,
        kind=model.kind,
        title=model.title,
        form_factor=model.form_factor,
        summary=model.summary,
        parameters=dict(model.parameters),
        assumptions=dict(model.assumptions),
        fields=dict(model.fields),
        path=path,
        model_sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        vocab=vocab,
    )


def _checkout_of(path: Path) -> Layout | None:
    """The checkout a model file sits in (`<root>/models/references/<id>.yaml`), when it is one."""
    root = path.resolve().parents[2]
    return Layout(root) if (root / "schemas" / "vocabulary.json").is_file() else None


def load_references(lay: Layout) -> list[Reference]:
    refs = [load_reference(p, lay) for p in sorted(lay.references_dir.glob("*.yaml"))]
    if not refs:
        raise CompileError(f"no reference models in {lay.relative(lay.references_dir)}")
    check_identities(lay, refs)
    return refs


def check_identities(lay: Layout, refs: list[Reference]) -> None:
    """A model id keeps its meaning forever: kind and title must match models/identities.json."""
    path = lay.root / "models" / "identities.json"
    known = load_model(Identities, load_json(path), "identities.schema.json", path).references
    for ref in refs:
        entry = known.get(ref.id)
        if entry is None:
            raise CompileError(
                f"{ref.path}: reference {ref.id!r} has no permanent identity; add it to {lay.relative(path)} "
                "with its kind and title"
            )
        for key in ("kind", "title"):
            permanent = getattr(entry, key)
            if getattr(ref, key) != permanent:
                raise CompileError(
                    f"{ref.path}: at $.{key}: {getattr(ref, key)!r} but {ref.id} is permanently {permanent!r} "
                    f"({lay.relative(path)}); a model id keeps its meaning — an illustrative model is never "
                    "relabelled as a vendor reference"
                )


def _agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["value_number"] is not None or b["value_number"] is not None:
        if a["value_number"] is None or b["value_number"] is None:
            return False
        return math.isclose(a["value_number"], b["value_number"], rel_tol=1e-9, abs_tol=1e-12)
    return " ".join(a["value_text"].split()).casefold() == " ".join(b["value_text"].split()).casefold()


def _describe(claim: dict[str, Any]) -> str:
    if claim["value_number"] is not None:
        unit = f" {claim['unit']}" if claim["unit"] and claim["unit"] != "count" else ""
        direction = f" {claim['direction']}" if claim["direction"] else ""
        return f"{claim['value_number']:g}{unit}{direction}"
    return repr(claim["value_text"])


def _base_record(ref: Reference, key: str, spec: FieldSpec) -> dict[str, Any]:
    return {
        "record": "field",
        "reference_id": ref.id,
        "field": key,
        "value_number": None,
        "value_text": None,
        "unit": spec.stored_unit,
        "direction": spec.direction,
    }


def _cited(
    ref: Reference, key: str, spec: FieldSpec, decl: dict[str, Any], claims: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    where = f"{ref.path}: at $.fields.{key}"
    cited = []
    for cite in decl["cite"]:
        claim = claims.get(cite)
        if claim is None:
            source_id = cite.split("#")[0]
            known = any(k.startswith(source_id + "#") for k in claims)
            what = f"source {source_id} has no rule {cite.split('#')[1]!r}" if known else f"no source {source_id!r}"
            raise CompileError(f"{where}.cite: {cite!r} does not exist ({what})")
        expected = decl.get("reads", key)
        if claim["field"] != expected:
            raise CompileError(f"{where}.cite: {cite!r} reads {claim['field']!r}, not {expected!r}")
        if expected != key and ref.vocab[expected].type != spec.type:
            raise CompileError(f"{where}.reads: a {ref.vocab[expected].type} cannot be read as a {spec.type}")
        claim = _in_field_unit(claim, key, spec, f"{where}.cite: {cite!r}")
        cited.append((cite, claim))
    chosen_id = decl.get("take")
    if chosen_id and chosen_id not in decl["cite"]:
        raise CompileError(f"{where}.take: {chosen_id!r} is not among the cited {decl['cite']}")
    disagree = [c for c in cited if not _agree(c[1], cited[0][1])]
    if disagree and not chosen_id:
        values = "; ".join(f"{cid} says {_describe(c)}" for cid, c in cited)
        raise CompileError(f"{where}: cited documents disagree ({values}); name the one taken with take: and why:")
    chosen = dict(cited)[chosen_id] if chosen_id else cited[0][1]
    statuses = [c["status"] for _, c in cited]
    status = chosen["status"] if chosen_id else ("published" if "published" in statuses else "preliminary")
    record = _base_record(ref, key, spec)
    record.update(
        {
            "value_number": chosen["value_number"],
            "value_text": chosen["value_text"],
            "status": status,
            "confidence": confidence.of_status(status),
            "provenance": [c["provenance"] for _, c in cited],
            "chosen": chosen_id,
            "choice_reason": decl.get("why"),
        }
    )
    return record


def _check_minimum(key: str, spec: FieldSpec, number: float, where: str) -> None:
    """A value below the vocabulary's minimum (a negative bandwidth) is refused, never stored."""
    if spec.minimum is not None and number < spec.minimum:
        raise CompileError(
            f"{where}: {key} would be {number:g} {spec.stored_unit or ''}".rstrip()
            + f"; schemas/vocabulary.json says it is at least {spec.minimum:g}"
        )


def _in_field_unit(claim: dict[str, Any], key: str, spec: FieldSpec, where: str) -> dict[str, Any]:
    """The claim converted from the unit and direction it states to the field's stored ones (never relabelled).

    A claim's number is in its own `unit`; the vocabulary may have changed since it was extracted, or the
    claim may be read under another key (`reads:`), so the number is always converted, or refused.
    """
    number = claim["value_number"]
    if number is None:
        if spec.type != "text":
            raise CompileError(f"{where} has no number, but {key} takes a {spec.type}")
        return claim
    if spec.type == "text":
        raise CompileError(f"{where} states a number, but {key} takes text")
    have = f"{claim['unit'] or 'no unit'}{' ' + claim['direction'] if claim['direction'] else ''}"
    want = f"{spec.stored_unit or 'no unit'}{' ' + spec.direction if spec.direction else ''}"
    if not claim["unit"]:
        raise CompileError(f"{where} states {number:g} with no unit; {key} is stored in {want}")
    try:
        value = Quantity(number, claim["unit"], claim["direction"]).to(spec.stored_unit or "count", spec.direction)
    except FabricrefError as exc:
        raise CompileError(f"{where} states {have}, but {key} is stored in {want}: {exc}") from None
    _check_minimum(key, spec, value.value, where)
    return {**claim, "value_number": value.value, "unit": value.unit, "direction": value.direction}


def resolve(ref: Reference, claims: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """All field records of one reference, validated against schemas/field.schema.json."""
    vocab = ref.vocab
    records: dict[str, dict[str, Any]] = {}
    derived: dict[str, dict[str, Any]] = {}
    for key, decl in sorted(ref.fields.items()):
        spec = vocab[key]
        if "cite" in decl:
            records[key] = _cited(ref, key, spec, decl, claims)
        elif "unknown" in decl:
            record = _base_record(ref, key, spec)
            record.update(
                {
                    "status": "unknown",
                    "confidence": confidence.of_status("unknown"),
                    "provenance": [],
                    "reason": decl["unknown"],
                    "evidence_needed": decl.get("evidence_needed"),
                }
            )
            records[key] = record
        else:
            if spec.type == "text":
                raise CompileError(f"{ref.path}: at $.fields.{key}.formula: {key} is text; only numbers are derived")
            derived[key] = decl
    for key in _derivation_order(ref, derived):
        records[key] = _derive(ref, key, vocab[key], derived[key]["formula"], records)
    for key, record in records.items():
        validate(record, "field.schema.json", f"{ref.path} field {key}")
    ref.records = records
    return records


def _derivation_order(ref: Reference, derived: dict[str, dict[str, Any]]) -> list[str]:
    """Topological order of derived fields; a cycle is an error that names it."""
    deps: dict[str, list[str]] = {}
    for key, decl in derived.items():
        try:
            names = expr.names(decl["formula"])
        except FabricrefError as exc:
            raise CompileError(f"{ref.path}: at $.fields.{key}.formula: {exc}") from None
        for name in names:
            if name.startswith(PARAM_PREFIX):
                if name[len(PARAM_PREFIX) :] not in ref.parameters:
                    raise CompileError(f"{ref.path}: at $.fields.{key}.formula: no parameter {name!r}")
            elif name not in ref.fields:
                raise CompileError(f"{ref.path}: at $.fields.{key}.formula: {name!r} is not a field of {ref.id}")
        deps[key] = [n for n in names if n in derived]
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(key: str, trail: list[str]) -> None:
        if state.get(key) == 2:
            return
        if state.get(key) == 1:
            cycle = [*trail[trail.index(key) :], key]
            raise CompileError(f"{ref.path}: derived fields form a cycle: {' -> '.join(cycle)}")
        state[key] = 1
        for dep in deps[key]:
            visit(dep, [*trail, key])
        state[key] = 2
        order.append(key)

    for key in sorted(derived):
        visit(key, [])
    return order


def _derive(
    ref: Reference, key: str, spec: FieldSpec, formula: str, records: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    where = f"{ref.path}: at $.fields.{key}.formula"
    confidences: list[str] = []

    def lookup(name: str) -> expr.Value:
        if name.startswith(PARAM_PREFIX):
            param = ref.parameters[name[len(PARAM_PREFIX) :]]
            confidences.append(confidence.of_status("design-choice"))
            return expr.Value.of(param["value"], param["unit"], param.get("direction"))
        record = records[name]
        if record["status"] == "unknown" or record["value_number"] is None:
            raise CompileError(f"{where}: input {name} is {record['status']} with no number; cannot derive {key}")
        confidences.append(record["confidence"])
        return expr.Value.of(record["value_number"], record["unit"], record["direction"])

    try:
        value = expr.evaluate(formula, lookup)
        number = value.in_unit(spec.stored_unit or "count")
    except FabricrefError as exc:
        raise CompileError(f"{where}: {exc}") from None
    if value.direction != spec.direction:
        # Either way round is a relabel: a bandwidth given a direction nobody stated, or one dropped.
        raise CompileError(
            f"{where}: result is {value.direction or 'without direction'}, "
            f"but {key} is stored {spec.direction or 'without direction'}"
        )
    if not math.isfinite(number):
        raise CompileError(f"{where}: result is not a finite number")
    if spec.type == "count":
        if abs(number - round(number)) > 1e-9 or number < 0:
            raise CompileError(f"{where}: a count must be a whole non-negative number, got {number:g}")
        number = float(round(number))
    _check_minimum(key, spec, number, where)
    record = _base_record(ref, key, spec)
    record.update(
        {
            "value_number": number,
            "value_text": f"{number:g}",
            "status": "derived",
            "confidence": confidence.of_status("derived", confidences),
            "formula": formula,
            "inputs": expr.names(formula),
            "provenance": [],
        }
    )
    return record
