"""Evaluate while training: TB2-lite replayed on every checkpoint a `transformers.Trainer` saves (docs/training.md).

`TB2LiteCallback` is imported on first use, so `python -m lab training …` and the evaluation worker start
without loading transformers before they need it."""
from __future__ import annotations

__all__ = ["TB2LiteCallback"]


def __getattr__(name: str):
    if name == "TB2LiteCallback":
        from lab.training.callback import TB2LiteCallback

        return TB2LiteCallback
    raise AttributeError(f"module 'lab.training' has no attribute {name!r}")
