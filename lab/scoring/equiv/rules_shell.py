"""Rules that need the shell's grammar (bashlex): chains, quoting, flag bundling."""
from __future__ import annotations

import heapq
import re
import shlex
from collections import deque
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
    """`a; b` becomes the units `a` and `b`; `a && b` becomes `a` and `&& b`, so the connector's
    meaning survives the re-cut (`b` runs only if `a` succeeded: not the same as `a; b`). A unit
    using any other operator (`||`, `|`, `&`) is kept whole."""
    allowed = set(params.get("operators", (";",))) | set(params.get("conditional", ("&&",)))
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
    pieces: list[str] = []
    connector = ""
    for part in node.parts:
        if part.kind == "operator":
            connector = CONNECTED.get(part.op, "")
            continue
        piece = source_of(text, part).strip()
        if piece:
            pieces.append(connector + piece)
        connector = ""
    return pieces or [text]


# operators whose right-hand side depends on the left one: kept as a prefix of the piece after it
CONNECTED = {"&&": "&& "}


def _split_tokens(tokens: list[str], allowed: set[str]) -> list[str] | None:
    """Pieces between the operators of a plain token list; None when another operator is used."""
    pieces: list[list[str]] = [[]]
    for token in tokens:
        if not is_operator(token):
            pieces[-1].append(token)
        elif token in allowed:
            pieces.append([token] if token in CONNECTED else [])
        else:
            return None
    if any(p == [op] for p in pieces for op in CONNECTED):  # `a && && b`: not a shell list
        return None
    return [" ".join(p) for p in pieces if p] or None


QUOTE_CHARS = ("'", '"', "\\")


def canonical_word(word: str, bare_chars: frozenset[str]) -> str:
    """How a quoted word is written canonically: bare when nothing in it is special, else single-quoted."""
    if word and all(c in bare_chars for c in word):
        return word
    return shlex.quote(word)


# A unit made only of these, blanks and quotes is a simple command of words with no expansion,
# glob, tilde, assignment, escape or operator: its quoted words are found without the shell
# parser (which costs ~40 us a character). tests/scoring/test_equiv_cost.py checks both ways agree.
QUOTED_WORDS_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789@%+:,./_- \t'\"")
_QUOTED_WORD = re.compile(r"(?:[^\s'\"]+|'[^']*'|\"[^\"]*\")+")
_QUOTED_PIECE = re.compile(r"[^\s'\"]+|'([^']*)'|\"([^\"]*)\"")


def quoted_words(text: str) -> list[tuple[int, int, str]] | None:
    """(start, end, value) of each word of a unit of QUOTED_WORDS_CHARS alone, quotes removed from
    the value (as POSIX shlex.split reads it); None for any other unit, or an unclosed quote."""
    if not QUOTED_WORDS_CHARS.issuperset(text):
        return None
    words, at = [], 0
    for match in _QUOTED_WORD.finditer(text):
        if text[at:match.start()].strip(" \t"):
            return None
        value = "".join(m.group(1) if m.group(1) is not None else m.group(2) if m.group(2) is not None else m.group(0)
                        for m in _QUOTED_PIECE.finditer(match.group(0)))
        words.append((match.start(), match.end(), value))
        at = match.end()
    return words if not text[at:].strip(" \t") else None


@unit_rule("quoting", token_neutral=True)
def quoting(text: str, params: Params) -> list[str]:
    """Quoting that does not change meaning goes: `cat 'a.txt'` = `cat "a.txt"` = `cat a.txt`."""
    if not any(c in text for c in QUOTE_CHARS):  # nothing quoted: spare the parser
        return [text]
    bare = frozenset(params.get("bare_chars", ""))
    if QUOTED_WORDS_CHARS.issuperset(text):  # words and quotes only: no parser needed
        words = quoted_words(text)
        spans = _requoted(text, words, bare) if words is not None else []  # None: an unclosed quote
    else:
        spans = parsed_requoting(text, bare)
    return [replace_spans(text, spans)] if spans else [text]


def _requoted(text: str, words: list[tuple[int, int, str]], bare: frozenset[str]) -> list[tuple[int, int, str]]:
    """The spans of quoted or escaped words, each with its canonical spelling where that differs."""
    spans = []
    for start, end, value in words:
        source = text[start:end]
        if source != value:  # quoted or escaped somewhere
            new = canonical_word(value, bare)
            if new != source:
                spans.append((start, end, new))
    return spans


