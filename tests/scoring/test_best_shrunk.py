"""P(best) as the lab reports it (lab.scoring.best.judged_chances): the resamples' centres pulled toward the runs'
mean by an empirical-Bayes factor, so close runs share the chance instead of the luckiest taking it, and runs far
apart keep theirs."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lab.scoring.best import best_chances, chances_of_runs, judged_chances, shrunk


def resamples(means, sd, rows=4000, seed=0):
    rng = np.random.default_rng(seed)
    shared = rng.normal(0, sd, (rows, 1))  # the runs move together (the same task draws), as paired runs do
    return np.asarray(means) + shared + rng.normal(0, sd, (rows, len(means)))


def test_runs_no_further_apart_than_the_noise_share_the_chance():
    point = np.array([50.0, 50.6, 51.0, 49.8])
    boot = resamples(point, 1.0)
    plain, pulled = best_chances(boot), best_chances(shrunk(boot, point))
    assert np.allclose(shrunk(boot, point).mean(axis=0), point.mean(), atol=0.1)  # no spread beyond the noise
    assert pulled.p_best.max() < plain.p_best.max() and np.allclose(pulled.p_best, 0.25, atol=0.05)
    assert math.isclose(pulled.p_best.sum(), 1.0)


def test_runs_far_apart_keep_their_resamples():
    point = np.array([40.0, 50.0, 60.0])
    boot = resamples(point, 1.0)
    assert np.allclose(shrunk(boot, point).mean(axis=0), point, atol=0.2)
    assert judged_chances(boot, point, 50, 0.95).p_best[2] > 0.99


def test_what_cannot_be_pulled_is_left_alone():
    boot = resamples([50.0], 1.0)
    assert np.array_equal(shrunk(boot, np.array([50.0])), boot)
    boot = resamples([50.0, 51.0], 1.0)
    boot[0, 1] = np.nan
    out = shrunk(boot, np.array([50.0, 51.0]))
    assert np.isnan(out[0, 1]) and not np.isnan(out[1:]).any()


def test_a_resample_lacking_a_run_leaves_the_others_pulled_as_they_were():
    """The pull is measured on the whole resamples only: one lacking a run changes no other resample's figures
    (the same floats), and the caller's resamples are never changed in place."""
    point = np.array([50.0, 50.6, 51.0, 49.8])
    boot = resamples(point, 1.0)
    kept = boot.copy()
    lacking = np.vstack([boot, boot[:1]])
    lacking[-1, 2] = np.nan
    assert np.array_equal(shrunk(lacking, point)[:-1], shrunk(boot, point))
    assert np.array_equal(boot, kept)


def test_chances_of_runs_scored_step_by_step():
    """The race and the training callback's finalists read P(best) from per-step values with gaps: a run that
    answered fewer tasks is judged on those; a clearly better run gets nearly all the chance."""
    rng = np.random.default_rng(3)
    task = np.repeat(np.arange(40), 6)
    base = rng.uniform(0, 1, len(task))
    values = np.column_stack([base, np.clip(base + 0.3, 0, 1), base])
    values[task >= 20, 2] = np.nan  # the third run answered half the tasks
    chances = chances_of_runs(task, values, resamples=500, seed=1)
    assert chances.p_best.sum() == pytest.approx(1.0) and chances.p_best[1] > 0.95
    assert chances.expected_regret[1] < chances.expected_regret[0]
    assert chances_of_runs(task, np.full((len(task), 2), np.nan)) is None
