"""What the topology may use about a reference: registry fields, and labelled assumptions where a field is unknown."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from ..compile.registry import ensure_database
from ..core import confidence
from ..core.errors import CompileError, UsageError
from ..core.paths import Layout
from ..core.schemas import load_yaml, validate


@dataclass(frozen=True)
class Fact:
    """A value with where it came from: the field key, its status and confidence, or 'assumed' with the reason.

    The confidence of a derived field comes from the registry (the weakest of its inputs); for every other
    status it follows from the status by the one rule in `core.confidence`."""

    key: str
    value: float | None
    unit: str | None
    direction: str | None
    status: str  # published | preliminary | derived | assumed | unknown
    note: str = ""
    confidence: str = ""

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
        from ..core.units import Quantity

        return Quantity(self.value, self.unit or "Gb/s", self.direction).to("Gb/s", "per_direction").value


class Facts:
    def __init__(
        self,
        reference_id: str,
        form_factor: str,
        kind: str,
        title: str,
        fields: dict[str, dict[str, Any]],
        assumptions: dict[str, dict[str, Any]],
        parameters: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.reference_id = reference_id
        self.form_factor = form_factor
        self.kind = kind
        self.title = title
        self.fields = fields
        self.assumptions = assumptions
        self.parameters = parameters or {}

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
        return Fact(key, None, None, None, "unknown", row["reason"] if row else "")

    def count(self, key: str) -> int:
        fact = self.get(key)
        if fact.value is None or fact.value != int(fact.value) or fact.value < 0:
            raise CompileError(f"reference {self.reference_id}: {key} = {fact.value!r} is not a whole count")
        return int(fact.value)

    def text(self, key: str) -> str:
        row = self.fields.get(key)
        return (row or {}).get("value_text") or ""


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def load_facts(lay: Layout, reference_id: str) -> Facts:
    con = duckdb.connect(str(ensure_database(lay)), read_only=True)
    try:
        refs = _rows(con, "SELECT * FROM reference_models WHERE reference_id = ?", [reference_id])
        if not refs:
            known = [r["reference_id"] for r in _rows(con, "SELECT reference_id FROM reference_models ORDER BY 1", [])]
            raise UsageError(f"no reference {reference_id!r}; known: {', '.join(known)}")
        fields = {r["field"]: r for r in _rows(con, "SELECT * FROM fields WHERE reference_id = ?", [reference_id])}
        assumptions = {
            r["field"]: r for r in _rows(con, "SELECT * FROM assumptions WHERE reference_id = ?", [reference_id])
        }
        params = {r["name"]: r for r in _rows(con, "SELECT * FROM parameters WHERE reference_id = ?", [reference_id])}
    finally:
        con.close()
    ref = refs[0]
    return Facts(reference_id, ref["form_factor"], ref["kind"], ref["title"], fields, assumptions, params)


@dataclass(frozen=True)
class Defaults:
    latency_ns: dict[str, float]
    host_gbps: float
    host_why: str


@cache
def _defaults(path: Path) -> Defaults:
    from ..core.units import Quantity

    data, doc = load_yaml(path)
    validate(data, "topology-defaults.schema.json", path, doc)
    host = data["host_link"]
    gbps = Quantity(host["bandwidth"], host["unit"], "per_direction").to("Gb/s", "per_direction").value
    return Defaults(data["latency_ns"], gbps, host["why"])


def defaults(lay: Layout) -> Defaults:
    return _defaults(lay.root / "models" / "topology" / "defaults.yaml")
