"""Find heredoc bodies among a step's units: those lines are text, not commands."""
from __future__ import annotations

import shlex


def heredoc_delimiter(text: str) -> str | None:
    """The delimiter a unit opens a heredoc with (`cat > f << 'EOF'` -> `EOF`), else None.

    Uses shlex's shell-punctuation lexer, so `<<` inside quotes is not an opener.
    """
    if "<<" not in text:
        return None
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    for i, token in enumerate(tokens[:-1]):
        if token in ("<<", "<<-"):
            return tokens[i + 1].lstrip("-") or None  # `<<-EOF` lexes as `<<`, `-EOF`
        if token == "<<<":  # a here-string, not a heredoc
            return None
    return None


def literal_flags(units: list[str]) -> list[bool]:
    """Per unit: True for heredoc body lines (between an opener and its delimiter line)."""
    flags: list[bool] = []
    delimiter: str | None = None
    for unit in units:
        if delimiter is not None:
            if unit.strip() == delimiter:
                delimiter = None
                flags.append(False)
            else:
                flags.append(True)
            continue
        flags.append(False)
        delimiter = heredoc_delimiter(unit)
    return flags
