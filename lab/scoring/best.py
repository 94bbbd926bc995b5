"""Which of k runs is best, and what picking each one costs: from the bootstrap figures of the runs judged
together (one row per task resample, the same draws for every run, as lab.scoring.paired makes them).

- `p_best[j]`: the share of resamples in which run j has the top figure (a tie at the top splits the
  resample equally between the tied runs), so the chances add up to 1;
- `expected_regret[j]`: the mean over resamples of (the best figure − run j's figure), in the figures' units
  (points): what choosing run j is expected to give up against whichever run is truly best.

Both read the resamples as draws from the runs' joint uncertainty (the bootstrap's view of the posterior),
which is what a user picking a checkpoint asks for; neither is a test. lab.scoring.paired's intervals say
which differences are seen; these say where the bet lies when none is.
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
