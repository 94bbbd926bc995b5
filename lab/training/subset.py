"""The fixed subset of tasks every save of a series replays first (`subset_tasks=K`): K whole tasks, balanced
over the replay's source groups, chosen once per series with a seed.

Whole tasks, because the paired comparisons that judge the series resample tasks (the steps of one task
rise and fall together, lab.scoring.paired). Balanced: the groups take turns (in an order the seed
shuffles), each giving its next task (its tasks in an order the seed shuffles too), until K are chosen, so
a group with many tasks cannot fill the subset alone and every group is in it while K allows. The same
replay, K and seed give the same subset, so a resumed training run and `python -m lab training finish`
replay exactly the tasks the first saves did.
"""
from __future__ import annotations

import random
from collections import Counter

from lab.data.step import Step
from lab.errors import LabError
from lab.scoring.paired import load_settings


def task_groups(steps: list[Step]) -> dict[str, str]:
    """task id -> its source group (the first step's), in the steps' order."""
    groups: dict[str, str] = {}
    for step in steps:
        groups.setdefault(step.task_id, step.source_group or "unknown")
    return groups


def stratified_tasks(steps: list[Step], k: int, seed: int) -> list[str]:
    """K task ids of `steps`, balanced over their source groups (module docstring), in the steps' order."""
    groups = task_groups(steps)
    minimum = load_settings().min_common_tasks
    if k < minimum:
        raise LabError(f"subset_tasks={k}: give at least {minimum} tasks (fewer give the series judgement no "
                       "interval to rule a checkpoint out with)")
    if k >= len(groups):
        raise LabError(f"subset_tasks={k}: the selected steps have {len(groups)} tasks; give fewer, or leave "
                       "subset_tasks out to replay all of them at every save")
    rng = random.Random(seed)
    by_group: dict[str, list[str]] = {}
    for task, group in groups.items():
        by_group.setdefault(group, []).append(task)
    order = sorted(by_group)
    rng.shuffle(order)
    for group in order:
        rng.shuffle(by_group[group])
    chosen: list[str] = []
    while len(chosen) < k:
        for group in order:
            if by_group[group] and len(chosen) < k:
                chosen.append(by_group[group].pop())
    keep = set(chosen)
    return [task for task in groups if task in keep]


def subset_record(steps: list[Step], tasks: list[str], k: int, seed: int) -> dict:
    """What the result files and the worker's plan record of the subset: its tasks, how they were chosen, and
    how many of the selection's tasks and steps it holds per source group."""
    groups = task_groups(steps)
    keep = set(tasks)
    return {"tasks": list(tasks), "k": k, "seed": seed, "of_tasks": len(groups),
            "steps": sum(1 for s in steps if s.task_id in keep), "of_steps": len(steps),
            "by_group": dict(sorted(Counter(groups[t] for t in tasks).items()))}


def subset_steps(steps: list[Step], tasks: list[str]) -> list[Step]:
    """The steps of `tasks`, in the replay's order."""
    keep = set(tasks)
    return [s for s in steps if s.task_id in keep]
