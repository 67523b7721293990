"""One source of truth per format: pydantic models for every declarative file and record.

`schemas/*.schema.json` are generated from these models (`python -m pipeline.formats`); a test fails when the
committed files differ from what the models generate. Validation runs the generated JSON Schema (for messages
with line and JSON path) and then the model (for a typed object); both accept the same documents.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from pydantic import TypeAdapter

from .calibration import Calibration
from .cluster import ClusterFile
from .common import json_schema
from .identities import Identities
from .measured import MeasuredPin
from .pins import PinHistory
from .records import Record
from .reference import ReferenceFile
from .revisions import ModelRevisions
from .source import SourceFile
from .topology import TopologyDefaults
from .vocabulary import Vocabulary
from .workload import WorkloadFile

# schema file name → (the model, the schema's title)
FORMATS: dict[str, tuple[Any, str]] = {
    "calibration.schema.json": (
        Calibration,
        "Calibration of collective costs: efficiencies and latencies as data, each number with its provenance",
    ),
    "cluster.schema.json": (
        ClusterFile,
        "A cluster: building blocks of one reference on a declared scale-out fabric and a separate frontend",
    ),
    "field.schema.json": (
        Record,
        "A field record: one fact with its status and provenance (record=claim: what one rule read from one "
        "snapshot; record=field: a reference's field as compiled)",
    ),
    "identities.schema.json": (Identities, "Permanent identities of reference models"),
    "measured-pin.schema.json": (MeasuredPin, "A measured nccl-tests / rccl-tests log as imported and pinned"),
    "model-revisions.schema.json": (ModelRevisions, "Append-only revisions of one reference or cluster model"),
    "pins.schema.json": (PinHistory, "Append-only revision history of one source"),
    "reference.schema.json": (
        ReferenceFile,
        "A reference architecture: which fields it takes from which sources, derived fields, explicit unknowns",
    ),
    "source.schema.json": (SourceFile, "A declared source document and the rules that read facts from it"),
    "topology-defaults.schema.json": (
        TopologyDefaults,
        "Labelled teaching defaults for topologies (latencies, host link)",
    ),
    "vocabulary.schema.json": (Vocabulary, "The field vocabulary"),
    "workload.schema.json": (
        WorkloadFile,
        "A workload: model size, parallelism and sequence lengths, laid onto a topology by the traffic stage",
    ),
}


@cache
def adapter(name: str) -> TypeAdapter[Any]:
    """The validator of one format, by its schema file name."""
    if name not in FORMATS:
        raise KeyError(f"no format {name!r}; known: {', '.join(sorted(FORMATS))}")
    return TypeAdapter(FORMATS[name][0])


@cache
def schema(name: str) -> dict[str, Any]:
    """The JSON Schema generated for one format (cached: it depends on the code only)."""
    title = FORMATS[name][1]
    return json_schema(adapter(name), name, title)


def render(name: str) -> str:
    """The exact text of `schemas/<name>`: sorted keys, two-space indent, trailing newline."""
    return json.dumps(schema(name), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def generated() -> dict[str, str]:
    return {name: render(name) for name in sorted(FORMATS)}
