"""The all-pairs max-T critical value from a few of the pairs (lab.scoring.all_pairs.critical_value) is the float
the exhaustive statistic gives (np.quantile of worst_pairs), bit for bit: on runs like a store's (noise variants
of one run), runs of different models, checkpoint chains with exact and near duplicates, unstructured numbers,
at every level from the median to the maximum, for 2 runs to more than a few blocks, and from 1 resample up;
and rank_ties ranks as it did with every pair computed."""
from __future__ import annotations

import numpy as np
import pytest

from lab.scoring.all_pairs import BLOCK, critical_value, worst_pairs
from lab.scoring.paired import task_counts, task_draws
from lab.scoring.ranking import rank_ties

TASKS, STEPS, CHUNK = 20, 90, 4_000_000
LEVELS = (0.0, 0.5, 0.9, 0.95, 0.958, 0.99, 1.0)


def step_values(kind: str, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(each step's task, steps × runs values) of k runs of one kind."""
    task = np.sort(np.concatenate([np.arange(TASKS), rng.integers(0, TASKS, STEPS - TASKS)]))
    if kind == "variants":  # a store's runs: one run's steps moved by noise
        values = np.clip(rng.random(STEPS)[:, None] + rng.normal(0, 0.1, (STEPS, k)), 0, 1)
    elif kind == "models":  # runs of different models: their own level and their own strong and weak tasks
        logit = rng.normal(0, 1, k)[None, :] + rng.normal(0, 1, (TASKS, k))[task]
        values = (rng.random((STEPS, k)) < 1 / (1 + np.exp(-logit))) * rng.random((STEPS, k))
    else:  # checkpoints: each a few steps away from the one before, some the same as it
        values = np.empty((STEPS, k))
        values[:, 0] = rng.random(STEPS)
        for j in range(1, k):
            values[:, j] = values[:, j - 1]
            moved = rng.random(STEPS) < (0.0 if j % 5 == 0 else 0.02 if j % 2 else 0.2)
            values[moved, j] = rng.random(moved.sum())
    return task, values


def studentized(task: np.ndarray, values: np.ndarray, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(resamples × runs deviations of the bootstrap figures, runs × runs se of each difference), as rank_ties
    makes them."""
    counts = task_counts(task_draws(seed, resamples, TASKS), TASKS).astype(float)
    sums = np.column_stack([np.bincount(task, weights=v, minlength=TASKS) for v in values.T])
    boot = 100 * (counts @ sums) / (counts @ np.bincount(task, minlength=TASKS).astype(float))[:, None]
    cov = np.atleast_2d(np.cov(boot, rowvar=False)) if resamples > 1 else np.zeros((values.shape[1],) * 2)
    se = np.sqrt(np.maximum(np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2 * cov, 0.0))
    return boot - 100 * values.mean(axis=0), se


def same_float(dev: np.ndarray, se: np.ndarray) -> None:
    worst = worst_pairs(dev, se, CHUNK)
    for level in LEVELS:
        want, got = float(np.quantile(worst, level)), critical_value(dev, se, level, CHUNK)
        assert got == want or (np.isnan(got) and np.isnan(want)), (level, got, want)


@pytest.mark.parametrize("kind", ["variants", "models", "checkpoints"])
@pytest.mark.parametrize("k,resamples", [(2, 400), (3, 1), (BLOCK + 1, 7), (40, 2000), (5 * BLOCK + 3, 3000)])
def test_the_critical_value_is_the_exhaustive_one(kind, k, resamples):
    rng = np.random.default_rng(k * 1000 + resamples)
    task, values = step_values(kind, k, rng)
    same_float(*studentized(task, values, resamples, seed=k))


@pytest.mark.parametrize("block", [1, 2, 5])
def test_blocks_so_small_their_bounds_are_the_ratios_give_the_exhaustive_value(block):
    """Blocks of one run bound each pair by its own ratio: nothing is left to spare in the comparisons."""
    rng = np.random.default_rng(block)
    task, values = step_values("models", 24, rng)
    dev, se = studentized(task, values, 2000, seed=block)
    worst = worst_pairs(dev, se, CHUNK)
    for level in LEVELS:
        assert critical_value(dev, se, level, CHUNK, block) == float(np.quantile(worst, level)), level


def test_pairs_that_do_not_count_and_unstructured_numbers_give_the_exhaustive_value():
    """se 0 (runs that are the same), se tiny beside large ones, a run alone in its last block, and deviations
    that follow no bootstrap (nothing the bounds could lean on)."""
    rng = np.random.default_rng(3)
    k, resamples = 3 * BLOCK + 1, 1500
    dev = rng.normal(0, 1, (resamples, k)) * rng.uniform(0.1, 10, k)
    se = rng.uniform(0.5, 5, (k, k))
    se = (se + se.T) / 2
    np.fill_diagonal(se, 0.0)
    se[2, 9] = se[9, 2] = 0.0                   # a pair that does not count
    se[4, BLOCK + 4] = se[BLOCK + 4, 4] = 1e-9  # a near duplicate in another block: a huge ratio
    se[:, -1] = se[-1, :] = 0.0                 # a run that counts against nobody
    same_float(dev, se)
    se_lower = se.copy()
    se_lower[np.tril_indices(k, -1)] = 0.0      # worst_pairs reads seᵢⱼ of i < j only
    same_float(dev, se_lower)
    same_float(np.zeros((resamples, k)), se)    # every ratio 0
    same_float(dev, np.zeros((k, k)))           # no pair counts


def test_numbers_that_are_not_finite_give_the_exhaustive_value():
    rng = np.random.default_rng(4)
    dev, se = rng.normal(0, 1, (300, 20)), rng.uniform(0.5, 2, (20, 20))
    dev[17, 3] = np.nan
    with np.errstate(invalid="ignore"):
        same_float(dev, se)
        dev[17, 3], se[1, 5] = np.inf, np.inf
        same_float(dev, se)


def test_rank_ties_ranks_as_with_every_pair_computed():
    rng = np.random.default_rng(8)
    task, values = step_values("models", 3 * BLOCK, rng)
    fast = rank_ties(task, values, TASKS, resamples=3000, seed=2)
    every = rank_ties(task, values, TASKS, resamples=3000, seed=2, every_pair=True)
    for name in ("low", "high", "rank", "rank_best", "rank_worst"):
        assert np.array_equal(getattr(fast, name), getattr(every, name)), name
    assert 1 < every.rank_worst.max() and every.rank_best.min() < every.rank_worst.max()  # some runs tell apart
