"""Declared sources (`sources/<id>.yaml`): loaded, schema-checked and turned into typed models."""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .errors import ValidationError
from .paths import Layout, check_slug
from .schemas import load_yaml, validate
from .vocabulary import vocabulary


class Select(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    css: str | None = None
    row: str | None = None
    within: str | None = None
    expect: Literal["one", "first"] = "one"

    def describe(self) -> str:
        scope = f" within {self.within!r}" if self.within else ""
        return f"css {self.css!r}{scope}" if self.css else f"table row {self.row!r}{scope}"


class Parse(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["quantity", "count", "text"]
    pattern: str | None = None
    unit: str | None = None
    direction: Literal["per_direction", "bidirectional"] | None = None


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    field: str
    subject: str
    select: Select
    parse: Parse
    status: Literal["published", "preliminary"] | None = None
    on_no_match: Literal["fail", "keep-previous"] = "fail"
    preliminary_when: str | None = None
    note: str | None = None


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    url: str
    publisher: str
    title: str
    document_type: str
    media_type: str
    status: Literal["published", "preliminary"]
    read_on: str | None = None
    notes: str | None = None
    rules: list[Rule] = Field(min_length=1)
    path: Path | None = Field(default=None, exclude=True)

    @cached_property
    def rules_hash(self) -> str:
        """Changes when any rule changes, so extraction results can be reused by (snapshot, rules)."""
        payload = json.dumps([r.model_dump(mode="json") for r in self.rules], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def rule(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise ValidationError(f"source {self.id} has no rule {rule_id!r}")


def load_source(path: Path) -> Source:
    data, doc = load_yaml(path)
    if isinstance(data, dict) and "id" in data:
        # The id becomes part of paths: refuse tricks before anything else looks at it.
        check_slug(data["id"] if isinstance(data["id"], str) else repr(data["id"]), f"source id in {path}")
    validate(data, "source.schema.json", path, doc)
    if data["id"] != path.stem:
        raise ValidationError(f"{path}: at $.id: {data['id']!r} must equal the file name {path.stem!r}")
    vocab = vocabulary()
    seen: set[str] = set()
    for index, rule in enumerate(data["rules"]):
        where = f"{path}: at $.rules[{index}]"
        if rule["id"] in seen:
            raise ValidationError(f"{where}.id: duplicate rule id {rule['id']!r}")
        seen.add(rule["id"])
        spec = vocab.get(rule["field"])
        if spec is None:
            raise ValidationError(f"{where}.field: {rule['field']!r} is not a key of schemas/vocabulary.json")
        kind = rule["parse"]["type"]
        if spec.type != kind:
            raise ValidationError(f"{where}.parse.type: {rule['field']} takes a {spec.type}, the rule parses a {kind}")
        if spec.direction and kind == "quantity" and "direction" not in rule["parse"]:
            raise ValidationError(
                f"{where}.parse.direction: {rule['field']} is a bandwidth: say whether the document states it "
                "per_direction or bidirectional"
            )
    return Source.model_validate({**data, "path": path})


def load_sources(lay: Layout, only: str | None = None) -> list[Source]:
    """All declared sources, sorted by id. `only` must name one of them."""
    if only is not None:
        check_slug(only, "source id")
        path = lay.source_file(only)
        if not path.exists():
            from .errors import UsageError

            raise UsageError(f"no source {only!r}: expected {lay.relative(path)}")
        return [load_source(path)]
    return [load_source(p) for p in sorted(lay.sources_dir.glob("*.yaml"))]
