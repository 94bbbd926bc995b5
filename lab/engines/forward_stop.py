"""Ending an in-process forward pass in its middle: once armed, a pre-hook on every module of the model raises.

A stopping criterion ends `generate` between two decoding steps; a prefill (one forward pass over a batch
of prompts of thousands of tokens) has no such point, and on a CPU it may run for tens of seconds. Armed
by `cancel()`, the hooks end it at the next module that starts (one layer, one projection), so a Stop or
a time budget takes effect within one module's time. Nothing is hooked until a cancel comes, so a forward
pass that is never cancelled runs exactly as without this (no hook calls, nothing a compiled model guards).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class ForwardCancelled(Exception):
    """A forward pass ended by `ForwardStop` (the batch is dropped, never an answer)."""


def _refuse(module, args) -> None:
    raise ForwardCancelled("forward pass cancelled")


class ForwardStop:
    """`with stop.watching(model):` a forward pass of `model` may be ended: `arm()` (from any thread, any number
    of times) makes every module of the model raise ForwardCancelled when it is next called. Leaving the block
    takes the hooks off, under the same lock as `arm`, so none outlives it (a borrowed model goes back clean)."""

    def __init__(self) -> None:
        self._handles: list = []
        self._model = None
        self._lock = threading.Lock()

    @contextmanager
    def watching(self, model) -> Iterator[None]:
        with self._lock:
            self._model = model
        try:
            yield
        finally:
            with self._lock:
                self._model = None
                for handle in self._handles:
                    handle.remove()
                self._handles = []

    def arm(self) -> None:
        with self._lock:
            if self._model is None or self._handles or not hasattr(self._model, "modules"):
                return
            self._handles = [m.register_forward_pre_hook(_refuse) for m in self._model.modules()]

    @property
    def armed(self) -> bool:
        return bool(self._handles)
