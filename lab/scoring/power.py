"""How big a difference a comparison can see: the minimum detectable effect (MDE) of a paired interval, and
what more tasks or more answers per step would change (the planner: `python -m lab plan`).

**The MDE of an interval.** lab.scoring.paired's intervals are d ± c·se in effect: c is the critical value of
the interval (Φ⁻¹(1 − α′/2) of the expanded percentile interval, α′ its expanded level; for simultaneous
intervals the max-T quantile, so at their adjusted level) and se the bootstrap standard deviation of the
difference (the resamples the interval reads). With a true difference δ the estimate is about Normal(δ, se),
and the interval lies above 0 when the estimate exceeds c·se: P = Φ(δ/se − c). The MDE is the δ with P = 80 %:

    MDE = (c + Φ⁻¹(0.80)) · se

(the chance of an interval below 0 at that δ, Φ(−δ/se − c), is under 0.2 % and left out). A difference smaller
than the MDE may be real; this comparison just finds it less than 80 % of the time.

**Where the variance comes from.** The per-step paired difference d (candidate − baseline, linearised for a
ratio metric) varies between tasks, between the steps of a task, and between the answers of a step (runs with
`--samples`). A one-way random-effects split over tasks (the ANOVA estimators for groups of unequal size)
gives the first two; the answers' own spread gives the third. With N steps in n tasks of sizes mₜ and k
answers per step, the mean difference has variance

    σ²_task · Σmₜ²/N² + σ²_step / N + σ²_answer / (k·N)

so more answers per step shrink only the last part, and more tasks (of the same sizes) all three.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

POWER = 0.80


def z_power(power: float = POWER) -> float:
    """Φ⁻¹(power)."""
    from scipy.special import ndtri

    return float(ndtri(power))


def critical_value(alpha: float) -> float:
    """The critical value Φ⁻¹(1 − α/2) of a two-sided interval at level 1 − α (α: the expanded α′)."""
    from scipy.special import ndtri

    return float(ndtri(1.0 - alpha / 2.0))


def detectable(se: float, critical: float, power: float = POWER) -> float:
    """The smallest true difference an interval of half-width critical·se excludes 0 for with `power`."""
    if not (math.isfinite(se) and math.isfinite(critical)):
        return math.nan
    return (critical + z_power(power)) * se


def detectable_words(mde: float, tasks: int, unit: str = "points", digits: int = 1) -> str:
    """"with these 50 tasks only differences of about 5.4 points or more are reliably seen"."""
    amount = f"{mde:.{digits}f}" + (f" {unit}" if unit else "")
    return f"with these {tasks} task{'s' if tasks != 1 else ''} only differences of about {amount} or more are reliably seen"


# -- the planner's split of the variance --------------------------------------------------------------
@dataclass(frozen=True)
class VarianceParts:
    """The paired difference's variance split three ways (each in the metric's units squared, per unit:
    σ²_task per task, σ²_step per step, σ²_answer per answer of both runs together).

    `answers_known`: whether some run has several answers per step (otherwise σ²_answer is 0 by lack of
    evidence: the noise of sampling, if any, sits inside σ²_step). `answers`: the mean answers per step."""

    task: float
    step: float
    answer: float
    answers_known: bool
    answers: float
    steps: int
    tasks: int
    size_square_sum: float  # Σ mₜ² over the tasks

    def variance(self, tasks_factor: float = 1.0, answers: float | None = None) -> float:
        """The mean difference's variance with `tasks_factor` times the tasks (of the same sizes) and `answers`
        answers per step (None: as now)."""
        k = self.answers if answers is None else answers
        n_steps = self.steps * tasks_factor
        return (self.task * self.size_square_sum * tasks_factor / n_steps ** 2 + self.step / n_steps
                + self.answer / (k * n_steps))

    def shares(self) -> dict[str, float]:
        """Each part's share of the variance now (tasks, steps, answers; they add up to 1)."""
        parts = {"between tasks": self.task * self.size_square_sum / self.steps ** 2,
                 "between steps of a task": self.step / self.steps,
                 "between answers of a step": self.answer / (self.answers * self.steps)}
        total = sum(parts.values())
        return {k: (v / total if total > 0 else 0.0) for k, v in parts.items()}


def split_variance(task: np.ndarray, diff: np.ndarray, answer_variance: np.ndarray | None = None,
                   answers: np.ndarray | None = None) -> VarianceParts:
    """Split the variance of per-step differences `diff` (steps of tasks `task`).

    `answer_variance[s]`: the variance of one answer of step s, both runs' added (None: one answer per step);
    `answers[s]`: the answers step s has (per run, the harmonic mean of the two runs' counts)."""
    task = np.asarray(task, dtype=np.int64)
    diff = np.asarray(diff, dtype=float)
    _, task = np.unique(task, return_inverse=True)
    sizes = np.bincount(task).astype(float)
    n, big_n = len(sizes), float(len(diff))
    means = np.bincount(task, weights=diff) / sizes
    within = float(((diff - means[task]) ** 2).sum() / (big_n - n)) if big_n > n else 0.0
    between = float((sizes * (means - diff.mean()) ** 2).sum() / (n - 1)) if n > 1 else 0.0
    m0 = (big_n - (sizes ** 2).sum() / big_n) / (n - 1) if n > 1 else 1.0
    sigma_task = max(0.0, (between - within) / m0) if m0 > 0 else 0.0
    known = answer_variance is not None and answers is not None
    k = np.asarray(answers, dtype=float) if known else np.ones(len(diff))
    per_answer = float(np.mean(answer_variance)) if known else 0.0
    sampling_now = float(np.mean(np.asarray(answer_variance, dtype=float) / k)) if known else 0.0
    return VarianceParts(task=sigma_task, step=max(0.0, within - sampling_now), answer=per_answer, answers_known=known,
                         answers=float(len(k) / (1.0 / k).sum()), steps=int(big_n), tasks=n,
                         size_square_sum=float((sizes ** 2).sum()))
