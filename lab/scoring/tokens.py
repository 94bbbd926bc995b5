"""Unit normalization, shell-style tokenization and token F1 (SPEC §6). The scoring hot path."""
from __future__ import annotations

import re
import shlex
from collections import Counter
from functools import lru_cache
from typing import Sequence

WAIT_TOKEN = "<wait>"
_WHITESPACE_RUN = re.compile(r"\s+")
# Characters that make POSIX shlex differ from a plain split: quotes and the escape.
_SHLEX_SPECIAL = frozenset("'\"\\")
# shlex's own whitespace is " \t\r\n"; any other character is an ordinary token character to it.
_SHLEX_WORD = re.compile(r"[^ \t\r\n]+")

CACHE_SIZE = 1 << 18


@lru_cache(maxsize=CACHE_SIZE)
def normalize_unit(unit: str) -> str:
    """Trim and collapse every whitespace run to one space; an empty result is `<WAIT>`."""
    return _WHITESPACE_RUN.sub(" ", unit.strip()) or "<WAIT>"


@lru_cache(maxsize=CACHE_SIZE)
def tokenize(unit: str) -> tuple[str, ...]:
    """Lower-cased POSIX shell tokens of a unit; whitespace tokens when shlex raises.

    shlex-on-lowercase is the harness's rule (SPEC §10.4): quotes vanish, an odd number of
    apostrophes (`we'll`) makes shlex raise and falls back to whitespace splitting, and an
    even number silently merges the words between them into one token.
    """
    text = unit.strip().lower()
    if not text:
        return ()
    if text == WAIT_TOKEN:
        return (WAIT_TOKEN,)
    if _SHLEX_SPECIAL.isdisjoint(text):
        # Fast path, same result as shlex.split: with no quote or escape character, POSIX
        # shlex with whitespace_split just splits on its whitespace characters.
        return tuple(_SHLEX_WORD.findall(text))
    try:
        return tuple(shlex.split(text))
    except ValueError:
        return tuple(text.split())


@lru_cache(maxsize=CACHE_SIZE)
def token_counts(unit: str) -> Counter:
    """Multiset of a unit's tokens (cached; do not mutate the returned Counter)."""
    return Counter(tokenize(unit))


def f1_from_overlap(overlap: int, n_a: int, n_b: int) -> float:
    """Token F1 from the multiset overlap and both sizes, in the harness's operation order."""
    if n_a == 0 and n_b == 0:
        return 1.0
    if n_a == 0 or n_b == 0 or overlap == 0:
        return 0.0
    p = overlap / n_a
    r = overlap / n_b
    return 2 * p * r / (p + r)


def token_f1(a_tokens: Sequence[str], b_tokens: Sequence[str]) -> float:
    """F1 of two token multisets (symmetric; both empty 1.0, one empty 0.0)."""
    a, b = Counter(a_tokens), Counter(b_tokens)
    overlap = sum((a & b).values())
    return f1_from_overlap(overlap, sum(a.values()), sum(b.values()))


def unit_f1(a_unit: str, b_unit: str) -> float:
    """Token F1 of two (normalized) units, using the cached token multisets."""
    a, b = token_counts(a_unit), token_counts(b_unit)
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    overlap = sum(min(n, large[t]) for t, n in small.items() if t in large)
    return f1_from_overlap(overlap, a.total(), b.total())


def clear_caches() -> None:
    """Drop the tokenization caches (benchmarks use it to time cold runs)."""
    normalize_unit.cache_clear()
    tokenize.cache_clear()
    token_counts.cache_clear()
