"""The working directory a step starts in: the last shell prompt its terminal screens show."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Protocol, Sequence

from lab.scoring.equiv.config import load_config
from lab.scoring.equiv.registry import EquivContext

SCREEN_ROLES = ("user", "tool")


class StepLike(Protocol):
    """What the cwd reader needs of a replay step (lab.data.step.Step, a layer above the scorer)."""

    @property
    def messages(self) -> Sequence[dict]: ...

    @property
    def prompt(self) -> str: ...

    @property
    def key(self) -> str: ...


@lru_cache(maxsize=8)
def _prompt_rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def prompt_in(screen: str, pattern: str | None = None) -> tuple[str, str] | None:
    """(user, path) of the last shell prompt (`root@host:/app#`) in a screen, or None."""
    pattern = pattern or load_config().params_of("cwd").get("prompt_pattern")
    if not pattern or not screen:
        return None
    last = None
    for last in _prompt_rx(pattern).finditer(screen):
        pass
    return None if last is None else (last.group("user"), last.group("path"))


def home_of(user: str) -> str:
    """The home directory of a prompt's user, per the rules file (`/root`, `/home/{user}`)."""
    params = load_config().params_of("cd")
    if user == "root":
        return str(params.get("home_of_root", "/root"))
    return str(params.get("home_of_user", "/home/{user}")).format(user=user)


def context_from_screens(screens: Iterable[str]) -> EquivContext:
    """The cwd and home from the newest screen that shows a prompt (screens oldest first)."""
    for screen in reversed(list(screens)):
        found = prompt_in(screen)
        if found is None:
            continue
        user, path = found
        home = home_of(user)
        if path == "~":
            path = home
        elif path.startswith("~/"):
            path = home.rstrip("/") + path[1:]
        return EquivContext(cwd=path, home=home)
    return EquivContext()


def step_context(step: StepLike) -> EquivContext:
    """The equiv context of a step: the prompt of its last user/tool message showing one."""
    screens = [m["content"] for m in step.messages
               if isinstance(m, dict) and m.get("role") in SCREEN_ROLES and isinstance(m.get("content"), str)]
    if not screens and step.prompt:
        screens = [step.prompt]
    return context_from_screens(screens)


def replay_contexts(steps: Iterable[StepLike]) -> dict[str, EquivContext]:
    """Step key -> its equiv context, for every step of a replay."""
    return {s.key: step_context(s) for s in steps}
