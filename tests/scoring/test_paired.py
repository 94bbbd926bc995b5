"""The paired comparison (lab.scoring.paired): the vectorised bootstrap is the straightforward per-resample loop
written out here (same seed, same draws: the same interval), agrees with scipy.stats.bootstrap where every step
is its own task, and says so instead of an interval when the steps are too few."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from lab.scoring.paired import (
    BETTER, NO_INTERVAL, TIED, WORSE, PairedMetric, compare, compare_each, compare_many, load_settings,
    task_contributions,
)

SEED = 7
RESAMPLES = 2000


def uneven_tasks(rng: np.random.Generator, n_tasks: int = 50, n_steps: int = 303) -> np.ndarray:
    counts = 1 + rng.multinomial(n_steps - n_tasks, rng.dirichlet(np.full(n_tasks, 2.0)))
    return rng.permutation(np.repeat(np.arange(n_tasks), counts))  # a task's steps need not be adjacent


def expanded_alpha_written_out(n_eff: float, confidence: float = 0.95) -> float:
    """Hesterberg's expanded percentile: Φ⁻¹(1 − α′/2) = √(n/(n−1)) · t_{n−1}(1 − α/2)."""
    alpha = 1 - confidence
    return 2 * stats.norm.sf(math.sqrt(n_eff / (n_eff - 1)) * stats.t.ppf(1 - alpha / 2, n_eff - 1))


def effective_tasks(task: np.ndarray, weight: np.ndarray) -> float:
    per_task = np.array([weight[task == t].sum() for t in np.unique(task)])
    return per_task.sum() ** 2 / (per_task ** 2).sum()


def loop_interval(task, a_num, b_num, a_den=None, b_den=None, seed=SEED, resamples=RESAMPLES, scale=100.0):
    """The straightforward bootstrap: for each resample, draw tasks with replacement, keep all their steps,
    recompute each run's Σ value / Σ weight and take the difference."""
    a_den = np.ones(len(task)) if a_den is None else a_den
    b_den = np.ones(len(task)) if b_den is None else b_den
    n_tasks = int(task.max()) + 1
    draws = np.random.default_rng(seed).integers(0, n_tasks, size=(resamples, n_tasks))
    steps_of = {t: np.flatnonzero(task == t) for t in range(n_tasks)}
    values = []
    for r in range(resamples):
        rows = np.concatenate([steps_of[t] for t in draws[r]])
        values.append(scale * (b_num[rows].sum() / b_den[rows].sum() - a_num[rows].sum() / a_den[rows].sum()))
    alpha = expanded_alpha_written_out(effective_tasks(task, a_den + b_den))
    return np.quantile(values, [alpha / 2, 1 - alpha / 2])


def test_the_interval_is_a_per_resample_loop_over_drawn_tasks():
    rng = np.random.default_rng(1)
    task = uneven_tasks(rng)
    a = rng.beta(0.5, 0.7, len(task))
    b = np.clip(a + rng.normal(0.03, 0.25, len(task)), 0, 1)
    diff = compare(PairedMetric(task, a, b), resamples=RESAMPLES, seed=SEED)
    low, high = loop_interval(task, a, b)
    assert diff.low == pytest.approx(low, abs=1e-9) and diff.high == pytest.approx(high, abs=1e-9)
    assert diff.delta == pytest.approx(100 * (b.mean() - a.mean()), abs=1e-12)
    assert (diff.steps, diff.tasks, diff.resamples, diff.seed) == (303, 50, RESAMPLES, SEED)


def test_a_ratio_metric_resamples_numerator_and_weight_together():
    """The reference NLL per token: total NLL / total tokens of each run over the drawn tasks' steps."""
    rng = np.random.default_rng(2)
    task = uneven_tasks(rng)
    tokens_a, tokens_b = rng.integers(5, 400, len(task)).astype(float), rng.integers(5, 400, len(task)).astype(float)
    nll_a = tokens_a * rng.gamma(2.0, 0.8, len(task))
    nll_b = tokens_b * rng.gamma(2.0, 0.75, len(task))
    metric = PairedMetric(task, nll_a, nll_b, tokens_a, tokens_b, scale=1.0, higher_is_better=False)
    diff = compare(metric, resamples=RESAMPLES, seed=SEED)
    low, high = loop_interval(task, nll_a, nll_b, tokens_a, tokens_b, scale=1.0)
    assert (diff.low, diff.high) == pytest.approx((low, high), abs=1e-12)
    assert diff.delta == pytest.approx(nll_b.sum() / tokens_b.sum() - nll_a.sum() / tokens_a.sum())


