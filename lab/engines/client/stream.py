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


def read_stream(chunks: Iterable, start: float, tokenizer=None,
                on_tokens: Callable[[int], None] | None = None) -> Completion:
    """Consume `chunks` (SDK `Completion` chunks) started at `start` (perf_counter); `on_tokens`
    hears of each chunk's tokens as it arrives (its token ids, else one per chunk with text)."""
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
            if on_tokens is not None and (text or ids):
                on_tokens(len(ids) if isinstance(ids, list) and ids else 1)
            if getattr(choice, "finish_reason", None):
                finish_reason = choice.finish_reason
            if getattr(choice, "stop_reason", None) is not None:
                stop_reason = choice.stop_reason
    end = time.perf_counter()
    text = "".join(texts)
    completion_tokens = getattr(usage, "completion_tokens", None)
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
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=completion_tokens,
        ttft_s=(first - start) if first is not None else None,
        latency_s=end - start,
    )
