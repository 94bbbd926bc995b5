"""The minimum detectable effect (lab.scoring.power) and the planner's split of the variance: the MDE is the
difference an interval of its critical value finds 80 % of the time, each interval of lab.scoring.paired carries
it, and the split recovers the parts of a nested model and the variance of a mean under another design."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from lab.scoring.paired import PairedMetric, compare, compare_many, expanded_alpha, load_settings
from lab.scoring.power import critical_value, detectable, detectable_words, split_variance


def test_the_mde_is_found_80_percent_of_the_time_by_an_interval_of_that_critical_value():
    se, crit = 1.7, critical_value(0.042)
    mde = detectable(se, crit)
    assert math.isclose(mde, (stats.norm.ppf(1 - 0.021) + stats.norm.ppf(0.8)) * se)
    assert math.isclose(stats.norm.sf(crit - mde / se), 0.8)  # P(estimate − c·se > 0) at a true mde
    assert math.isnan(detectable(float("nan"), crit))


def test_the_words_a_reader_without_statistics_follows():
    assert detectable_words(5.43, 50) == ("with these 50 tasks only differences of about 5.4 points or more are "
                                          "reliably seen")
    assert detectable_words(0.0123, 1, "", 3) == "with these 1 task only differences of about 0.012 or more are reliably seen"


def test_each_interval_carries_the_mde_of_its_own_level():
    rng = np.random.default_rng(3)
    task = np.repeat(np.arange(50), 6)
    base = rng.random(300)
    cands = [np.clip(base + rng.normal(0, 0.2, 300), 0, 1) for _ in range(4)]
    metric = PairedMetric(task, base, cands[0])
    one = compare(metric, resamples=2000)
    alpha = expanded_alpha(load_settings().confidence, metric.effective_tasks)
    half = (one.high - one.low) / 2
    se = half / critical_value(alpha)  # the percentile interval is close to ±c·se
    assert one.mde == pytest.approx((critical_value(alpha) + stats.norm.ppf(0.8)) * se, rel=0.1)
    many = compare_many([PairedMetric(task, base, c) for c in cands], resamples=2000)
    assert all(d.mde > one.mde * 0.9 for d in many)  # simultaneous: a larger critical value, a larger MDE
    for d in many:  # mde = (c + z)·se and the half-width = c·se: one c for all
        ratio = d.mde / ((d.high - d.low) / 2)
        assert ratio == pytest.approx(many[0].mde / ((many[0].high - many[0].low) / 2))


def nested(rng, n_tasks, sizes, task_sd, step_sd, answer_sd, answers):
    task = np.repeat(np.arange(n_tasks), sizes)
    truth = rng.normal(0, task_sd, n_tasks)[task] + rng.normal(0, step_sd, len(task))
    return task, truth + rng.normal(0, answer_sd, (len(task), answers)).mean(axis=1)


def test_the_split_recovers_a_nested_model_and_the_variance_of_its_mean():
    rng = np.random.default_rng(0)
    sizes = 1 + rng.poisson(5, 200)
    parts = []
    for _ in range(40):
        task, diff = nested(rng, 200, sizes, 2.0, 1.0, 3.0, 4)
        parts.append(split_variance(task, diff, np.full(len(task), 9.0), np.full(len(task), 4.0)))
    assert np.mean([p.task for p in parts]) == pytest.approx(4.0, rel=0.15)
    assert np.mean([p.step for p in parts]) == pytest.approx(1.0, rel=0.25)
    assert parts[0].answer == 9.0 and parts[0].answers == 4.0
    # the variance of the mean difference under other designs, against simulation
    p = parts[0]
    for factor, k in ((1, 4), (1, 1), (2, 4)):
        means = [nested(rng, 200 * factor, np.tile(sizes, factor), 2.0, 1.0, 3.0, k)[1].mean() for _ in range(600)]
        want = 4.0 * (np.tile(sizes, factor) ** 2).sum() / (sizes.sum() * factor) ** 2 + 1.0 / (sizes.sum() * factor) \
            + 9.0 / (k * sizes.sum() * factor)
        assert np.var(means) == pytest.approx(want, rel=0.2)
        assert p.variance(factor, k) == pytest.approx(want, rel=0.35)
    shares = p.shares()
    assert math.isclose(sum(shares.values()), 1.0)


def test_without_answers_the_spread_of_sampling_stays_in_the_steps():
    rng = np.random.default_rng(1)
    task, diff = nested(rng, 50, np.full(50, 6), 0.0, 1.0, 2.0, 1)
    parts = split_variance(task, diff)
    assert not parts.answers_known and parts.answer == 0.0
    assert parts.step == pytest.approx(5.0, rel=0.3)  # 1 + 2²: the answers' noise is inside
    assert parts.variance(1, 8) == parts.variance(1, 1)  # more answers change nothing it can see
