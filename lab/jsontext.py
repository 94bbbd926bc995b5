"""Decode untrusted JSON text safely: UTF-8 with an optional BOM, bounded nesting, located non-finite numbers."""
from __future__ import annotations

import json
import math
import re
from typing import Iterator

# Deepest nesting accepted (a result file needs about 6 levels, a replay record about 4). Deeper
# input is refused before any recursive code (json.dumps, copies, the UI) could touch it.
MAX_DEPTH = 64
BOM = "\ufeff"
# a `\uD800`-`\uDFFF` escape: JSON allows it, but a lone one cannot be written back as UTF-8
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")

Loc = tuple[str | int, ...]


class JsonTextError(ValueError):
    """Text that is not usable JSON; the message says why, without naming the input (the caller does)."""


def decode_utf8(data: bytes) -> str:
    """Bytes as UTF-8 text (a leading BOM dropped); JsonTextError names the first bad byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise JsonTextError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line} column {column})"
        ) from None
    return text[1:] if text.startswith(BOM) else text


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> object:
    """`json.loads` that never raises anything but JsonTextError (bad UTF-8, bad JSON, too deep)."""
    if isinstance(text, (bytes, bytearray)):
        text = decode_utf8(bytes(text))
    elif text.startswith(BOM):
        text = text[1:]
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonTextError(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise JsonTextError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:  # an integer literal past Python's digit limit (4300 digits)
        raise JsonTextError(too_long_number(exc)) from None
    check_decoded(text, value, max_depth)
    return value


def too_long_number(exc: ValueError) -> str:
    """One line for json's refusal of an integer longer than `sys.get_int_max_str_digits()`."""
    import sys

    return f"a number longer than {sys.get_int_max_str_digits()} digits ({str(exc).split(';')[0]})"


def check_decoded(text: str, value: object, max_depth: int = MAX_DEPTH) -> None:
    """JsonTextError when a decoded value is nested too deep or holds a lone surrogate (`\ud800`)."""
    deep = too_deep(value, max_depth)
    if deep is not None:
        raise JsonTextError(f"nested deeper than {max_depth} levels (at {format_loc(deep)})")
    if SURROGATE_ESCAPE.search(text):
        loc = lone_surrogate(value)
        if loc is not None:
            raise JsonTextError(f"a string at {format_loc(loc)} holds a lone UTF-16 surrogate (\\uD800-\\uDFFF)")


def lone_surrogate(value: object) -> Loc | None:
    """The location of the first string (or key) holding a lone surrogate, else None."""
    stack: list[tuple[object, Loc]] = [(value, ())]
    while stack:
        item, loc = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return loc
        elif isinstance(item, dict):
            for k, v in item.items():
                if _SURROGATE.search(k):
                    return loc
                stack.append((v, (*loc, k)))
        elif isinstance(item, list):
            stack.extend((v, (*loc, i)) for i, v in enumerate(item))
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def too_deep(value: object, max_depth: int = MAX_DEPTH) -> Loc | None:
    """The location of the first container nested deeper than `max_depth`, else None (no recursion)."""
    stack: list[tuple[object, Loc]] = [(value, ())]
    while stack:
        item, loc = stack.pop()
        if len(loc) >= max_depth:
            return loc
        if isinstance(item, dict):
            stack.extend((v, (*loc, k)) for k, v in item.items() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, (*loc, i)) for i, v in enumerate(item) if isinstance(v, (dict, list)))
    return None


def non_finite(value: object) -> Iterator[tuple[Loc, float]]:
    """Every NaN / ±Infinity number inside `value`, with its location, in document order."""
    stack: list[tuple[object, Loc]] = [(value, ())]
    while stack:
        item, loc = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                yield loc, item
        elif isinstance(item, dict):
            stack.extend(reversed([(v, (*loc, k)) for k, v in item.items() if isinstance(v, (dict, list, float))]))
        elif isinstance(item, list):
            stack.extend(reversed([(v, (*loc, i)) for i, v in enumerate(item) if isinstance(v, (dict, list, float))]))


def format_loc(loc: Loc) -> str:
    """`('sampling', 'llm_kwargs', 0)` → `sampling.llm_kwargs[0]`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{one_line(part)}" if out else one_line(part))
    return out or "(top level)"


def one_line(text: object, limit: int = 80) -> str:
    """`text` shortened, with line breaks escaped, for a one-line message."""
    text = str(text)
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