@pytest.mark.parametrize("fewer", [0.0, 0.3])
def test_two_levels_are_a_loop_over_tasks_then_over_each_steps_answers(fewer):
    """Several answers per step: each drawn copy of a task redraws its steps' answers with replacement (as many
    as the step has), in the order tasks were drawn; the answers' draws come from the seed's second stream."""
    rng = np.random.default_rng(3)
    task = uneven_tasks(rng, n_tasks=12, n_steps=60)
    a = rng.random(len(task))
    width = 4
    b = rng.random((len(task), width))
    b[rng.random(len(task)) < fewer, 2:] = np.nan  # a share of the steps have 2 answers, the rest 4
    resamples = 300
    diff = compare(PairedMetric(task, a, b), resamples=resamples, seed=SEED)
    n_tasks = 12
    draws = np.random.default_rng(SEED).integers(0, n_tasks, size=(resamples, n_tasks))
    inner = np.random.default_rng([SEED, 1])
    steps_of = {t: np.flatnonzero(task == t) for t in range(n_tasks)}
    values = []
    for r in range(resamples):
        rows = np.concatenate([steps_of[t] for t in draws[r]])
        total_b = 0.0
        for row in rows:
            answers = b[row][~np.isnan(b[row])]
            u = inner.random(width)[: len(answers)]
            total_b += answers[(u * len(answers)).astype(int)].mean()
        values.append(100 * (total_b - a[rows].sum()) / len(rows))
    alpha = expanded_alpha_written_out(effective_tasks(task, np.full(len(task), 2.0)))
    assert [diff.low, diff.high] == pytest.approx(np.quantile(values, [alpha / 2, 1 - alpha / 2]), abs=1e-9)
    assert diff.two_level
    assert diff.candidate == pytest.approx(100 * np.nanmean(b, axis=1).mean())


def test_one_step_per_task_agrees_with_scipy_paired_percentile_bootstrap():
    rng = np.random.default_rng(4)
    n = 303
    a = rng.beta(0.6, 0.8, n)
    b = np.clip(a + rng.normal(0.02, 0.3, n), 0, 1)
    diff = compare(PairedMetric(np.arange(n), a, b), resamples=10_000, seed=SEED)
    alpha = expanded_alpha_written_out(n)
    ours = np.array([diff.low, diff.high])
    ref = stats.bootstrap((a, b), lambda x, y, axis=-1: 100 * (y.mean(axis=axis) - x.mean(axis=axis)), paired=True,
                          vectorized=True, method="percentile", confidence_level=1 - alpha, n_resamples=10_000,
                          random_state=np.random.default_rng(99))
    theirs = np.array([ref.confidence_interval.low, ref.confidence_interval.high])
    # Monte-Carlo error of a 2.5 % quantile of 10,000 resamples is about 0.03 standard errors; two
    # independent ones differ by about 0.04: allow 0.15 standard errors (over 3.5 times that)
    assert np.abs(ours - theirs).max() < 0.15 * ref.standard_error, (ours, theirs, ref.standard_error)
    assert 0.048 < alpha < 0.05  # 303 tasks: the expansion is small


def test_the_same_seed_gives_the_same_interval_and_another_seed_another():
    rng = np.random.default_rng(5)
    task = uneven_tasks(rng)
    metric = PairedMetric(task, rng.random(len(task)), rng.random(len(task)))
    first, again = compare(metric, seed=3, resamples=1000), compare(metric, seed=3, resamples=1000)
    assert (first.low, first.high) == (again.low, again.high)
    assert (first.low, first.high) != (compare(metric, seed=4, resamples=1000).low,
                                       compare(metric, seed=4, resamples=1000).high)


def test_too_few_common_steps_or_tasks_say_so_instead_of_an_interval():
    settings = load_settings()
    rng = np.random.default_rng(6)
    few = settings.min_common_steps - 1
    diff = compare(PairedMetric(np.arange(few) % 10, rng.random(few), rng.random(few)), resamples=500)
    assert diff.ci is None and diff.verdict == NO_INTERVAL
    assert diff.note == f"fewer than {settings.min_common_steps} common steps ({few}): no interval"
    assert diff.delta == pytest.approx(diff.candidate - diff.baseline)
    two_tasks = compare(PairedMetric(np.arange(40) % 2, rng.random(40), rng.random(40)), resamples=500)
    assert two_tasks.ci is None and two_tasks.note == f"fewer than {settings.min_common_tasks} common tasks (2): no interval"


