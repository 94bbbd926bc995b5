"""Gradio's check that a choice field's value is one of its choices (Dropdown, Radio, CheckboxGroup),
answering a value that is not with a short line. Gradio's own message repeats the value and every choice:
a visitor's 10,000-character value came back whole, and any wrong value brought the full list of runs or
steps. The check itself is Gradio's, unchanged."""
from __future__ import annotations

import functools

import gradio as gr

from lab.jsontext import one_line

CHECKED = (gr.Dropdown, gr.Radio, gr.CheckboxGroup)
NOT_A_CHOICE = "is not in the list of choices"


def _offending(payload: object, choices: list) -> object:
    """The value (of a list, the first element) that is not among `choices`."""
    values = [value for _, value in choices]
    if isinstance(payload, list):
        return next((v for v in payload if v not in values), payload)
    return payload


def short_choice_errors() -> None:
    """Make each checked component's refusal one short line: the value's first 60 characters and how many
    choices the field has (done once per process; what the check admits is unchanged)."""
    for component in CHECKED:
        original = component.preprocess
        if getattr(original, "_short_choice_errors", False):
            continue

        @functools.wraps(original)
        def preprocess(self, payload, _original=original):
            try:
                return _original(self, payload)
            except gr.Error as exc:
                if NOT_A_CHOICE not in str(exc):
                    raise
                value = one_line(repr(_offending(payload, self.choices)), 60)
                raise gr.Error(f"{value} is not one of the {len(self.choices)} choices of this field") from None

        preprocess._short_choice_errors = True  # type: ignore[attr-defined]
        component.preprocess = preprocess
