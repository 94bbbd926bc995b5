"""Parse one command unit with bashlex; None when it cannot (the rules then leave the unit as is)."""
from __future__ import annotations

import shlex
import sys
import time
from typing import Iterator

import bashlex
from bashlex import ast

from lab.scoring.equiv.cache import SizedCache

# Parsed units kept, by the characters of their text: a parse tree holds about 90 bytes a character,
# so this is about 100 MB at most (an entry count let a hostile server's long units take gigabytes).
PARSE_CACHE_CHARS = 1 << 20
_parsed = SizedCache(PARSE_CACHE_CHARS)
# Characters with no grammar of their own in bash (no quoting, expansion, operator, brace
# expansion or comment): a unit made only of these is its whitespace-separated words, so the
# rules need no parser for it. Globs (*?[]) stay words; `~` is handled by the cd rule itself.
PLAIN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 \t@%+=:,./_-~*?[]^")


OPERATOR_CHARS = "&;|"


def plain_tokens(text: str) -> list[str] | None:
    """Words and control operators (`&&`, `;`, `|`, …) of a unit whose only grammar is those
    operators (no quoting, expansion, redirection), via the stdlib's shell lexer; else None."""
    if not PLAIN_CHARS.union(OPERATOR_CHARS).issuperset(text):
        return None
    lexer = shlex.shlex(text, posix=True, punctuation_chars=OPERATOR_CHARS)
    lexer.whitespace_split = True
    return list(lexer)


def is_operator(token: str) -> bool:
    return bool(token) and set(token) <= set(OPERATOR_CHARS)


def plain_words(text: str) -> list[str] | None:
    """The words of a unit that uses no shell grammar at all, else None (ask the parser)."""
    if not PLAIN_CHARS.issuperset(text):
        return None
    return text.split()


def parse_unit(text: str) -> ast.node | None:
    """The single top-level bashlex node of `text`, or None (empty, several, or a parse error:
    heredoc openers, arithmetic, unbalanced quotes, prose …); cached by text."""
    return _parsed.get_or_make(text, lambda: _parse_unit(text), len(text))


def _parse_unit(text: str) -> ast.node | None:
    if not text.strip():
        return None
    nodes = _parse(text)
    if nodes is None:
        nodes = _parse_heredoc_opener(text)
    if nodes is None:
        return None
    if len(nodes) != 1 or not isinstance(nodes[0], ast.node):  # a comment parses to a bare str
        return None
    return nodes[0]


# Command and parameter substitutions: bashlex parses their text again, and there it can loop for good,
# its memory and each turn's work growing (`` `}'${'` `` never returns). A unit holding one is parsed
# under a budget of Python calls (real units need about 8-40 a character) and of seconds; past either
# the unit is left to no rule, as one bashlex cannot parse.
NESTED = ("`", "$(", "${")
CALLS_PER_CHAR, BASE_CALLS = 50, 2_000  # the published runs' units: at most 24 a character, 1,894 in all
SECONDS_PER_CHAR, BASE_SECONDS = 0.0005, 1.0
CHECK_EVERY = 256  # calls between looks at the clock


class _OverBudget(Exception):
    """bashlex called more functions than any parse of this text needs: it loops."""


def _parse(text: str) -> list | None:
    try:
        if any(n in text for n in NESTED):
            return _bounded(bashlex.parse, text, BASE_CALLS + CALLS_PER_CHAR * len(text),
                            BASE_SECONDS + SECONDS_PER_CHAR * len(text))
        return bashlex.parse(text)
    except Exception:  # bashlex raises ParsingError, NotImplementedError, IndexError, …; _OverBudget
        return None


def _bounded(parse, text: str, budget: int, seconds: float):
    """`parse(text)`, stopped with _OverBudget after `budget` Python calls or `seconds` (in this thread
    only; the profiler in place before, e.g. a benchmark's, is put back)."""
    calls = 0
    before = sys.getprofile()
    deadline = time.monotonic() + seconds

    def count(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1
            if calls > budget or (calls % CHECK_EVERY == 0 and time.monotonic() > deadline):
                raise _OverBudget(text[:40])

    sys.setprofile(count)
    try:
        return parse(text)
    finally:
        sys.setprofile(before)


def _parse_heredoc_opener(text: str) -> list | None:
    """Parse a unit that opens a heredoc (`cd /app && cat > f << 'EOF'`): its body lines are
    separate units, so an empty body is appended. bashlex wants the terminator spelled as written
    after `<<`, quotes included, so each spelling is tried."""
    from lab.scoring.equiv.heredoc import heredoc_delimiter

    delimiter = heredoc_delimiter(text)
    if not delimiter:
        return None
    for spelling in (delimiter, f"'{delimiter}'", f'"{delimiter}"'):
        nodes = _parse(f"{text}\n{spelling}\n")
        if nodes is not None:
            return nodes
    return None


def simple_command(node: ast.node | None) -> ast.node | None:
    """`node` when it is one command made only of words (no redirections, assignments, …)."""
    if node is None or node.kind != "command":
        return None
    if not all(p.kind == "word" for p in node.parts):
        return None
    return node


def commands_in(node: ast.node) -> Iterator[ast.node]:
    """The command nodes of a pipeline or list, in source order (not inside compound commands)."""
    if node.kind == "command":
        yield node
    elif node.kind in ("pipeline", "list"):
        for part in node.parts:
            yield from commands_in(part)


def is_plain_word(word: ast.node) -> bool:
    """A word without expansions ($x, $(…), globs are fine: bashlex keeps them in `word`)."""
    return word.kind == "word" and not getattr(word, "parts", None)


def source_of(text: str, node: ast.node) -> str:
    """The exact source text of a node."""
    start, end = node.pos
    return text[start:end]


def replace_spans(text: str, spans: list[tuple[int, int, str]]) -> str:
    """`text` with each (start, end) span replaced, spans given in any order, not overlapping
    (joined once: a unit with thousands of quoted words is not copied once per word)."""
    pieces, at = [], 0
    for start, end, new in sorted(spans):
        pieces += [text[at:start], new]
        at = end
    return "".join(pieces) + text[at:]
