"""Strip thinking blocks from earlier assistant turns (SPEC §2, `strip_thinking_history`)."""
from __future__ import annotations

import re

THINKING_BLOCKS = (
    re.compile(r"<think>.*?</think>\s*", re.DOTALL),
    re.compile(r"<\|channel>thought\n.*?<channel\|>\s*", re.DOTALL),
)


def strip_thinking_text(content: str) -> tuple[str, int]:
    """Remove every thinking block, then left-strip (always). Returns (text, blocks removed)."""
    removed = 0
    for pattern in THINKING_BLOCKS:
        content, n = pattern.subn("", content)
        removed += n
    return content.lstrip(), removed


def strip_thinking(messages: list[dict]) -> tuple[list[dict], int]:
    """Apply `strip_thinking_text` to assistant messages with str content; others are copied."""
    out: list[dict] = []
    total = 0
    for message in messages:
        if message.get("role") == "assistant" and isinstance(message.get("content"), str):
            content, n = strip_thinking_text(message["content"])
            total += n
            out.append({**message, "content": content})
        else:
            out.append(dict(message))
    return out, total
