"""Synthetic checkpoint series shaped like TB2-lite, with known true scores: the race's error rate and
savings (bench/bench_race.py, tests/sweep/test_race_book.py).

The tasks and steps are those of bench/synthetic_pairs.py: 50 tasks of uneven length (303 steps), a task
effect (sd 1.2 on the logit scale) and a step effect (sd 0.8) that every checkpoint shares, each checkpoint's
own task and step effects (sd 0.3 each) and Beta answers of little concentration. Checkpoints of one series
are close relatives: on each step a checkpoint repeats a common answer (its ancestor's) with probability
√0.5, so two checkpoints give the very same answer on half the steps, as the pairs of synthetic_pairs.py do.
A checkpoint `delta` points better has its own answers' expectation raised so that its expected score over
the population of tasks is exactly `delta` points above the others'. Each task gets one of the 14 source
groups of SPEC §1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bench.synthetic_pairs import N_STEPS, N_TASKS, SAME_ANSWER, _answers, _expected, _logits, layout, population_mean

GROUPS = ("code", "data_processing", "data_querying", "data_science", "debugging", "dependency_management",
          "file_operations", "math", "model_training", "scientific_computing", "security", "software_engineering",
          "swe", "system_administration")
REPEAT = math.sqrt(SAME_ANSWER)  # two checkpoints both repeat the ancestor with probability SAME_ANSWER


@dataclass(frozen=True)
class SeriesStep:
    """A step as the race's planner reads it (lab.sweep.race_plan.RaceStep)."""

    task_id: str
    step_idx: int
    source_group: str

    @property
    def key(self) -> str:
        return f"{self.task_id}/{self.step_idx}"


@dataclass(frozen=True)
class SyntheticSeries:
    """Per-step F1 (steps × checkpoints), the steps, and each checkpoint's true difference (points)."""

    steps: list[SeriesStep]
    values: np.ndarray
    deltas: tuple[float, ...]

    @property
    def task_of(self) -> dict[str, str]:
        return {s.key: s.task_id for s in self.steps}


def max_delta() -> float:
    """The largest difference a checkpoint can be given (its expected F1 stays below 1)."""
    return 100.0 * (1.0 - population_mean()) * (1.0 - REPEAT)


def make_series(rng: np.random.Generator, deltas: tuple[float, ...], n_tasks: int = N_TASKS,
                n_steps: int = N_STEPS) -> SyntheticSeries:
    """One series: checkpoint j's expected score is `deltas[j]` points above a checkpoint of delta 0."""
    if not all(0 <= d < max_delta() for d in deltas):
        raise ValueError(f"every delta must be between 0 and {max_delta():.0f} points")
    task = layout(rng, n_tasks, n_steps)
    logits = _logits(rng, task)
    ancestor = _answers(rng, _expected(rng, logits, task), 1)[:, 0]
    columns = []
    for delta in deltas:
        shift = delta / 100.0 / (1.0 - REPEAT)
        m = _expected(rng, logits, task)
        m = m + shift * (1 - m) / (1 - population_mean())
        own = _answers(rng, m, 1)[:, 0]
        columns.append(np.where(rng.random(len(task)) < REPEAT, ancestor, own))
    groups = rng.choice(len(GROUPS), size=n_tasks)
    idx = np.concatenate([np.arange(c) for c in np.bincount(task, minlength=n_tasks)])
    steps = [SeriesStep(f"task-{t:03d}", int(i), GROUPS[groups[t]]) for t, i in zip(task, idx)]
    return SyntheticSeries(steps, np.column_stack(columns), tuple(float(d) for d in deltas))