def parsed_requoting(text: str, bare: frozenset[str]) -> list[tuple[int, int, str]]:
    """`_requoted` over the plain words of a unit's commands as the shell parser reads them."""
    node = parse_unit(text)
    if node is None:
        return []
    words = [(*word.pos, word.word) for command in commands_in(node) for word in command.parts if is_plain_word(word)]
    return _requoted(text, words, bare)


def _option_letters(word: str, extra: str) -> str | None:
    """The letters of a short-option word (`-la` -> `la`, `-n5` -> `n5`), None for anything
    else (`--all`, `-`, `-5` unless 5 is one of the command's `digit_flags`)."""
    if len(word) < 2 or word[0] != "-" or word[1] == "-":
        return None
    first = word[1]
    return word[1:] if word[1:].isascii() and (first.isalpha() or first in extra) else None


def _getopt_word(letters: str, value_flags: str, digits: str) -> bool:
    """Whether every letter before the first value letter is a flag letter (alpha or a digit flag)."""
    for c in letters:
        if c in value_flags:
            return True
        if not (c.isalpha() or c in digits):
            return False
    return True


def _group_key(groups: list[str]) -> dict[str, str]:
    """Letter -> the name of its conflict group (its letters, as written in the rules file)."""
    return {c: g for g in groups for c in g}


def _commuting(spec: Mapping[str, object]) -> set[frozenset[str]]:
    """Pairs of letters of one conflict group whose order does not matter (`commute` sets: every two
    letters of a set commute, e.g. ls's `-1` has no effect after `-l`, so `-l -1` = `-1 -l`)."""
    return {frozenset((a, b)) for g in spec.get("commute") or () for a in str(g) for b in str(g) if a != b}


def _ordered(flags: list[str], groups: dict[str, str], commuting: set[frozenset[str]]) -> list[str]:
    """The flags in one canonical order that keeps every conflicting pair as written.

    Two letters conflict when they share a conflict group and are not a `commute` pair (a letter
    repeated counts as conflicting with itself, harmlessly). Among the letters whose conflicting
    predecessors are all placed, the one with the smallest key goes next: (its group, itself) for a
    grouped letter, (itself, itself) otherwise. Orders that differ only by swapping commuting letters
    give the same result (the lexicographic normal form of the trace).

    Only the first unplaced occurrence of a letter can be next (it conflicts with itself), and it is
    ready when no letter it conflicts with has an earlier unplaced occurrence; placing a letter
    changes the readiness of that letter's conflict group only. So each flag costs a few steps over
    its group and a heap of at most one entry per distinct letter: linear in the flags, however many
    (a unit of 8,000 letters took minutes when every pick rescanned the letters left)."""
    def conflict(a: str, b: str) -> bool:
        return a == b or (a in groups and groups.get(b) == groups[a] and frozenset((a, b)) not in commuting)

    letters = sorted(set(flags))
    blockers = {c: [d for d in letters if d != c and conflict(c, d)] for c in letters}
    left: dict[str, deque[int]] = {c: deque() for c in letters}
    for i, c in enumerate(flags):
        left[c].append(i)
    end = len(flags)

    def ready(c: str) -> bool:
        return bool(left[c]) and all((left[d][0] if left[d] else end) > left[c][0] for d in blockers[c])

    heap = [(groups.get(c, c), c) for c in letters if ready(c)]
    heapq.heapify(heap)
    queued = {c for _, c in heap}
    out: list[str] = []
    while heap:  # a queued letter stays ready: placing another only moves that one's next occurrence later
        _, c = heapq.heappop(heap)
        queued.discard(c)
        out.append(c)
        left[c].popleft()
        for d in (c, *blockers[c]):
            if d not in queued and ready(d):
                heapq.heappush(heap, (groups.get(d, d), d))
                queued.add(d)
    return out


def count_shorthand(words: list[str], spec: Mapping[str, object]) -> list[str]:
    """`head -5 f` -> `head -n 5 f`: a first argument `-DIGITS` is the count option of `count_option`
    (GNU head and tail read it so only as the first argument)."""
    option = spec.get("count_option")
    if not option or len(words) < 2 or len(words[1]) < 2 or words[1][0] != "-" or not words[1][1:].isdigit():
        return words
    return [words[0], f"-{option}", words[1][1:], *words[2:]]


