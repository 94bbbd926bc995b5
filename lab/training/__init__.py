"""Evaluate while training: TB2-lite replayed on every checkpoint a `transformers.Trainer` saves (docs/training.md)."""
from lab.training.callback import TB2LiteCallback

__all__ = ["TB2LiteCallback"]
