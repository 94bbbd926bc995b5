"""Gradio's Number fields refusing what is not a finite number in one line naming the field. A visitor's
`nan` in a whole-number field (a series position) made Gradio's rounding raise, and the page said only
": failed"; a string or an infinity failed the same way or deeper in a handler."""
from __future__ import annotations

import functools
import math

import gradio as gr

from lab.jsontext import one_line


def _finite(payload: object) -> bool:
    return isinstance(payload, (int, float)) and not isinstance(payload, bool) and math.isfinite(payload)


def numbers_refused_in_one_line() -> None:
    """Make gr.Number's preprocess refuse a value that is not a finite number with one short line (done once
    per process; finite numbers and None go through Gradio's own checks unchanged)."""
    original = gr.Number.preprocess
    if getattr(original, "_finite_only", False):
        return

    @functools.wraps(original)
    def preprocess(self, payload, _original=original):
        if payload is not None and not _finite(payload):
            field = one_line(self.label or "a number field", 40)
            raise gr.Error(f"{field}: {one_line(repr(payload), 40)} is not a finite number; give a number")
        return _original(self, payload)

    preprocess._finite_only = True  # type: ignore[attr-defined]
    gr.Number.preprocess = preprocess
