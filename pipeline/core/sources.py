"""Declared sources (`sources/<id>.yaml`): loaded, schema-checked and turned into typed models."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from ..errors import ValidationError
from ..formats.source import CssSelect, Parse, RowSelect, Rule, Select, SourceFile
from . import patterns
from .paths import Layout, check_slug
from .schemas import _line_of, json_path, load_model, load_yaml
from .urls import url_problem
from .vocabulary import vocabulary

__all__ = ["CssSelect", "Parse", "RowSelect", "Rule", "Select", "Source", "load_source", "load_sources"]


class Source(SourceFile):
    """A declared source as loaded: its format (pipeline/formats/source.py) plus the file it came from."""

    path: SkipJsonSchema[Path | None] = Field(default=None, exclude=True)

    def rule(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise ValidationError(f"source {self.id} has no rule {rule_id!r}")


def _checkout_of(path: Path) -> Layout | None:
    """The checkout a source file sits in (`<root>/sources/<id>.yaml`), when it is one."""
    root = path.resolve().parent.parent
    return Layout(root) if path.resolve().parent.name == "sources" and (root / "schemas").is_dir() else None


def load_source(path: Path, lay: Layout | None = None) -> Source:
    """One source file, checked against its format and the vocabulary of `lay` (else of its checkout)."""
    data, doc = load_yaml(path)
    if isinstance(data, dict) and "id" in data:
        # The id becomes part of paths: refuse tricks before anything else looks at it.
        check_slug(data["id"] if isinstance(data["id"], str) else repr(data["id"]), f"source id in {path}")
    source = load_model(SourceFile, data, "source.schema.json", path, doc)
    if source.id != path.stem:
        raise ValidationError(f"{path}: at $.id: {source.id!r} must equal the file name {path.stem!r}")
    problem = url_problem(source.url) if source.url is not None else None
    if problem:
        raise ValidationError(f"{path}: at $.url: {source.url!r} {problem}")
    vocab = vocabulary(lay or _checkout_of(path))
    seen: set[str] = set()
    for index, rule in enumerate(source.rules):
        where = f"{path}: at $.rules[{index}]"
        if rule.id in seen:
            raise ValidationError(f"{where}.id: duplicate rule id {rule.id!r}")
        seen.add(rule.id)
        spec = vocab.get(rule.field)
        if spec is None:
            raise ValidationError(f"{where}.field: {rule.field!r} is not a key of schemas/vocabulary.json")
        kind = rule.parse.type
        if spec.type != kind:
            raise ValidationError(f"{where}.parse.type: {rule.field} takes a {spec.type}, the rule parses a {kind}")
        for parts, pattern in (
            (["rules", index, "parse", "pattern"], rule.parse.pattern),
            (["rules", index, "preliminary_when"], rule.preliminary_when),
        ):
            refused = patterns.problem(pattern) if pattern is not None else None
            if refused:
                line = _line_of(doc, parts)
                at = f"{path}:{line}: at {json_path(parts)}" if line else f"{path}: at {json_path(parts)}"
                raise ValidationError(f"{at}: {refused}")
        if spec.direction and kind == "quantity" and rule.parse.direction is None:
            raise ValidationError(
                f"{where}.parse.direction: {rule.field} is a bandwidth: say whether the document states it "
                "per_direction or bidirectional"
            )
    return Source.model_validate({**data, "path": path})


def load_sources(lay: Layout, only: str | None = None) -> list[Source]:
    """All declared sources, sorted by id. `only` must name one of them."""
    if only is not None:
        check_slug(only, "source id")
        path = lay.source_file(only)
        if not path.exists():
            from ..errors import UsageError

            raise UsageError(f"no source {only!r}: expected {lay.relative(path)}")
        return [load_source(path, lay)]
    return [load_source(p, lay) for p in sorted(lay.sources_dir.glob("*.yaml"))]
