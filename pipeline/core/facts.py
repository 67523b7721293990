"""A reference's facts as the compile tables hold them: its fields, and labelled assumptions for unknown ones."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import CompileError, UnknownIdError
from . import confidence
from .paths import Layout
from .registry import Tables, table_paths

# The compile tables a reference's facts come from (a stage reading facts declares these in dvc.yaml).
FACT_TABLES = ("reference_models", "fields", "assumptions", "parameters")
# Form factors the topology stage builds as a system of parts; a `switch` or `nic` reference is a network product
# with no topology of its own.
SYSTEM_FORM_FACTORS = ("server", "rack")
NETWORK_PRODUCT_FORM_FACTORS = ("switch", "nic")


@dataclass(frozen=True)
class Fact:
    """A value with its field key, status and confidence (a derived one's from the registry), or 'assumed' with
    the reason."""

    key: str
    value: float | None
    unit: str | None
    direction: str | None
    status: str  # published | preliminary | derived | assumed | unknown
    note: str = ""
    confidence: str = ""
    evidence_needed: str = ""  # of an unknown field: what the registry says would settle it

    def __post_init__(self) -> None:
        if not self.confidence:
            if self.status == "derived":
                raise ValueError(f"{self.key}: a derived fact needs the confidence its inputs give it")
            object.__setattr__(self, "confidence", confidence.of_status(self.status))

    @property
    def known(self) -> bool:
        return self.value is not None

    def gbps(self) -> float | None:
        """Per-direction Gb/s for a bandwidth (bidirectional figures halved, bytes turned into bits)."""
        if self.value is None:
            return None
        from .units import Quantity

        return Quantity(self.value, self.unit or "Gb/s", self.direction).to("Gb/s", "per_direction").value


@dataclass(eq=False)  # compared and hashed by identity, as a plain object
class Facts:
    reference_id: str
    form_factor: str
    kind: str
    title: str
    fields: dict[str, dict[str, Any]]
    assumptions: dict[str, dict[str, Any]]
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)

    def get(self, key: str, required: bool = True) -> Fact:
        row = self.fields.get(key)
        if row is not None and row["status"] != "unknown":
            return Fact(
                key,
                row["value_number"],
                row["unit"],
                row["direction"],
                row["status"],
                row["value_text"] or "",
                confidence=row["confidence"],
            )
        if key in self.assumptions:
            a = self.assumptions[key]
            return Fact(key, a["value"], a["unit"], a["direction"], "assumed", a["why"])
        if required:
            raise CompileError(
                f"reference {self.reference_id}: the topology needs {key}, which is unknown in the registry; "
                "declare a labelled assumption for it under `assumptions:` in "
                f"models/references/{self.reference_id}.yaml"
            )
        return Fact(
            key, None, None, None, "unknown", row["reason"] if row else "",
            evidence_needed=(row.get("evidence_needed") or "") if row else "",
        )  # fmt: skip

    def count(self, key: str) -> int:
        fact = self.get(key)
        if fact.value is None or fact.value != int(fact.value) or fact.value < 0:
            raise CompileError(f"reference {self.reference_id}: {key} = {fact.value!r} is not a whole count")
        return int(fact.value)

    def text(self, key: str) -> str:
        row = self.fields.get(key)
        return (row or {}).get("value_text") or ""


def load_facts(lay: Layout, reference_id: str) -> Facts:
    paths = table_paths(lay, "tables")
    with Tables({name: paths[name] for name in FACT_TABLES}) as t:
        refs = t.rows("SELECT * FROM reference_models WHERE reference_id = ?", reference_id)
        if not refs:
            known = [r["reference_id"] for r in t.rows("SELECT reference_id FROM reference_models ORDER BY 1")]
            raise UnknownIdError("reference", reference_id, known)
        fields = {r["field"]: r for r in t.rows("SELECT * FROM fields WHERE reference_id = ?", reference_id)}
        assumptions = {r["field"]: r for r in t.rows("SELECT * FROM assumptions WHERE reference_id = ?", reference_id)}
        params = {r["name"]: r for r in t.rows("SELECT * FROM parameters WHERE reference_id = ?", reference_id)}
    ref = refs[0]
    return Facts(reference_id, ref["form_factor"], ref["kind"], ref["title"], fields, assumptions, params)
