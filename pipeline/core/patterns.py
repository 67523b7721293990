"""Regular expressions written in declarative files (rule `parse.pattern`, `preliminary_when`): screened when
the file is loaded and run with a time limit, so a pattern cannot hang `extract` (catastrophic backtracking)."""

from __future__ import annotations

import re
from typing import Any

import regex

from ..errors import ValidationError

MAX_PATTERN_LENGTH = 500
# Generous for one element's text (microseconds in practice); a pathological pattern stops here.
MATCH_TIMEOUT_SECONDS = 1.0
MAX_SUBJECT_LENGTH = 100_000


def _nested_unbounded(items: Any, inside: bool) -> bool:
    """True when an unbounded repeat (`*`, `+`, `{n,}`) holds another one, at any depth: `(a+)+`, `(\\d*x?)*`."""
    from re import _constants as c  # type: ignore[attr-defined]

    for op, arg in items:
        children: list[Any] = []
        now_inside = inside
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            if arg[1] == c.MAXREPEAT:
                if inside:
                    return True
                now_inside = True
            children = [arg[2]]
        elif op == c.SUBPATTERN:
            children = [arg[-1]]
        elif op == c.BRANCH:
            children = list(arg[1])
        elif op in (c.ASSERT, c.ASSERT_NOT):
            children = [arg[1]]
        elif op == c.ATOMIC_GROUP:
            children = [arg]
        elif op == c.GROUPREF_EXISTS:
            children = [sub for sub in arg[1:] if sub is not None]
        if any(_nested_unbounded(child, now_inside) for child in children):
            return True
    return False


def problem(pattern: str) -> str | None:
    """Why a pattern is refused: it does not compile, is too long, or nests unbounded quantifiers (whose matching
    time can grow exponentially with the text); None when it is fine."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"pattern longer than {MAX_PATTERN_LENGTH} characters"
    try:
        from re import _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(pattern)
        regex.compile(pattern)
    except (re.error, regex.error, RecursionError, OverflowError) as exc:
        return f"invalid regular expression {pattern!r}: {exc}"
    if _nested_unbounded(parsed, False):
        return (
            f"{pattern!r} nests unbounded quantifiers (like (a+)+ or (\\d*,?)*), which can take exponential "
            "time; write it with one quantifier per repeated part"
        )
    return None


def search(pattern: str, text: str, where: str) -> regex.Match[str] | None:
    """`re.search` semantics, with a time limit and a bounded subject; a timeout is an error naming `where`."""
    if len(text) > MAX_SUBJECT_LENGTH:
        raise ValidationError(f"{where}: text of {len(text)} characters is longer than {MAX_SUBJECT_LENGTH}")
    try:
        return regex.search(pattern, text, timeout=MATCH_TIMEOUT_SECONDS)
    except TimeoutError:
        raise ValidationError(
            f"{where}: pattern {pattern!r} took longer than {MATCH_TIMEOUT_SECONDS:g} s; simplify it"
        ) from None
    except (regex.error, RecursionError) as exc:
        raise ValidationError(f"{where}: invalid regular expression {pattern!r}: {exc}") from None
