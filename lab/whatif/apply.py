"""Apply what-if edits to a Step: the edited step is what every engine then renders its own way."""
from __future__ import annotations

from dataclasses import dataclass, replace

from lab.data.context import SCREEN_ROLES
from lab.data.history import flatten_history
from lab.data.step import Step
from lab.prompts.templates import load_template_data
from lab.whatif.edit import EditError, FieldEdit, WhatIf
from lab.whatif.validate import check_edit


@dataclass(frozen=True)
class FieldSpan:
    """Where a field's text lives: message `index` (None: not there yet), characters [start, end)."""

    field: str
    label: str
    index: int | None
    start: int = 0
    end: int | None = None

    def text(self, messages: list[dict]) -> str:
        if self.index is None:
            return ""
        return messages[self.index]["content"][self.start : self.end]


def _screen_marker() -> str:
    return load_template_data("contracts")["request"]["initial_screen_start"]


def field_spans(step: Step) -> list[FieldSpan]:
    """Every editable field of `step`, in the order Compare shows them (system, task, turns, screen)."""
    messages = _messages(step)
    system = next((i for i, m in enumerate(messages) if m["role"] == "system"), None)
    spans = [FieldSpan("system", "system prompt" + ("" if system is not None else " (none: adds one)"), system)]
    first_user = next((i for i, m in enumerate(messages) if m["role"] == "user"), None)
    if first_user is None:
        return spans
    spans.append(FieldSpan("task", "task (first user message)", first_user))
    last_screen = max((i for i, m in enumerate(messages) if m["role"] in SCREEN_ROLES), default=first_user)
    turns = [i for i, m in enumerate(messages) if i > first_user and i != last_screen and m["role"] != "system"]
    spans += [FieldSpan(f"turn:{n}", f"turn {n} · {messages[i]['role']}", i) for n, i in enumerate(turns)]
    if last_screen != first_user:
        spans.append(FieldSpan("screen", "last terminal screen", last_screen))
    else:
        task = messages[first_user]["content"]
        marker = _screen_marker()
        at = task.rfind(marker)
        if at != -1:  # the first step: the initial screen inside the task message
            spans.append(FieldSpan("screen", "terminal screen (initial, inside the task)", first_user,
                                   at + len(marker), None))
    return spans


def field_text(step: Step, name: str) -> str:
    """The current text of field `name` of `step` (EditError when the step has no such field)."""
    return span_of(step, name).text(_messages(step))


def span_of(step: Step, name: str) -> FieldSpan:
    FieldEdit(name, "", "").turn  # validates `turn:N` syntax
    for span in field_spans(step):
        if span.field == name:
            return span
    known = ", ".join(s.field for s in field_spans(step))
    raise EditError(f"step {step.key} has no field '{name}' (it has: {known})")


def apply_edit(step: Step, edit: FieldEdit) -> Step:
    """`step` with one field replaced; the flattened `prompt` follows the messages (SPEC §1)."""
    check_edit(edit)
    span = span_of(step, edit.field)
    messages = _messages(step)
    current = span.text(messages)
    if current != edit.old:
        raise EditError(
            f"step {step.key}, field '{edit.field}': its text is no longer the edit's old text "
            "(the replay data changed); re-make the edit on the current step")
    if span.index is None:  # a system prompt the step did not have
        messages.insert(0, {"role": "system", "content": edit.new})
    else:
        content = messages[span.index]["content"]
        end = len(content) if span.end is None else span.end
        messages[span.index] = {**messages[span.index], "content": content[: span.start] + edit.new + content[end:]}
    return replace(step, messages=tuple(messages), prompt=flatten_history(messages))


def apply_whatif(step: Step, whatif: WhatIf) -> Step:
    """`step` with every edit of `whatif` applied in order (EditError on a key mismatch)."""
    if whatif.step_key != step.key:
        raise EditError(f"what-if {whatif.edit_id} is for step {whatif.step_key}, not {step.key}")
    for edit in whatif.edits:
        step = apply_edit(step, edit)
    return step


def _messages(step: Step) -> list[dict]:
    return [dict(m) for m in step.messages if isinstance(m, dict) and isinstance(m.get("content"), str)]
