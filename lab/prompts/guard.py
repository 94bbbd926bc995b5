"""The context guard (SPEC §3): token statistics and the abort on over-long prompts."""
from __future__ import annotations

from typing import Sequence

from lab.engines.context import prompt_fits
from lab.errors import LabError

MAX_OFFENDERS_LISTED = 10


class ContextLengthError(LabError):
    """Some prompts plus `max_tokens` exceed `max_model_len`; lists up to 10 offenders."""

    def __init__(self, offenders: list[tuple[str, int]], total: int, max_model_len: int, max_tokens: int):
        self.offenders, self.total = offenders, total
        self.max_model_len, self.max_tokens = max_model_len, max_tokens
        listed = ", ".join(f"{key} ({n} tokens)" for key, n in offenders[:MAX_OFFENDERS_LISTED])
        more = f" and {total - MAX_OFFENDERS_LISTED} more" if total > MAX_OFFENDERS_LISTED else ""
        super().__init__(
            f"{total} prompt(s) + max_tokens {max_tokens} exceed max_model_len {max_model_len}: {listed}{more}; "
            "raise max_model_len, lower max_tokens or drop those steps"
        )


def context_stats(lengths: Sequence[int], max_model_len: int, max_tokens: int, messages_rows: int) -> dict:
    """Statistics the harness records: min, max, p50 `s[n//2]`, p95 `s[int(n*0.95)-1]`,
    p99 `s[int(n*0.99)-1]`, row_count, messages_rows, max_model_len, max_tokens."""
    s = sorted(lengths)
    n = len(s)
    pick = (lambda i: s[i]) if n else (lambda i: 0)
    return {
        "min": s[0] if n else 0,
        "max": s[-1] if n else 0,
        "p50": pick(n // 2),
        "p95": pick(int(n * 0.95) - 1),
        "p99": pick(int(n * 0.99) - 1),
        "row_count": n,
        "messages_rows": messages_rows,
        "max_model_len": max_model_len,
        "max_tokens": max_tokens,
    }


def find_offenders(keys: Sequence[str], lengths: Sequence[int], max_model_len: int, max_tokens: int) -> list[tuple[str, int]]:
    """(key, length) of every prompt whose length + max_tokens exceeds max_model_len, in order."""
    return [(k, n) for k, n in zip(keys, lengths) if not prompt_fits(n, max_tokens, max_model_len)]


def check_context(keys: Sequence[str], lengths: Sequence[int], max_model_len: int, max_tokens: int,
                  messages_rows: int | None = None) -> dict:
    """Raise `ContextLengthError` when any prompt is too long; else return `context_stats`."""
    offenders = find_offenders(keys, lengths, max_model_len, max_tokens)
    if offenders:
        raise ContextLengthError(offenders[:MAX_OFFENDERS_LISTED], len(offenders), max_model_len, max_tokens)
    rows = len(lengths) if messages_rows is None else messages_rows
    return context_stats(lengths, max_model_len, max_tokens, rows)
