"""Stored command units: a list of strings, or the Python repr of one, decoded without evaluating code."""
from __future__ import annotations

import re

from lab.jsontext import lone_surrogate

_STRING = r"'(?:[^'\\\r\n]|\\[^\r\n])*'" + "|" + r'"(?:[^"\\\r\n]|\\[^\r\n])*"'
STRING_LITERAL = re.compile(_STRING)
# the Python repr of a list (or tuple) of strings, e.g. `['ls -la', "cat 'a b'"]`; nothing else
UNITS_REPR = re.compile(rf"\[\s*(?:(?:{_STRING})\s*,\s*)*(?:(?:{_STRING})\s*)?\]|\(\s*(?:(?:{_STRING})\s*,\s*)*(?:(?:{_STRING})\s*)?\)")
MAX_UNITS_TEXT = 8 * 2**20  # characters of one stored unit string; larger means a broken file


def _decode_literal(literal: str) -> str:
    """One Python string literal's value (escapes as Python reads them), without evaluating code."""
    body = literal[1:-1]
    if "\\" not in body:
        return body
    # unicode_escape reads Latin-1 bytes: escape everything beyond Latin-1 first so it round-trips
    value = body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    if lone_surrogate(value) is not None:  # Python reads `'\ud800'`, but no UTF-8 file can hold it again
        raise ValueError("a command unit holds a lone UTF-16 surrogate (\\uD800-\\uDFFF)")
    return value


def coerce_units(value: object) -> list[str]:
    """Return stored command units as a list of strings.

    Some stored rows keep the units as the Python repr of a list (`"['ls', 'pwd']"`); those are
    decoded by a small grammar (a list or tuple of quoted strings), never by evaluating the text,
    so a recursive or huge string cannot exhaust the stack or memory. Any other string is one unit.
    None becomes [].
    """
    if value is None:
        return []
    if isinstance(value, str):
        if len(value) > MAX_UNITS_TEXT:
            raise ValueError(f"command units string is {len(value):,} characters (limit {MAX_UNITS_TEXT:,})")
        text = value.strip()
        if not text:
            return []
        if UNITS_REPR.fullmatch(text):
            try:
                return [_decode_literal(m.group(0)) for m in STRING_LITERAL.finditer(text)]
            except UnicodeDecodeError:
                pass  # an escape Python would not accept: keep the text as one unit
        return [value]
    if isinstance(value, (list, tuple)):
        return [str(u) for u in value]
    raise ValueError(f"command units must be a list, got {type(value).__name__}")
