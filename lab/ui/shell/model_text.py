"""One line for what an engine runs: its model's architecture, the context and dtype it runs it with
(the Engines table and Compare's prompt audit both show it)."""
from __future__ import annotations

from lab.workspace import EngineEntry


def model_facts_text(e: EngineEntry) -> str:
    """`Architecture · context 8,192 · float32` for an engine with a model ('' for one without)."""
    parts = [e.architecture or ""]
    if e.context_length:
        parts.append(f"context {e.context_length:,}")
    if e.dtype:
        parts.append(e.dtype)
    return " · ".join(p for p in parts if p)
