"""Apply one declarative rule to a parsed document. Pure: bytes in, a parsed value or an error out. HTML is only
parsed (html.parser), never rendered or executed; scripts and styles are ignored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core import patterns
from ..core.sources import Rule
from ..core.text import visible
from ..core.units import parse_number, parse_quantity, unit_info
from ..core.vocabulary import FieldSpec
from ..errors import ExtractionError, ValidationError

if TYPE_CHECKING:  # the HTML parser is imported when a document is parsed
    from bs4 import BeautifulSoup, Tag

EXCERPT_LIMIT = 400


@dataclass(frozen=True)
class Parsed:
    """What a rule read: the value in the vocabulary's unit, plus where and what the document says."""

    value_number: float | None
    value_text: str
    unit: str | None
    direction: str | None
    stated: str
    locator: str
    excerpt: str


def parse_document(data: bytes) -> BeautifulSoup:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    return soup


def _text(tag: Tag) -> str:
    """An element's text, whitespace collapsed, control characters made visible (`␛` for ESC: the parser has
    decoded `&#x1b;` by now): document text is data, and no byte of it may drive a terminal or a page later."""
    return visible(" ".join(tag.get_text(" ", strip=True).split()), keep_layout=False)


def _locator(tag: Tag) -> str:
    """A CSS path from the root to the element: stable for the same document, readable by people."""
    from bs4 import Tag

    parts = []
    node: Tag | None = tag
    while node is not None and node.name not in (None, "[document]"):
        if node.get("id"):
            parts.append(f"{node.name}#{node['id']}")
            break
        parent = node.parent
        if parent is None:
            parts.append(node.name)
            break
        same = parent.find_all(node.name, recursive=False)
        parts.append(f"{node.name}:nth-of-type({same.index(node) + 1})" if len(same) > 1 else node.name)
        node = parent if isinstance(parent, Tag) else None
    return " > ".join(reversed(parts))


def _where(source_id: str, rule: Rule, revision: int | None) -> str:
    rev = f" revision {revision}" if revision is not None else ""
    return f"source {source_id}{rev} rule {rule.id} ({rule.select.describe()})"


def _select(soup: BeautifulSoup, rule: Rule, where: str) -> tuple[Tag, Tag]:
    """Returns (element for the locator and excerpt, element holding the value)."""
    from soupsieve import SelectorSyntaxError

    scope: Tag = soup
    try:
        if rule.select.within:
            scopes = soup.select(rule.select.within)
            if len(scopes) != 1:
                raise ExtractionError(
                    f"{where}: 'within' {rule.select.within!r} matched {len(scopes)} elements; expected 1"
                )
            scope = scopes[0]
        if rule.select.css:
            matches = [(m, m) for m in scope.select(rule.select.css)]
        else:
            label = " ".join(str(rule.select.row).split()).casefold()
            matches = []
            for row in scope.find_all("tr"):
                cells = row.find_all(["th", "td"], recursive=False)
                if len(cells) >= 2 and _text(cells[0]).casefold() == label:
                    matches.append((row, cells[-1]))
    except SelectorSyntaxError as exc:
        raise ExtractionError(f"{where}: invalid CSS selector: {exc}") from None
    if not matches:
        raise ExtractionError(f"{where}: matched nothing; expected one element")
    if len(matches) > 1 and rule.select.expect == "one":
        raise ExtractionError(f"{where}: matched {len(matches)} elements; expected exactly one")
    return matches[0]


def apply(soup: BeautifulSoup, rule: Rule, spec: FieldSpec, source_id: str, revision: int | None = None) -> Parsed:
    where = _where(source_id, rule, revision)
    anchor, holder = _select(soup, rule, where)
    text = _text(holder)
    excerpt = _text(anchor)[:EXCERPT_LIMIT]
    if not excerpt:
        raise ExtractionError(f"{where}: the matched element has no text")
    value_text, unit_text = text, None
    if rule.parse.pattern:
        try:
            match = patterns.search(rule.parse.pattern, text, f"{where}: parse.pattern")
        except ValidationError as exc:
            raise ExtractionError(str(exc)) from None
        if not match:
            raise ExtractionError(
                f"{where}: value does not parse: pattern {rule.parse.pattern!r} not found in {text!r}"
            )
        groups = match.groupdict()
        value_text = groups.get("value") or (match.group(1) if match.groups() else match.group(0))
        unit_text = groups.get("unit")
    value_text = value_text.strip()
    try:
        read = _read(rule, spec, value_text, unit_text)
    except ValidationError as exc:
        raise ExtractionError(f"{where}: value does not parse: {exc}") from None
    return Parsed(*read, _locator(anchor), excerpt)


def _read(
    rule: Rule, spec: FieldSpec, value_text: str, unit_text: str | None
) -> tuple[float | None, str, str | None, str | None, str]:
    """The value as the rule types it: number, text, unit and direction in the vocabulary's terms, as stated."""
    if rule.parse.type == "text":
        if not value_text:
            raise ValidationError("empty text")
        return None, value_text, None, None, value_text
    if rule.parse.type == "count":
        number = parse_number(value_text)
        if number < 0 or number != int(number):
            raise ValidationError(f"{value_text!r} is not a whole, non-negative count")
        return number, value_text, "count", None, value_text
    if unit_text and rule.parse.unit and unit_info(unit_text) != unit_info(rule.parse.unit):
        # The document's own unit is what it states; a rule that expected another one is out of date.
        raise ValidationError(
            f"the document states {unit_text!r} but the rule declares unit {rule.parse.unit!r}; "
            "fix the rule (the claim records the unit the document states)"
        )
    unit = unit_text or rule.parse.unit
    if not unit:
        raise ValidationError("no unit: add a 'unit' group to the pattern or parse.unit to the rule")
    stated = parse_quantity(f"{value_text} {unit}", rule.parse.direction)
    if stated.value < 0:
        raise ValidationError(f"{value_text!r} is negative")
    canonical = stated.to(spec.unit or unit, spec.direction)
    return canonical.value, f"{value_text} {unit}", canonical.unit, canonical.direction, str(stated)
