"""Reference models (`models/references/<id>.yaml`) resolved into field records.

Cited fields take their value from claims; claims agree when equal within the digits each states (the more precise
is taken). Claims that disagree follow the declared rule (README, Evidence policy): the most specific product's
document, among those the latest; a `take:` settles only what the rule cannot. Derived fields are evaluated in
dependency order with the fewest digits among their inputs; unknown fields stay empty with their reason.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import confidence, expr
from ..core.format import format_exact, significant_digits, stated_number
from ..core.paths import Layout, check_slug
from ..core.schemas import load_json, load_model, load_yaml, validate
from ..core.sources import Source, load_sources
from ..core.units import Quantity
from ..core.vocabulary import FieldSpec, vocabulary
from ..errors import CompileError, FabricrefError
from ..formats.identities import Identities
from ..formats.reference import Assumption, Cite, FieldDecl, Formula, Parameter, ReferenceFile, Unknown

PARAM_PREFIX = "param."


@dataclass
class Reference:
    """A reference model as loaded and checked against `vocab`; `records` are filled by `resolve`."""

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
    """One reference model, checked against its format and the vocabulary of `lay` (default: the file's checkout)."""
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
        **{k: getattr(model, k) for k in ("id", "kind", "title", "form_factor", "summary")},
        **{k: dict(getattr(model, k)) for k in ("parameters", "assumptions", "fields")},
        path=path,
        model_sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        vocab=vocab,
    )


def _checkout_of(path: Path) -> Layout | None:
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


# Quote marks are typography, not content: "EPYC 'Venice'" and "EPYC Venice" name the same CPU.
_QUOTES = str.maketrans("", "", "'\"‘’“”")


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.translate(_QUOTES).split()).casefold() == " ".join(b.translate(_QUOTES).split()).casefold()


def _halfwidth(value: float, digits: int | None) -> float:
    """Half a unit in the last of `digits` significant digits (0 for an exact figure)."""
    if digits is None or value == 0:
        return 0.0
    return 0.5 * 10 ** (math.floor(math.log10(abs(value))) - digits + 1)


def _claim_halfwidth(claim: dict[str, Any]) -> float:
    """`_halfwidth` of the digits the document wrote, scaled to the field's unit (1.8 TB/s → 3,600 GB/s: ±100)."""
    stated = stated_number(claim["value_text"])
    if stated is None or claim["value_number"] is None or stated[0] == 0:
        return 0.0
    number, digits = stated
    return _halfwidth(number, digits) * abs(claim["value_number"] / number)


def _within(x: float, y: float, halfwidths: float) -> bool:
    """Equal, or the ranges the digits allow overlap; they may touch (989.4 and 1,979 ÷ 2): a relative epsilon keeps
    a sum's last bit from parting them."""
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) or abs(x - y) <= halfwidths * (1 + 1e-9)


def _agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two claims state the same figure: equal text (up to case, spacing and quote marks), or numbers within the
    digits each states."""
    x, y = a["value_number"], b["value_number"]
    if x is None and y is None:
        return _same_text(a["value_text"], b["value_text"])
    return x is not None and y is not None and _within(x, y, _claim_halfwidth(a) + _claim_halfwidth(b))


def _describe(claim: dict[str, Any]) -> str:
    if claim["value_number"] is not None:
        unit = f" {claim['unit']}" if claim["unit"] and claim["unit"] != "count" else ""
        direction = f" {claim['direction']}" if claim["direction"] else ""
        return f"{claim['value_number']:g}{unit}{direction}"
    return repr(claim["value_text"])


def _record(ref: Reference, key: str, spec: FieldSpec, **fields: Any) -> dict[str, Any]:
    """A field record: `fields` over an empty value in the field's stored unit and direction."""
    base = {"value_number": None, "value_text": None, "unit": spec.stored_unit, "direction": spec.direction}
    return {"record": "field", "reference_id": ref.id, "field": key, **base, **fields}


def _span(published_on: str) -> tuple[str, str]:
    """The first and last day a date of day, month or year precision may mean, as comparable strings."""
    parts = published_on.split("-")
    first = "-".join(parts + ["01"] * (3 - len(parts)))
    last = "-".join(parts + (["12", "31"] if len(parts) == 1 else ["31"] if len(parts) == 2 else []))
    return first, last


