"""One streamed completion read into a Completion, timed per request.

TTFT is the time from sending the request to the first chunk that carries text or token ids
(the first chunk at all when the answer is empty); latency is the time to the end of the
stream. Text and token ids are the concatenation of the chunks' deltas; token counts come from
the usage of the last chunk, else from the token ids, else from the local tokenizer.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

from lab.engines.base import Completion
from lab.engines.logprobs import MalformedLogprobs, TokenLogprobs
from lab.jsontext import lone_surrogate


def read_stream(chunks: Iterable, start: float, tokenizer=None, logprobs_k: int = 0,
                on_tokens: Callable[[int], None] | None = None) -> Completion:
    """Consume `chunks` (SDK `Completion` chunks) started at `start` (perf_counter); the chunks'
    `logprobs` (asked for with `logprobs_k` > 0) become the completion's TokenLogprobs, and `on_tokens`
    hears of each chunk's tokens as it arrives (its token ids, else one per chunk with text)."""
    recorded = TokenLogprobs(k=logprobs_k) if logprobs_k > 0 else None
    seen_logprobs = False
    logprobs_error = None
    texts: list[str] = []
    token_ids: list[int] = []
    first = first_any = None
    finish_reason = stop_reason = None
    usage = None
    for chunk in chunks:
        now = time.perf_counter()
        if first_any is None:
            first_any = now
        if getattr(chunk, "usage", None) is not None:
            usage = chunk.usage
        for choice in chunk.choices or []:
            text = getattr(choice, "text", None) or ""
            ids = getattr(choice, "token_ids", None) or []
            if (text or ids) and first is None:
                first = now
            texts.append(text)
            if isinstance(ids, list):
                token_ids.extend(int(t) for t in ids)
            chunk_lp = getattr(choice, "logprobs", None)
            if recorded is not None and chunk_lp is not None and getattr(chunk_lp, "tokens", None) is not None:
                seen_logprobs = True
                try:
                    recorded.extend(chunk_lp.tokens, getattr(chunk_lp, "token_logprobs", None),
                                    getattr(chunk_lp, "top_logprobs", None))
                except MalformedLogprobs as exc:  # the answer counts; its log-probabilities are not recorded
                    recorded, logprobs_error = None, f"the server's {exc}"
            if on_tokens is not None and (text or ids):
                on_tokens(len(ids) if isinstance(ids, list) and ids else 1)
            if getattr(choice, "finish_reason", None):
                finish_reason = short_text(choice.finish_reason)
            if getattr(choice, "stop_reason", None) is not None:
                stop_reason = choice.stop_reason if type(choice.stop_reason) is int else short_text(choice.stop_reason)
    end = time.perf_counter()
    text = without_lone_surrogates("".join(texts))
    completion_tokens = token_count(getattr(usage, "completion_tokens", None))
    if completion_tokens is None and token_ids:
        completion_tokens = len(token_ids)
    if completion_tokens is None and tokenizer is not None:
        completion_tokens = len(tokenizer(text, add_special_tokens=False).input_ids)
    first = first if first is not None else first_any
    return Completion(
        text=text,
        finish_reason=finish_reason,
        stop_reason=stop_reason,
        token_ids=token_ids,
        prompt_tokens=token_count(getattr(usage, "prompt_tokens", None)),
        completion_tokens=completion_tokens,
        ttft_s=(first - start) if first is not None else None,
        latency_s=end - start,
        logprobs=recorded if seen_logprobs else None,
        logprobs_error=logprobs_error,
    )


def token_count(value: object) -> int | None:
    """A server's token count when it is one (a whole number a result file and the store can hold), else None."""
    return value if type(value) is int and 0 <= value < 2**31 else None


def short_text(value: object, limit: int = 200) -> str:
    """A server's finish or stop reason as a short string a UTF-8 file can hold (it may send anything)."""
    return without_lone_surrogates(value if isinstance(value, str) else repr(value)[:limit])[:limit]


def without_lone_surrogates(text: str) -> str:
    """`text` with each lone UTF-16 surrogate (a server's `\\ud800`, which no UTF-8 file can hold) as U+FFFD."""
    if lone_surrogate(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
