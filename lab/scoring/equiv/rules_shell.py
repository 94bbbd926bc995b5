"""Rules that need the shell's grammar (bashlex): chains, quoting, flag bundling."""
from __future__ import annotations

import shlex
from typing import Mapping

from lab.scoring.equiv.config import load_config
from lab.scoring.equiv.registry import Params, unit_rule
from lab.scoring.equiv.shell import (
    commands_in,
    is_plain_word,
    is_operator,
    parse_unit,
    plain_tokens,
    replace_spans,
    simple_command,
    source_of,
)


@unit_rule("split_chains")
def split_chains(text: str, params: Params) -> list[str]:
    """`a && b` and `a; b` become the units `a` and `b` (kept whole if any other operator is used)."""
    allowed = set(params.get("operators", ("&&", ";")))
    if not any(op in text for op in allowed):  # nothing to split: spare the parser
        return [text]
    tokens = plain_tokens(text)
    if tokens is not None:  # operators are its only grammar
        return _split_tokens(tokens, allowed) or [text]
    node = parse_unit(text)
    if node is None or node.kind != "list":
        return [text]
    operators = [p for p in node.parts if p.kind == "operator"]
    if not operators or any(op.op not in allowed for op in operators):
        return [text]
    pieces = [source_of(text, p).strip() for p in node.parts if p.kind != "operator"]
    return [p for p in pieces if p] or [text]


def _split_tokens(tokens: list[str], allowed: set[str]) -> list[str] | None:
    """Pieces between the operators of a plain token list; None when another operator is used."""
    pieces: list[list[str]] = [[]]
    for token in tokens:
        if not is_operator(token):
            pieces[-1].append(token)
        elif token in allowed:
            pieces.append([])
        else:
            return None
    return [" ".join(p) for p in pieces if p] or None


QUOTE_CHARS = ("'", '"', "\\")


def canonical_word(word: str, bare_chars: frozenset[str]) -> str:
    """How a quoted word is written canonically: bare when nothing in it is special, else single-quoted."""
    if word and all(c in bare_chars for c in word):
        return word
    return shlex.quote(word)


@unit_rule("quoting", token_neutral=True)
def quoting(text: str, params: Params) -> list[str]:
    """Quoting that does not change meaning goes: `cat 'a.txt'` = `cat "a.txt"` = `cat a.txt`."""
    if not any(c in text for c in QUOTE_CHARS):  # nothing quoted: spare the parser
        return [text]
    node = parse_unit(text)
    if node is None:
        return [text]
    bare = frozenset(params.get("bare_chars", ""))
    spans = []
    for command in commands_in(node):
        for word in command.parts:
            if not is_plain_word(word):
                continue
            source = source_of(text, word)
            if source != word.word:  # quoted or escaped somewhere
                new = canonical_word(word.word, bare)
                if new != source:
                    spans.append((*word.pos, new))
    return [replace_spans(text, spans)] if spans else [text]


def _short_flags(word: str) -> str | None:
    """The letters of a short-flag word (`-la` -> `la`), None for anything else (`--all`, `-`, `-5`)."""
    if len(word) < 2 or word[0] != "-" or word[1] == "-":
        return None
    letters = word[1:]
    return letters if letters.isascii() and letters.isalpha() else None


def bundle_flags(words: list[str], value_flags: str) -> list[str] | None:
    """`cmd -l x -a` -> `cmd -al x`: boolean short flags bundled, sorted and put first.

    A word whose letters include a value flag keeps its place with its argument, unless the value
    flag is its last letter (`-xzvf f` -> `-vxz -f f`). Words after `--` are never flags. None when
    there is nothing to do.
    """
    flags: list[str] = []
    rest: list[str] = []
    i, n = 1, len(words)
    while i < n:
        word = words[i]
        if word == "--":
            rest += words[i:]
            break
        letters = _short_flags(word)
        if letters is None:
            rest.append(word)
        elif not any(c in value_flags for c in letters):
            flags += letters
        elif letters[-1] in value_flags and not any(c in value_flags for c in letters[:-1]):
            flags += letters[:-1]
            rest.append("-" + letters[-1])
            if i + 1 < n:
                rest.append(words[i + 1])
                i += 1
        else:  # a value flag inside a bundle: leave this word and its argument as they are
            rest.append(word)
            if i + 1 < n:
                rest.append(words[i + 1])
                i += 1
        i += 1
    if not flags:
        return None
    return [words[0], "-" + "".join(sorted(flags)), *rest]


def _may_run_listed(text: str, table: Mapping[str, object]) -> bool:
    """Cheap, conservative guard: some word of the unit names a listed command."""
    return any(w.lstrip("|;&(") in table for w in text.split())


def _bundle_plain(tokens: list[str], table: Mapping[str, object]) -> str | None:
    """A plain token list with each listed command's flags bundled; None when nothing changed."""
    out: list[str] = []
    changed = False
    segment: list[str] = []
    for token in [*tokens, ""]:
        if token and not is_operator(token):
            segment.append(token)
            continue
        spec = table.get(segment[0]) if segment else None
        bundled = None if spec is None and not (segment and segment[0] in table) else bundle_flags(
            segment, str((spec or {}).get("value_flags", "")))
        changed |= bundled is not None
        out += (bundled if bundled is not None else segment) + ([token] if token else [])
        segment = []
    return " ".join(out) if changed else None


@unit_rule("flags")
def flags(text: str, params: Params) -> list[str]:
    """Short flags of listed commands in one sorted bundle: `ls -la` = `ls -al` = `ls -l -a`."""
    table = params.get("commands") or {}
    if "-" not in text or not _may_run_listed(text, table):  # spare the parser
        return [text]
    tokens = plain_tokens(text)
    if tokens is not None:  # operators are its only grammar: bundle each command between them
        out = _bundle_plain(tokens, table)
        return [out] if out is not None else [text]
    node = parse_unit(text)
    if node is None:
        return [text]
    spans = []
    for command in commands_in(node):
        if simple_command(command) is None or not all(is_plain_word(w) for w in command.parts):
            continue
        name = command.parts[0].word
        if name not in table:
            continue
        # each word as the quoting rule would write it: `'-la'` is the flag -la, `'a b'` stays quoted
        bare = frozenset(load_config().params_of("quoting").get("bare_chars", ""))
        sources = [source_of(text, w) if source_of(text, w) == w.word else canonical_word(w.word, bare)
                   for w in command.parts]
        spec = table[name] or {}
        bundled = bundle_flags(sources, str(spec.get("value_flags", "")))
        if bundled is not None:
            spans.append((command.pos[0], command.pos[1], " ".join(bundled)))
    return [replace_spans(text, spans)] if spans else [text]