def _weighed(cite: str, claim: dict[str, Any], source: Source | None) -> dict[str, Any]:
    """A cited claim with what the conflict rule and the views weigh: digits, scope, date, kind, how it was read."""
    rule = source.rule(cite.split("#")[1]) if source is not None else None
    return {
        "cite": cite,
        "claim": claim,
        "digits": significant_digits(claim["value_text"]) if claim["value_number"] is not None else None,
        "scope": rule.scope if rule is not None else "product",
        **{k: getattr(source, k, None) for k in ("published_on", "publisher_kind", "read_via")},
    }


def _most_precise(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """The claim stating the most digits (an exact figure most of all); the first cited on a tie."""
    return max(candidates, key=lambda w: float("inf") if w["digits"] is None else w["digits"])


def _by_rule(weighed: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str]:
    """The declared rule for conflicting claims: the most specific product's document; among those, the latest.
    Returns the claim it takes and why, or None and why it cannot decide."""
    specific = [w for w in weighed if w["scope"] == "product"] or weighed
    if all(_agree(w["claim"], specific[0]["claim"]) for w in specific):
        return _most_precise(specific), "the most specific product's document"
    undated = [w["cite"] for w in specific if not w["published_on"]]
    if undated:
        return None, f"{', '.join(undated)} {'has' if len(undated) == 1 else 'have'} no published_on"
    spans = {w["cite"]: _span(w["published_on"]) for w in specific}
    # The latest: no other claim's document was surely published after it (a later first day than its last day).
    latest = [w for w in specific if not any(spans[o["cite"]][0] > spans[w["cite"]][1] for o in specific)]
    if all(_agree(w["claim"], latest[0]["claim"]) for w in latest):
        return _most_precise(latest), "the latest of the most specific product's documents"
    return None, f"{' and '.join(w['cite'] for w in latest)} were published on dates that do not order them"


def _claim_line(w: dict[str, Any]) -> str:
    when = w["published_on"] or "undated"
    family = ", for the family" if w["scope"] == "family" else ""
    return f"{w['cite']} ({when}{family}) states {w['claim']['value_text']}"


def _cited(
    ref: Reference,
    key: str,
    spec: FieldSpec,
    decl: Cite,
    claims: dict[str, dict[str, Any]],
    sources: Mapping[str, Source],
) -> dict[str, Any]:
    where = f"{ref.path}: at $.fields.{key}"
    cited = []
    for cite in decl.cite:
        claim = claims.get(cite)
        if claim is None:
            source_id = cite.split("#")[0]
            known = any(k.startswith(source_id + "#") for k in claims)
            what = f"source {source_id} has no rule {cite.split('#')[1]!r}" if known else f"no source {source_id!r}"
            raise CompileError(f"{where}.cite: {cite!r} does not exist ({what})")
        expected = decl.reads or key
        if claim["field"] != expected:
            raise CompileError(f"{where}.cite: {cite!r} reads {claim['field']!r}, not {expected!r}")
        if expected != key and ref.vocab[expected].type != spec.type:
            raise CompileError(f"{where}.reads: a {ref.vocab[expected].type} cannot be read as a {spec.type}")
        claim = _in_field_unit(claim, key, spec, f"{where}.cite: {cite!r}")
        cited.append((cite, claim))
    chosen_id = decl.take
    if chosen_id and chosen_id not in decl.cite:
        raise CompileError(f"{where}.take: {chosen_id!r} is not among the cited {decl.cite}")
    weighed = [_weighed(cite, claim, sources.get(claim["source_id"])) for cite, claim in cited]
    by_cite = {w["cite"]: w for w in weighed}
    conflict = any(not _agree(a["claim"], b["claim"]) for i, a in enumerate(weighed) for b in weighed[i + 1 :])
    resolved_by = None
    reason = decl.why
    if conflict:
        ruled, why = _by_rule(weighed)
        lines = "; ".join(_claim_line(w) for w in weighed)
        if ruled is not None and chosen_id and not _agree(by_cite[chosen_id]["claim"], ruled["claim"]):
            raise CompileError(
                f"{where}.take: {chosen_id!r}, but the declared rule ({why}) takes {ruled['cite']!r} ({lines}); "
                "a take: settles only what the rule cannot decide"
            )
        if ruled is None and not chosen_id:
            values = "; ".join(f"{cid} says {_describe(c)}" for cid, c in cited)
            raise CompileError(
                f"{where}: cited documents disagree ({values}) and the declared rule (the most specific product's "
                f"document; among those, the latest) cannot decide: {why}; give the documents' published_on (or a "
                "rule's scope: family), or name the one taken with take: and why:"
            )
        if ruled is not None:
            resolved_by = "rule"
            chosen_id = chosen_id or ruled["cite"]
            if not decl.why:
                reason = f"Conflicting sources; taken by the declared rule ({why}): {lines}."
        else:
            resolved_by = "take"
    elif not chosen_id:
        best = _most_precise(weighed)
        if not all(w["claim"]["value_number"] == best["claim"]["value_number"] for w in weighed):
            chosen_id = best["cite"]  # they agree within their digits: the most precise gives the value
            reason = (
                "The cited documents agree within the digits each states; the most precise is taken: "
                + "; ".join(_claim_line(w) for w in weighed)
                + "."
            )
    chosen = by_cite[chosen_id]["claim"] if chosen_id else cited[0][1]
    statuses = [c["status"] for _, c in cited]
    status = chosen["status"] if chosen_id else ("published" if "published" in statuses else "preliminary")
    return _record(
        ref,
        key,
        spec,
        value_number=chosen["value_number"],
        value_text=chosen["value_text"],
        status=status,
        confidence=confidence.of_status(status),
        provenance=[c["provenance"] for _, c in cited],
        chosen=chosen_id,
        choice_reason=reason if chosen_id else None,
        # A count is exact, whatever digits it is written with.
        digits=None
        if spec.type == "count"
        else (by_cite[chosen_id] if chosen_id else _most_precise(weighed))["digits"],
        claims=[_claim_record(w, chosen) for w in weighed],
        conflict=conflict,
        resolved_by=resolved_by,
    )


def _claim_record(w: dict[str, Any], chosen: dict[str, Any]) -> dict[str, Any]:
    claim = w["claim"]
    return {
        **{k: claim[k] for k in ("value_number", "value_text", "unit", "direction", "status")},
        **{k: w[k] for k in ("cite", "digits", "published_on", "read_via", "scope")},
        "publisher_kind": w["publisher_kind"] or "unknown",
        "agrees": _agree(claim, chosen),
    }


def _check_minimum(key: str, spec: FieldSpec, number: float, where: str) -> None:
    """A value below the vocabulary's minimum (a negative bandwidth) is refused, never stored."""
    if spec.minimum is not None and number < spec.minimum:
        raise CompileError(
            f"{where}: {key} would be {number:g} {spec.stored_unit or ''}".rstrip()
            + f"; schemas/vocabulary.json says it is at least {spec.minimum:g}"
        )


def _in_field_unit(claim: dict[str, Any], key: str, spec: FieldSpec, where: str) -> dict[str, Any]:
    """The claim converted from its own unit and direction to the field's stored ones (never relabelled): the
    vocabulary may have changed since extraction, or the claim be read under another key (`reads:`)."""
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


def resolve(
    ref: Reference, claims: dict[str, dict[str, Any]], sources: Mapping[str, Source] | None = None
) -> dict[str, dict[str, Any]]:
    """All field records of one reference, validated against schemas/field.schema.json. `sources` (by id; default:
    those of the model's checkout) give the dates, scopes and kinds the conflict rule weighs."""
    if sources is None:
        lay = _checkout_of(ref.path)
        sources = {s.id: s for s in load_sources(lay)} if lay is not None else {}
    vocab = ref.vocab
    records: dict[str, dict[str, Any]] = {}
    derived: dict[str, Formula] = {}
    for key, decl in sorted(ref.fields.items()):
        spec = vocab[key]
        if isinstance(decl, Cite):
            records[key] = _cited(ref, key, spec, decl, claims, sources)
        elif isinstance(decl, Unknown):
            unknown = {"reason": decl.unknown, "evidence_needed": decl.evidence_needed}
            records[key] = _record(
                ref, key, spec, status="unknown", confidence=confidence.of_status("unknown"), provenance=[], **unknown
            )
        else:
            if spec.type == "text":
                raise CompileError(f"{ref.path}: at $.fields.{key}.formula: {key} is text; only numbers are derived")
            derived[key] = decl
    for key in _derivation_order(ref, derived):
        records[key] = _derive(ref, key, vocab[key], derived[key].formula, records)
    for key, decl in sorted(ref.fields.items()):
        if isinstance(decl, Cite) and decl.check_formula:
            records[key]["check"] = _check(ref, key, vocab[key], decl.check_formula, records)
    for key, record in records.items():
        validate(record, "field.schema.json", f"{ref.path} field {key}")
    ref.records = records
    return records


def _derivation_order(ref: Reference, derived: dict[str, Formula]) -> list[str]:
    """Topological order of derived fields; a cycle is an error that names it."""
    deps: dict[str, list[str]] = {}
    for key, decl in derived.items():
        names = _names(ref, decl.formula, f"{ref.path}: at $.fields.{key}.formula")
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


def _names(ref: Reference, formula: str, where: str) -> list[str]:
    """The names a formula reads, each a parameter (`param.NAME`) or a field of `ref`; else an error at `where`."""
    try:
        names = expr.names(formula)
    except FabricrefError as exc:
        raise CompileError(f"{where}: {exc}") from None
    for name in names:
        if name.startswith(PARAM_PREFIX):
            if name[len(PARAM_PREFIX) :] not in ref.parameters:
                raise CompileError(f"{where}: no parameter {name!r}")
        elif name not in ref.fields:
            raise CompileError(f"{where}: {name!r} is not a field of {ref.id}")
    return names


def _evaluate(
    ref: Reference, key: str, spec: FieldSpec, formula: str, records: dict[str, dict[str, Any]], where: str
) -> tuple[float, list[str], int | None]:
    """A formula over this reference's records, in the field's unit: the number, its inputs' confidences, and the
    fewest significant digits among its inexact inputs (None when all are exact), the rule for products and
    quotients."""
    confidences: list[str] = []
    digits: list[int] = []

    def lookup(name: str) -> expr.Value:
        if name.startswith(PARAM_PREFIX):
            param = ref.parameters[name[len(PARAM_PREFIX) :]]
            confidences.append(confidence.of_status("design-choice"))
            return expr.Value.of(param.value, param.unit, param.direction)
        record = records[name]
        if record["status"] == "unknown" or record["value_number"] is None:
            raise CompileError(f"{where}: input {name} is {record['status']} with no number; cannot derive {key}")
        confidences.append(record["confidence"])
        if record.get("digits") is not None:
            digits.append(record["digits"])
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
    return number, confidences, min(digits) if digits else None


def _derive(
    ref: Reference, key: str, spec: FieldSpec, formula: str, records: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    where = f"{ref.path}: at $.fields.{key}.formula"
    number, confidences, digits = _evaluate(ref, key, spec, formula, records, where)
    if spec.type == "count":
        if abs(number - round(number)) > 1e-9 or number < 0:
            raise CompileError(f"{where}: a count must be a whole non-negative number, got {number:g}")
        number = float(round(number))
        digits = None  # a whole count is exact
    _check_minimum(key, spec, number, where)
    return _record(
        ref,
        key,
        spec,
        value_number=number,
        # Six significant digits, as `g` gives, but never in exponent notation: SQL and every view read it.
        value_text=format_exact(number, 6, separators=False),
        status="derived",
        confidence=confidence.of_status("derived", confidences),
        formula=formula,
        inputs=expr.names(formula),
        provenance=[],
        digits=digits,
    )


def _check(ref: Reference, key: str, spec: FieldSpec, formula: str, records: dict[str, dict[str, Any]]) -> dict:
    """A stated field's `check_formula` after every derivation: its value, precision, and whether it agrees with
    the stated figure within the digits each carries (a check never changes the value)."""
    where = f"{ref.path}: at $.fields.{key}.check_formula"
    names = _names(ref, formula, where)
    if key in names:
        raise CompileError(f"{where}: a check of {key} cannot read {key} itself")
    record = records[key]
    if record["value_number"] is None:
        raise CompileError(f"{where}: {key} is text; only numbers are checked")
    number, _, digits = _evaluate(ref, key, spec, formula, records, where)
    agrees = _within(number, record["value_number"], _claim_halfwidth(record) + _halfwidth(number, digits))
    return {
        "formula": formula,
        "inputs": names,
        "value_number": number,
        "unit": record["unit"],
        "direction": record["direction"],
        "digits": digits,
        "agrees": agrees,
    }
