"""Synthetic pairs of runs shaped like TB2-lite, with a known true difference: the paired comparison's
calibration and power (bench/bench_paired.py, tests/scoring/test_paired_calibration.py).

Each pair is drawn afresh from a population of tasks: 50 tasks of uneven length (303 steps; a task has
1 + a Dirichlet(2)-multinomial share of the rest, so from 1 to about 20 steps), differing in difficulty
(a task effect of sd 1.2 on the logit scale, a step effect of sd 0.8). A run's expected F1 on a step is
the logistic of those plus its own task effect (sd 0.3: models differ in which tasks suit them) and step
effect (sd 0.3); its F1 is a Beta draw with that mean and little concentration (κ = 1.2: most answers
near 0 or near 1, as TB2-lite's are). Related runs often give the very same answer: on each step the
candidate repeats the baseline's F1 with probability 0.5 (bench/synthetic.py's runs of one family share
60 % of their draws).

The candidate's expected F1 on a step is raised by d·(1 − m)/(1 − E[m]) where E[m] is the population's
mean expected F1, so the true difference of the run-level score (100 × mean F1 over the population of
tasks) is exactly `true_delta` points; the mean score is about 41. With `samples` > 1 each run answers
every step that many times (independent Beta draws around its expected F1), for the two-level bootstrap.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

N_TASKS = 50
N_STEPS = 303
INTERCEPT = -0.5
TASK_SD, STEP_SD = 1.2, 0.8          # difficulty: shared by both runs
RUN_TASK_SD, RUN_STEP_SD = 0.3, 0.3  # each run's own
KAPPA = 1.2                          # Beta concentration of an answer's F1 around its expectation
SAME_ANSWER = 0.5                    # chance the candidate gives the baseline's very answer


@dataclass(frozen=True)
class SyntheticPair:
    """Per-step F1 of a baseline and a candidate run (one column per sampled answer) and each step's task."""

    task: np.ndarray
    baseline: np.ndarray
    candidate: np.ndarray
    true_delta: float  # points (100 × F1)


def layout(rng: np.random.Generator, n_tasks: int = N_TASKS, n_steps: int = N_STEPS) -> np.ndarray:
    """Each step's task: tasks of uneven length, every task at least one step."""
    counts = 1 + rng.multinomial(n_steps - n_tasks, rng.dirichlet(np.full(n_tasks, 2.0)))
    return np.repeat(np.arange(n_tasks), counts)


def _logits(rng: np.random.Generator, task: np.ndarray) -> np.ndarray:
    n_tasks = int(task.max()) + 1
    return INTERCEPT + rng.normal(0, TASK_SD, n_tasks)[task] + rng.normal(0, STEP_SD, len(task))


def _expected(rng: np.random.Generator, logits: np.ndarray, task: np.ndarray) -> np.ndarray:
    n_tasks = int(task.max()) + 1
    own = rng.normal(0, RUN_TASK_SD, n_tasks)[task] + rng.normal(0, RUN_STEP_SD, len(task))
    return 1.0 / (1.0 + np.exp(-(logits + own)))


@lru_cache(maxsize=1)
def population_mean(draws: int = 2000) -> float:
    """E[m]: the population's mean expected F1 of one run (a fixed Monte-Carlo of `draws` layouts)."""
    rng = np.random.default_rng(20260401)
    total = steps = 0.0
    for _ in range(draws):
        task = layout(rng)
        m = _expected(rng, _logits(rng, task), task)
        total, steps = total + m.sum(), steps + len(m)
    return total / steps


def _answers(rng: np.random.Generator, m: np.ndarray, samples: int) -> np.ndarray:
    mean = np.repeat(m[:, None], samples, axis=1)
    return rng.beta(mean * KAPPA, (1 - mean) * KAPPA)


def make_pair(rng: np.random.Generator, true_delta: float = 0.0, samples: int = 1,
              n_tasks: int = N_TASKS, n_steps: int = N_STEPS) -> SyntheticPair:
    """One pair whose score differs by `true_delta` points in expectation (0: only noise)."""
    shift = true_delta / 100.0 / (1.0 - SAME_ANSWER)
    if not 0 <= shift < 1 - population_mean():
        raise ValueError(f"true_delta must be between 0 and {100 * (1 - population_mean()) * (1 - SAME_ANSWER):.0f} points")
    task = layout(rng, n_tasks, n_steps)
    logits = _logits(rng, task)
    base = _answers(rng, _expected(rng, logits, task), samples)
    m = _expected(rng, logits, task)
    m = m + shift * (1 - m) / (1 - population_mean())
    fresh = _answers(rng, m, samples)
    same = rng.random(base.shape) < SAME_ANSWER
    return SyntheticPair(task, base, np.where(same, base, fresh), float(true_delta))

