"""Which of k runs is best, and what picking each one costs: from the bootstrap figures of the runs judged
together (one row per task resample, the same draws for every run, as lab.scoring.paired makes them).

- `p_best[j]`: the share of resamples in which run j has the top figure (a tie at the top splits the
  resample equally between the tied runs), so the chances add up to 1;
- `expected_regret[j]`: the mean over resamples of (the best figure − run j's figure), in the figures' units
  (points): what choosing run j is expected to give up against whichever run is truly best.

Both read the resamples as draws from the runs' joint uncertainty (the bootstrap's view of the posterior),
which is what a user picking a checkpoint asks for; neither is a test. lab.scoring.paired's intervals say
which differences are seen; these say where the bet lies when none is.

**Pulled toward the mean first** (`shrunk`). Read as they are, the resamples overstate the chance of the
best-looking of close runs: its figure is the highest partly by luck (the winner's curse), and the bootstrap
centres on it. On synthetic checkpoint series whose true differences are a few points, checkpoints given
P(best) 0.5–0.95 were the best far less often than that (bench/bench_pbest.py prints how often). So the lab feeds
best_chances the resamples with their centres pulled toward the runs' mean as far as an empirical-Bayes
normal model says: with k runs of figures θ̂ⱼ, their spread S = Σ(θ̂ⱼ − θ̄)²/(k − 1) and the bootstrap's share of
it N = (Σⱼ var θ̂*ⱼ − var(Σⱼ θ̂*ⱼ)/k)/(k − 1), the factor B = max(0, 1 − N/S) (James–Stein) moves run j's
resamples by (θ̄ + B(θ̂ⱼ − θ̄)) − θ̂ⱼ and keeps their spread (the model's narrower spread would take the
estimate of B as exact; keeping the bootstrap's errs on the side of less certainty: the expected regret it
gives is then on the high side, bench/bench_pbest.py prints both). Runs whose spread is no more than the
noise get nearly equal chances; runs far apart keep their resamples as they were.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BestChances:
    """Each run's chance of being the best and its expected regret (points), in the runs' order."""

    p_best: np.ndarray
    expected_regret: np.ndarray
    resamples: int


def shrunk(boot: np.ndarray, point: np.ndarray, inflate: float = 1.0) -> np.ndarray:
    """The (resamples, k) bootstrap figures `boot` of runs whose own figures are `point`, their centres pulled
    toward the runs' mean (see the module); `inflate` multiplies the bootstrap's variance first (for few tasks: the expanded
    interval's factor, lab.scoring.paired.expanded_alpha). Resamples with a NaN are left as they are."""
    boot = np.asarray(boot, dtype=float)
    point = np.asarray(point, dtype=float)
    k = len(point)
    missing = np.isnan(boot).any(axis=1)
    whole = boot[~missing] if missing.any() else boot  # no copy of a thousand runs' resamples when none lacks
    if k < 2 or len(whole) < 2 or np.isnan(point).any():
        return boot
    spread = float(((point - point.mean()) ** 2).sum() / (k - 1))
    noise = inflate * float(whole.var(axis=0, ddof=1).sum() - whole.sum(axis=1).var(ddof=1) / k) / (k - 1)
    factor = max(0.0, 1.0 - noise / spread) if spread > 0 else 0.0
    centre = point.mean() + factor * (point - point.mean())
    moved = boot - point
    moved += centre
    return moved


def best_chances(boot: np.ndarray, higher_is_better: bool = True) -> BestChances:
    """P(best) and expected regret of k runs from `boot`, their (resamples, k) bootstrap figures.

    Rows with a NaN (a resample in which some run has no weight) are left out."""
    boot = np.asarray(boot, dtype=float)
    if boot.ndim != 2 or boot.shape[1] == 0:
        raise ValueError(f"bootstrap figures: a (resamples, runs) matrix expected, got shape {boot.shape}")
    signed = boot if higher_is_better else -boot
    missing = np.isnan(signed).any(axis=1)
    if missing.any():
        signed = signed[~missing]
    k = boot.shape[1]
    if len(signed) == 0:
        nan = np.full(k, np.nan)
        return BestChances(nan, nan.copy(), 0)
    top = signed.max(axis=1, keepdims=True)
    at_top = signed == top
    tied = at_top.sum(axis=1)
    alone = tied == 1  # the usual resample: one run on top (counted by its index, the rest split equally)
    wins = np.bincount(signed[alone].argmax(axis=1), minlength=k).astype(float)
    if not alone.all():
        wins += (at_top[~alone] / tied[~alone, None]).sum(axis=0)
    p_best = wins / len(signed)
    regret = (top - signed).mean(axis=0)
    return BestChances(p_best, regret, len(signed))


def judged_chances(boot: np.ndarray, point: np.ndarray, effective_tasks: float, confidence: float,
                   higher_is_better: bool = True) -> BestChances:
    """P(best) and expected regret of runs judged together, as the lab reports them: their bootstrap figures
    pulled toward their mean (shrunk), the bootstrap's variance widened as the expanded interval widens it for
    `effective_tasks` tasks."""
    from lab.scoring.paired import expanded_alpha
    from lab.scoring.power import critical_value

    inflate = (critical_value(expanded_alpha(confidence, effective_tasks)) / critical_value(1.0 - confidence)) ** 2
    return best_chances(shrunk(boot, point, inflate), higher_is_better)


def chances_of_runs(task: np.ndarray, values: np.ndarray, *, scale: float = 100.0, resamples: int | None = None,
                    seed: int | None = None, confidence: float | None = None) -> BestChances | None:
    """P(best) and expected regret, as the lab reports them (`judged_chances`), of runs scored step by step:
    `values` (steps, runs), NaN where a run has not answered a step, `task` each step's task. Each run's
    figure is scale × its mean over the steps it answered, its resamples over the drawn tasks it answered (one
    set of task draws for all). None when no run answered a step."""
    from lab.scoring.paired import load_settings, task_counts, task_draws

    task = np.asarray(task, dtype=np.int64)
    values = np.asarray(values, dtype=float)
    seen = ~np.isnan(values)
    tasks = np.unique(task[seen.any(axis=1)])
    if not len(tasks):
        return None
    settings = load_settings()
    keep = np.isin(task, tasks)
    local, n = np.searchsorted(tasks, task[keep]), len(tasks)
    sums = np.column_stack([np.bincount(local, weights=np.nan_to_num(values[keep, j]), minlength=n)
                            for j in range(values.shape[1])])
    steps = np.column_stack([np.bincount(local, weights=seen[keep, j].astype(float), minlength=n)
                             for j in range(values.shape[1])])
    counts = task_counts(task_draws(settings.seed if seed is None else seed, resamples or settings.resamples, n),
                         n).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = scale * (counts @ sums) / (counts @ steps)
        point = scale * sums.sum(axis=0) / steps.sum(axis=0)
    per_task = steps.sum(axis=1)
    effective = float(per_task.sum() ** 2 / (per_task ** 2).sum())
    return judged_chances(boot, point, effective, settings.confidence if confidence is None else confidence)
