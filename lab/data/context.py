"""Split a step's history into the parts the UI shows: task, earlier turns, latest screen."""
from __future__ import annotations

from dataclasses import dataclass

from lab.data.step import Step

SCREEN_ROLES = ("user", "tool")


@dataclass(frozen=True)
class StepContext:
    """`task`: the first user message; `turns`: (role, content) of every later message except
    the latest screen; `screen`: the last user/tool message (empty when it is the task itself)."""

    task: str
    turns: list[tuple[str, str]]
    screen: str
    system: str = ""


def split_context(step: Step) -> StepContext:
    """The task text, the earlier turns and the latest terminal screen of a step."""
    messages = [m for m in step.messages if isinstance(m, dict) and isinstance(m.get("content"), str)]
    system = "\n\n".join(m["content"] for m in messages if m.get("role") == "system")
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    if first_user is None:
        return StepContext(task=step.prompt, turns=[], screen="", system=system)
    task = messages[first_user]["content"]
    last_screen = max((i for i, m in enumerate(messages) if m.get("role") in SCREEN_ROLES), default=first_user)
    screen = messages[last_screen]["content"] if last_screen != first_user else ""
    turns = [
        (m["role"], m["content"])
        for i, m in enumerate(messages)
        if i > first_user and i != last_screen and m.get("role") != "system"
    ]
    return StepContext(task=task, turns=turns, screen=screen, system=system)