def bundle_flags(words: list[str], spec: Mapping[str, object]) -> list[str] | None:
    """`cmd -l x -a` -> `cmd -al x`: boolean short flags bundled, sorted and put first.

    Each word is read as getopt reads it: letters until one that takes a value (`value_flags`),
    whose value is the rest of the word or the next word (`-n5` = `-n 5`); a value option keeps its
    place, written `-n 5`. Letters of one conflict group (`conflicts`: the last one wins, as in
    `rm -fi`) keep their order among themselves unless the rules file says they commute
    (`commute`); if such a letter meets a long option or a value option of its group, nothing
    moves. Words after `--` are never flags. None when nothing to do.
    """
    value_flags = str(spec.get("value_flags", ""))
    digits = str(spec.get("digit_flags", ""))
    groups = _group_key([str(g) for g in spec.get("conflicts") or ()])
    flags: list[str] = []
    rest: list[str] = []
    options_left: list[str] = []  # long options and value letters that stay in place
    changed = False
    i, n = 1, len(words)
    while i < n:
        word = words[i]
        if word == "--":
            rest += words[i:]
            break
        letters = _option_letters(word, digits)
        if letters is None or not _getopt_word(letters, value_flags, digits):
            if word.startswith("--"):
                options_left.append(word)
            rest.append(word)
            i += 1
            continue
        for j, c in enumerate(letters):
            if c in value_flags:
                value = letters[j + 1:]
                if value:
                    changed = True
                elif i + 1 < n:
                    value = words[i + 1]
                    i += 1
                else:
                    return None
                rest += ["-" + c, value]
                options_left.append(c)
                break
            flags.append(c)
        i += 1
    if not flags and not changed:
        return None
    group_of = [groups[c] for c in flags if c in groups]
    clash = any(o.startswith("--") or groups.get(o) in group_of for o in options_left)
    if clash and group_of:
        return None
    bundle = "-" + "".join(_ordered(flags, groups, _commuting(spec))) if flags else None
    return [words[0], *([bundle] if bundle else []), *rest]


def old_style(words: list[str], spec: Mapping[str, object]) -> list[str]:
    """`tar xzf a.tgz` -> `tar -xzf a.tgz` (an old-style first word of letters), only when that
    reads the same: at most one value letter, and it is the last letter."""
    if not spec.get("old_style") or len(words) < 2 or not words[1].isalpha() or not words[1].isascii():
        return words
    value_flags = str(spec.get("value_flags", ""))
    taking = [c for c in words[1] if c in value_flags]
    if len(taking) > 1 or (taking and words[1][-1] != taking[0]):
        return words
    return [words[0], "-" + words[1], *words[2:]]


def _canonical(words: list[str], spec: Mapping[str, object]) -> list[str] | None:
    """A listed command's words with old-style letters made options and flags bundled; None if unchanged."""
    modern = count_shorthand(old_style(words, spec), spec)
    bundled = bundle_flags(modern, spec)
    if bundled is None:
        return modern if modern != words else None
    return bundled


def _may_run_old_style(text: str, table: Mapping[str, object]) -> bool:
    """Some word of the unit names a listed command that takes old-style letters (`tar xzf`)."""
    return any((table.get(w.lstrip("|;&(")) or {}).get("old_style") for w in text.split())


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
        bundled = None if not (segment and segment[0] in table) else _canonical(segment, spec or {})
        changed |= bundled is not None
        out += (bundled if bundled is not None else segment) + ([token] if token else [])
        segment = []
    return " ".join(out) if changed else None


@unit_rule("flags")
def flags(text: str, params: Params) -> list[str]:
    """Short flags of listed commands in one sorted bundle: `ls -la` = `ls -al` = `ls -l -a`."""
    table = params.get("commands") or {}
    if not _may_run_listed(text, table) or ("-" not in text and not _may_run_old_style(text, table)):
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
        bundled = _canonical(sources, table[name] or {})
        if bundled is not None:
            spans.append((command.pos[0], command.pos[1], " ".join(bundled)))
    return [replace_spans(text, spans)] if spans else [text]
