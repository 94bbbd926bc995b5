"""Runs ranked on the same steps, with which of them are statistically tied: simultaneous intervals on every
pair of k runs (max-T over one set of task draws, as lab.scoring.paired draws them), and each run's rank range.
The Results table's per-step rank column reads it (lab.analysis.leaderboard)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.scoring.paired import (
    PAIRWISE, BootstrapSettings, PairedMetric, _settings, expanded_alpha, simultaneous_label, task_counts,
    summarize, task_draws, too_few,
)
from lab.scoring.all_pairs import critical_value, worst_pairs


@dataclass(frozen=True)
class Ranking:
    """Runs ranked on the same steps, with which of them are statistically tied.

    `delta[i, j]`, `low[i, j]`, `high[i, j]`: run j − run i with its interval, all k(k−1)/2 pairs
    simultaneous (max-T over one set of task draws). A run's rank range: 1 + the runs surely better than it,
    to k − the runs surely worse."""

    figures: np.ndarray
    delta: np.ndarray
    low: np.ndarray
    high: np.ndarray
    rank: np.ndarray
    rank_best: np.ndarray
    rank_worst: np.ndarray
    pairs: int
    steps: int
    tasks: int
    adjustment: str

    def tied_with(self, i: int) -> np.ndarray:
        """The runs whose difference from run i has an interval holding 0 (their indices, ascending)."""
        row = (self.low[i] <= 0) & (self.high[i] >= 0)
        row[i] = False
        return np.flatnonzero(row)


def rank_ties(task: np.ndarray, values: np.ndarray, n_tasks: int | None = None, *, scale: float = 100.0,
              resamples: int | None = None, seed: int | None = None, settings: BootstrapSettings | None = None,
              every_pair: bool = False) -> Ranking | None:
    """Rank k runs scored on the same steps (`values`: steps × runs, higher is better) with simultaneous
    intervals on every pair; None when the steps are too few for intervals. `every_pair`: the intervals'
    critical value from every pair of every resample (lab.scoring.all_pairs.worst_pairs), the reference the
    pruned path is held to (the same floats, many times slower)."""
    settings, resamples, seed = _settings(resamples, seed, settings)
    task = np.asarray(task, dtype=np.int64)
    values = np.asarray(values, dtype=float)
    k = values.shape[1]
    probe = PairedMetric(task, values[:, 0], values[:, -1])
    if k < 2 or too_few(summarize(probe, settings.unchanged_tolerance), settings):
        return None
    n_tasks = n_tasks or int(task.max()) + 1
    counts = task_counts(task_draws(seed, resamples, n_tasks), n_tasks).astype(float)
    sums = np.column_stack([np.bincount(task, weights=values[:, j], minlength=n_tasks) for j in range(k)])
    steps_per_task = np.bincount(task, minlength=n_tasks).astype(float)
    boot = scale * (counts @ sums) / (counts @ steps_per_task)[:, None]          # (R, k) each run's figure
    figures = scale * values.mean(axis=0)
    cov = np.cov(boot, rowvar=False)
    var = np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2 * cov
    se = np.sqrt(np.maximum(var, 0.0))
    alpha = expanded_alpha(settings.confidence, probe.effective_tasks)
    if every_pair:
        crit = float(np.quantile(worst_pairs(boot - figures, se, settings.chunk_values), 1 - alpha))
    else:
        crit = critical_value(boot - figures, se, 1 - alpha, settings.chunk_values)
    delta = figures[None, :] - figures[:, None]
    low, high = delta - crit * se, delta + crit * se
    rank_best = 1 + (low > 0).sum(axis=1)       # 1 + the runs j surely better than run i
    rank_worst = k - (low > 0).sum(axis=0)      # k − the runs i that run j surely beats
    order = np.argsort(-figures, kind="stable")
    rank = np.empty(k, dtype=int)
    rank[order] = np.arange(1, k + 1)
    pairs = k * (k - 1) // 2
    return Ranking(figures, delta, low, high, rank, rank_best, rank_worst, pairs, len(task), probe.tasks,
                   simultaneous_label(pairs) if pairs > 1 else PAIRWISE)
