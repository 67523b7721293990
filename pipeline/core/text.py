"""Text is data: what a user types may hold no control characters (C0, DEL, C1, the bidirectional overrides and
isolates), and what a document holds is shown with them made visible. A character reference (`&#x1b;`) counts
as the character it decodes to: a page decodes it later."""

from __future__ import annotations

import html
import json
import re

from ..formats.common import FORMAT_CHARS

# Tab and newline are layout in text people write (a YAML block scalar, a note): they are kept. So are the line
# and paragraph separators, which end a line as a newline does (str.splitlines, a browser's JavaScript).
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
CONTROL_RE = re.compile(f"[{_CONTROL}]")
CONTROL_OR_LAYOUT_RE = re.compile(f"[{_CONTROL}\t\n\u2028\u2029]")
# What no line of plain text holds: the control characters, the line separators and the invisible format
# characters (with which two names that look the same differ).
NOT_IN_A_LINE_RE = re.compile(f"[{_CONTROL}\u2028\u2029{FORMAT_CHARS}]")
_ONE_LINE_RE = re.compile(f"[{_CONTROL}\t\n\u2028\u2029{FORMAT_CHARS}]")
# A character reference that could decode to anything: decoded before the check, as an HTML parser decodes it
# (BeautifulSoup's turns `&#x1b;` into ESC; Python's html.unescape drops it, so it is not used for numbers).
_REFERENCE_RE = re.compile(r"&(?:#|[A-Za-z])")
_NUMERIC_RE = re.compile(r"&#(?:[xX]0*([0-9a-fA-F]{1,8})|0*([0-9]{1,9}));?")


def _decoded(value: str) -> str:
    def char(match: re.Match[str]) -> str:
        code = int(match.group(1), 16) if match.group(1) else int(match.group(2))
        return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"

    return html.unescape(_NUMERIC_RE.sub(char, value))


def control_problem(value: str, *, layout_ok: bool = True) -> str | None:
    """Why `value` is not text a user may declare, or None; `layout_ok=False` also refuses tab, newline and the
    invisible format characters."""
    pattern = CONTROL_RE if layout_ok else _ONE_LINE_RE
    for text, how in ((value, ""), (_decoded(value) if _REFERENCE_RE.search(value) else value, " (decoded)")):
        found = pattern.search(text)
        if found:
            return (
                f"holds {named(found.group())}{how}; expected plain text "
                "(no terminal, bidirectional, invisible or other control characters)"
            )
    return None


def named(char: str) -> str:
    """`char` named for a message: `the control character U+001B ␛`, `the invisible format character U+200B`."""
    kind = "control" if CONTROL_OR_LAYOUT_RE.match(char) else "invisible format"
    shown = f" {_glyph(char)}" if ord(char) < 0x20 or ord(char) == 0x7F else ""
    return f"the {kind} character U+{ord(char):04X}{shown}"


def _glyph(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␛ for ESC, ␀ for NUL
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


_VISIBLE = {code: _glyph(chr(code)) for code in [*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F)]}
_VISIBLE |= {code: _glyph(chr(code)) for code in [*range(0x2066, 0x206A), 0x2028, 0x2029]}
_KEEP_LAYOUT = {k: v for k, v in _VISIBLE.items() if k not in (0x09, 0x0A, 0x2028, 0x2029)}


def visible(value: str, *, keep_layout: bool = True) -> str:
    """`value` with every control character replaced by a visible stand-in (`\\x1b` → `␛`, U+202E → `<U+202E>`).
    `keep_layout`: tab and newline stay (a table cell may wrap); else they become `␉` and `␊` too."""
    if not CONTROL_OR_LAYOUT_RE.search(value):
        return value
    return value.translate(_KEEP_LAYOUT if keep_layout else _VISIBLE)


# JSON keeps the data exact: these are written as \u escapes, which decode to the same characters, instead of
# raw (json.dumps with ensure_ascii=False leaves DEL, C1 and the bidirectional controls raw).
_JSON_RAW_RE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def json_safe(text: str) -> str:
    """JSON text with the control characters json.dumps leaves raw written as \\u escapes (same data)."""
    return _JSON_RAW_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_NON_ASCII_RE = re.compile("[^\x00-\x7f]")


def json_ascii(text: str) -> str:
    """JSON text with every non-ASCII character as a \\u escape, as json.dumps writes it by default."""
    return _NON_ASCII_RE.sub(lambda m: json.dumps(m.group())[1:-1], text)
