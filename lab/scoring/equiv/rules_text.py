"""Rules on the text of a unit: trailing newline escapes, key names, whitespace."""
from __future__ import annotations

from lab.scoring.equiv.registry import Params, unit_rule
from lab.scoring.tokens import normalize_unit
from lab.scoring.units import WAIT_UNIT


@unit_rule("trailing_newlines")
def trailing_newlines(text: str, params: Params) -> list[str]:
    """Drop trailing newline escapes typed literally (`ls -la\\n`); nothing left is `<WAIT>`."""
    escapes = tuple(params.get("escapes", ("\\n", "\\r")))
    out = text.rstrip()
    while escapes and out.endswith(escapes):
        out = next(out[: -len(e)] for e in escapes if out.endswith(e)).rstrip()
    return [out or WAIT_UNIT]


@unit_rule("keystrokes")
def keystrokes(text: str, params: Params) -> list[str]:
    """Spell a control keystroke the tmux way: `^C`, `Ctrl-C`, `ctrl+c`, `C-C` are all `C-c`."""
    stripped = text.strip()
    aliases = params.get("aliases") or {}
    if stripped in aliases:
        return [str(aliases[stripped])]
    lowered = stripped.lower()
    for prefix in params.get("ctrl_prefixes", ("C-",)):
        rest = stripped[len(prefix):]
        if lowered.startswith(str(prefix).lower()) and len(rest) == 1 and rest.isalpha():
            return ["C-" + rest.lower()]
    return [text]


@unit_rule("whitespace", token_neutral=True)
def whitespace(text: str, params: Params) -> list[str]:
    """Trim and collapse whitespace runs, exactly as the harness normalises a unit."""
    return [normalize_unit(text)]
