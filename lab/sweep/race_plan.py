"""A race's rounds: the selected steps' tasks shuffled with a seed, spread evenly over their source groups,
and cut into rounds of whole tasks (a task's steps move together, so they are replayed together)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np


class RaceStep(Protocol):
    """What the planner reads of a step (lab.data.step.Step has it)."""

    @property
    def key(self) -> str: ...

    task_id: str
    source_group: str


@dataclass(frozen=True)
class RacePlan:
    """Every round's tasks and step keys (in the selection's order), and the share of the selection's steps
    replayed once each round is done (the information fractions of lab.scoring.sequential)."""

    tasks: list[list[str]]
    keys: list[list[str]]
    fractions: list[float]

    @property
    def rounds(self) -> int:
        return len(self.tasks)

    @property
    def steps(self) -> int:
        return sum(len(k) for k in self.keys)


def task_order(steps: Sequence[RaceStep], seed: int) -> list[str]:
    """The tasks in race order: each source group's tasks shuffled, then placed at evenly spaced positions
    (i + u)/n of the order (u a random offset per group, n the group's tasks), so every prefix of the order
    holds each group in about its share. Deterministic for a seed."""
    rng = np.random.default_rng(seed)
    group_of: dict[str, str] = {}
    for step in steps:  # a task's group: its first step's
        group_of.setdefault(step.task_id, step.source_group)
    groups: dict[str, list[str]] = {}
    for task, group in group_of.items():
        groups.setdefault(group, []).append(task)
    placed: list[tuple[float, float, str]] = []
    for group in sorted(groups):
        tasks = list(groups[group])
        rng.shuffle(tasks)
        offset = rng.random()
        placed += [((i + offset) / len(tasks), rng.random(), task) for i, task in enumerate(tasks)]
    return [task for _, _, task in sorted(placed)]


def plan_rounds(steps: Sequence[RaceStep], round_tasks: int, seed: int) -> RacePlan:
    """Rounds of `round_tasks` whole tasks in race order (the last may hold fewer)."""
    if round_tasks < 1:
        raise ValueError(f"tasks per round must be at least 1, got {round_tasks}")
    order = task_order(steps, seed)
    tasks = [order[i:i + round_tasks] for i in range(0, len(order), round_tasks)]
    round_of = {task: r for r, chunk in enumerate(tasks) for task in chunk}
    keys: list[list[str]] = [[] for _ in tasks]
    for step in steps:
        keys[round_of[step.task_id]].append(step.key)
    total = sum(len(k) for k in keys)
    fractions = list(np.cumsum([len(k) for k in keys]) / total) if total else []
    fractions[-1:] = [1.0] * bool(fractions)  # exactly 1 at the end, whatever the rounding
    return RacePlan(tasks, keys, [float(f) for f in fractions])