def test_counts_verdicts_and_the_direction_of_a_lower_is_better_metric():
    task = np.repeat(np.arange(40), 2)
    base = np.full(80, 0.4)
    cand = base.copy()
    cand[:50] += 0.2
    cand[50:60] -= 0.1
    better = compare(PairedMetric(task, base, cand), resamples=1000)
    assert (better.improved, better.regressed, better.unchanged) == (50, 10, 20)
    assert better.verdict == BETTER and better.low > 0
    worse = compare(PairedMetric(task, cand, base), resamples=1000)
    assert worse.verdict == WORSE and worse.worse_by_more_than(1.0) and not worse.worse_by_more_than(50.0)
    nll = compare(PairedMetric(task, base, cand, scale=1.0, higher_is_better=False), resamples=1000)
    assert nll.verdict == WORSE and (nll.improved, nll.regressed) == (10, 50)  # a higher NLL is worse
    assert nll.worse_by_more_than(0.01) and not nll.worse_by_more_than(1.0)
    same = compare(PairedMetric(task, base, base), resamples=1000)
    assert (same.low, same.high, same.verdict, same.unchanged) == (0.0, 0.0, TIED, 80)


def test_task_contributions_add_up_to_the_difference():
    rng = np.random.default_rng(8)
    task = uneven_tasks(rng)
    tokens = rng.integers(1, 50, len(task)).astype(float)
    for metric in (PairedMetric(task, rng.random(len(task)), rng.random(len(task))),
                   PairedMetric(task, rng.random(len(task)) * tokens, rng.random(len(task)) * tokens, tokens,
                                tokens[::-1].copy(), scale=1.0)):
        tasks, steps, share = task_contributions(metric)
        assert share.sum() == pytest.approx(metric.figure("candidate") - metric.figure("baseline"), abs=1e-12)
        assert steps.sum() == len(task) and list(tasks) == list(range(50))


def test_simultaneous_intervals_hold_k_comparisons_together():
    """max-T over k comparisons with one set of task draws: each interval is wider than its pairwise one, one
    comparison alone (or the one left with an interval) gets its pairwise interval, the same one compare_each
    gives (issue 56: a family of one labelled "pairwise" showed a max-T interval of its own), and comparisons
    without enough steps do not count in k."""
    rng = np.random.default_rng(9)
    task = uneven_tasks(rng)
    base = rng.random(len(task))
    metrics = [PairedMetric(task, base, np.clip(base + rng.normal(d, 0.2, len(task)), 0, 1)) for d in (0, 0.01, 0.03, 0.05)]
    pairwise = compare_each(metrics, resamples=4000, seed=SEED)
    together = compare_many(metrics, resamples=4000, seed=SEED)
    for one, many in zip(pairwise, together):
        assert many.high - many.low > one.high - one.low
        assert many.low < many.delta < many.high and many.delta == one.delta
        assert many.adjustment == "simultaneous over 4 comparisons (max-T)"
    alone = compare_many(metrics[:1], resamples=4000, seed=SEED)[0]
    assert alone.adjustment == "pairwise"
    assert (alone.low, alone.high, alone.mde) == pytest.approx((pairwise[0].low, pairwise[0].high, pairwise[0].mde),
                                                               abs=1e-12)
    short = PairedMetric(np.arange(10), base[:10], base[:10])
    mixed = compare_many([*metrics[:2], short], resamples=4000, seed=SEED)
    assert mixed[2].ci is None and mixed[0].adjustment == "simultaneous over 2 comparisons (max-T)"
    left_alone = compare_many([metrics[0], short], resamples=4000, seed=SEED)
    assert left_alone[1].ci is None and left_alone[0].adjustment == "pairwise"
    assert left_alone[0].ci == pytest.approx(pairwise[0].ci, abs=1e-12)


@pytest.mark.parametrize("bad", [
    dict(task=np.arange(3), baseline=np.ones(4), candidate=np.ones(3)),
    dict(task=np.arange(3), baseline=np.array([[1.0], [np.nan], [1.0]]), candidate=np.ones(3)),
    dict(task=np.arange(3), baseline=np.ones(3), candidate=np.ones(3), baseline_weight=np.array([1.0, -1.0, 1.0])),
])
def test_malformed_inputs_are_refused(bad):
    with pytest.raises(ValueError):
        PairedMetric(**bad)


def test_resamples_outside_the_settings_are_refused():
    metric = PairedMetric(np.arange(40), np.ones(40), np.ones(40))
    with pytest.raises(ValueError, match="resamples must be between"):
        compare(metric, resamples=10)
    with pytest.raises(ValueError, match="resamples must be between"):
        compare(metric, resamples=load_settings().max_resamples + 1)
