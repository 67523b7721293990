"""Pydantic models for every declarative file and record: `schemas/*.schema.json` are generated from them
(`python -m fabricref.core.generate`; a test fails when the committed files differ)."""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import TypeAdapter

# schema file name → the schema's title (its model: `MODELS`)
TITLES: dict[str, str] = {
    "calibration.schema.json": (
        "Calibration of collective costs: efficiencies and latencies as data, each number with its provenance"
    ),
    "cluster.schema.json": (
        "A cluster: building blocks of one reference on a declared scale-out fabric and a separate frontend"
    ),
    "field.schema.json": (
        "A field record: one fact with its status and provenance (record=claim: what one rule read from one "
        "snapshot; record=field: a reference's field as compiled)"
    ),
    "identities.schema.json": "Permanent identities of reference models",
    "measured-pin.schema.json": "A measured nccl-tests / rccl-tests log as imported and pinned",
    "model-revisions.schema.json": "Append-only revisions of one reference or cluster model",
    "pins.schema.json": "Append-only revision history of one source",
    "reference.schema.json": (
        "A reference architecture: which fields it takes from which sources, derived fields, explicit unknowns"
    ),
    "source.schema.json": "A declared source document and the rules that read facts from it",
    "throughput.schema.json": (
        "Achieved compute throughput per accelerator: GEMM, attention and HBM efficiencies, each with its provenance"
    ),
    "topology-defaults.schema.json": "Labelled teaching defaults for topologies (latencies, host link)",
    "validation.schema.json": "Published training or serving results with their configurations, to check the model on",
    "vocabulary.schema.json": "The field vocabulary",
    "workload.schema.json": (
        "A workload: model size, parallelism and sequence lengths, laid onto a topology by the traffic stage"
    ),
}


def model(name: str) -> Any:
    """The model of one format, by its schema file name, imported on first use (a stage reads two or three).
    Each import is written out, not `importlib`: a stage's declared deps are checked against its static imports."""
    match name:
        case "calibration.schema.json":
            from .calibration import Calibration as found
        case "cluster.schema.json":
            from .cluster import ClusterFile as found
        case "field.schema.json":
            from .records import Record as found
        case "identities.schema.json":
            from .identities import Identities as found
        case "measured-pin.schema.json":
            from .measured import MeasuredPin as found
        case "model-revisions.schema.json":
            from .pins import ModelRevisions as found
        case "pins.schema.json":
            from .pins import PinHistory as found
        case "reference.schema.json":
            from .reference import ReferenceFile as found
        case "source.schema.json":
            from .source import SourceFile as found
        case "throughput.schema.json":
            from .throughput import Throughput as found
        case "topology-defaults.schema.json":
            from .cluster import TopologyDefaults as found
        case "validation.schema.json":
            from .validation import ValidationFile as found
        case "vocabulary.schema.json":
            from .vocabulary import Vocabulary as found
        case "workload.schema.json":
            from .workload import WorkloadFile as found
        case _:
            raise KeyError(f"no format {name!r}; known: {', '.join(sorted(TITLES))}")
    return found


@cache
def adapter(name: str) -> TypeAdapter[Any]:
    """The validator of one format, by its schema file name."""
    from pydantic import TypeAdapter

    return TypeAdapter(model(name))


@cache
def schema(name: str) -> dict[str, Any]:
    """The JSON Schema generated for one format (cached: it depends on the code only)."""
    from .common import json_schema

    return json_schema(adapter(name), name, TITLES[name])


def render(name: str) -> str:
    """The exact text of `schemas/<name>`: sorted keys, two-space indent, trailing newline."""
    return json.dumps(schema(name), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def generated() -> dict[str, str]:
    return {name: render(name) for name in sorted(TITLES)}
