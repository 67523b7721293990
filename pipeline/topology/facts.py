"""What the topology may use about a reference: its facts (pipeline/core/facts.py) and the topology defaults."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..core.facts import FACT_TABLES, Fact, Facts, load_facts  # noqa: F401  (where the topology code finds them)
from ..core.paths import Layout
from ..core.registry import Tables, table_paths
from ..core.schemas import load_yaml, validate


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


class FactsBook:
    """`load_facts` for many references: the four fact tables scanned once into memory (one DuckDB) instead of
    opened and queried once per reference (the stage reads ~17 references' facts; each opening costs ~50 ms).
    The rows are the ones `load_facts` selects, in the same order; an id the tables lack goes to `load_facts`,
    whose error names the known ones."""

    def __init__(self, lay: Layout) -> None:
        self.lay = lay
        paths = table_paths(lay, "tables")
        with Tables({name: paths[name] for name in FACT_TABLES}) as t:
            self.references: dict[str, dict[str, Any]] = {}
            for r in t.rows("SELECT * FROM reference_models"):
                self.references.setdefault(r["reference_id"], r)
            self._rows: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
            for table, key in (("fields", "field"), ("assumptions", "field"), ("parameters", "name")):
                per: dict[str, dict[str, dict[str, Any]]] = {}
                for r in t.rows(f"SELECT * FROM {table}"):
                    per.setdefault(r["reference_id"], {})[r[key]] = r
                self._rows[table] = per

    def __call__(self, reference_id: str) -> Facts:
        ref = self.references.get(reference_id)
        if ref is None:
            return load_facts(self.lay, reference_id)
        fields, assumptions, params = (
            dict(self._rows[t].get(reference_id, {})) for t in ("fields", "assumptions", "parameters")
        )
        return Facts(reference_id, ref["form_factor"], ref["kind"], ref["title"], fields, assumptions, params)
