"""The rule registry of equiv_f1: a rule is a small named function over a step's units."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

Params = Mapping[str, Any]


@dataclass(frozen=True)
class EquivUnit:
    """One normalised unit: its text, the index of the original unit it came from, and whether
    it is literal text (a heredoc body line) that no shell rule may touch."""

    origin: int
    text: str
    literal: bool = False

    def with_text(self, text: str) -> "EquivUnit":
        return EquivUnit(self.origin, text, self.literal)


CONNECTORS = ("&& ",)  # a piece of a split chain that runs only if the one before it succeeded


def connector_of(text: str) -> str:
    """The connector prefix a split piece carries (`&& ls` -> `&& `), else ''."""
    return next((c for c in CONNECTORS if text.startswith(c)), "")


@dataclass
class EquivContext:
    """What sequence rules may read and update: the working directory and the user's home.
    `max_resolved_chars`: the most characters of resolved directories the `cd` rule may write for
    the side in hand (set by the pipeline from the rules file's `limits`; None: no bound)."""

    cwd: str | None = None
    home: str | None = None
    max_resolved_chars: int | None = None


class EquivTooLarge(Exception):
    """A side's normalised units would pass the rules file's `limits` (raised by a rule as soon as
    they do); the step's equiv is skipped with this reason."""


UnitRule = Callable[[str, Params], "list[str]"]
SequenceRule = Callable[[list[EquivUnit], EquivContext, Params], "list[EquivUnit]"]


@dataclass(frozen=True)
class Rule:
    """A registered rule: `unit` rules map one unit's text to one or more texts (cached by the
    pipeline); `sequence` rules see the whole list in order (e.g. `cd`, which tracks the cwd)."""

    name: str
    kind: str  # "unit" | "sequence"
    fn: Callable[..., Any]
    doc: str
    token_neutral: bool = False  # never changes a unit's shlex tokens: metrics may skip it


RULES: dict[str, Rule] = {}


def unit_rule(name: str, token_neutral: bool = False) -> Callable[[UnitRule], UnitRule]:
    """Register `fn(text, params) -> list[str]` under `name`. `token_neutral`: the rule never
    changes the unit's tokens as the scorer splits them (tests check it), so equiv metrics may
    skip it; it still decides whether two units are written alike."""

    def register(fn: UnitRule) -> UnitRule:
        RULES[name] = Rule(name, "unit", fn, (fn.__doc__ or "").strip().splitlines()[0], token_neutral)
        return fn

    return register


def sequence_rule(name: str) -> Callable[[SequenceRule], SequenceRule]:
    """Register `fn(units, context, params) -> list[EquivUnit]` under `name`."""

    def register(fn: SequenceRule) -> SequenceRule:
        RULES[name] = Rule(name, "sequence", fn, (fn.__doc__ or "").strip().splitlines()[0])
        return fn

    return register
