"""One baseline against many as matrix products (lab.scoring.paired_matrix) gives what lab.scoring.paired gives
one comparison at a time: the replicates, the summaries and so the intervals and MDEs, for comparisons on
different common steps (a mask per comparison) and for a ratio metric."""
from __future__ import annotations

import math

import numpy as np

from lab.scoring import paired_matrix as pm
from lab.scoring.best import best_chances
from lab.scoring.paired import (
    PairedMetric, compare_each, compare_many, load_settings, pairwise_differences, replicates,
    simultaneous_differences, summarize, task_counts, task_draws,
)

R, SEED = 2000, 5


def setting(weighted: bool):
    rng = np.random.default_rng(11)
    task = np.sort(rng.integers(0, 40, 303))
    k = 6
    base = rng.random(303)
    cands = np.clip(base + rng.normal(0.01, 0.2, (k, 303)), 0, 1)
    mask = rng.random((k, 303)) > 0.1
    mask[0] = True
    mask[1, task < 10] = False  # a candidate without a quarter of the tasks
    w_base = rng.integers(20, 300, 303).astype(float) if weighted else np.ones(303)
    w_cand = rng.integers(20, 300, (k, 303)).astype(float) if weighted else np.ones((k, 303))
    metrics = [PairedMetric(task[m], base[m], c[m], w_base[m] if weighted else None, wc[m] if weighted else None,
                            scale=1.0 if weighted else 100.0) for m, c, wc in zip(mask, cands, w_cand)]
    return task, base, w_base, cands, w_cand, mask, metrics


def test_replicates_and_summaries_are_the_per_comparison_ones():
    for weighted in (False, True):
        task, base, w_base, cands, w_cand, mask, metrics = setting(weighted)
        scale = 1.0 if weighted else 100.0
        n = int(task.max()) + 1
        counts = task_counts(task_draws(SEED, R, n), n).astype(float)
        sums = [pm.task_sums(v, mask, task, n) for v in (base, w_base, cands, w_cand)]
        fast = pm.replicate_columns(counts, *sums, scale, chunk=4)
        assert np.allclose(fast, replicates(metrics, n, R, SEED), rtol=0, atol=1e-9)
        got = pm.summaries(base, w_base, cands, w_cand, mask, task, n, scale, True, 1e-9)
        for a, b in zip(got, [summarize(m) for m in metrics]):
            assert (a.steps, a.tasks, a.improved, a.regressed, a.unchanged) == (b.steps, b.tasks, b.improved,
                                                                                 b.regressed, b.unchanged)
            assert math.isclose(a.baseline, b.baseline) and math.isclose(a.effective_tasks, b.effective_tasks)
        settings = load_settings()
        for fast_d, slow_d in ((simultaneous_differences(got, fast, settings, R, SEED, chunk=4),
                                compare_many(metrics, n, resamples=R, seed=SEED)),
                               (pairwise_differences(got, fast, settings, R, SEED),
                                compare_each(metrics, n, resamples=R, seed=SEED))):
            for a, b in zip(fast_d, slow_d):
                assert a.adjustment == b.adjustment and a.verdict == b.verdict
                assert np.allclose([a.low, a.high, a.mde], [b.low, b.high, b.mde], rtol=0, atol=1e-9)


def test_bootstrap_figures_feed_the_chance_of_being_best():
    task, base, w_base, cands, w_cand, _, _ = setting(False)
    n = int(task.max()) + 1
    everything = np.ones((len(cands), 303), dtype=bool)
    value, weight = pm.task_sums(cands, everything, task, n), pm.task_sums(w_cand, everything, task, n)
    boot = pm.figures(task_counts(task_draws(SEED, R, n), n), value, weight, 100.0)
    assert np.allclose(boot.mean(axis=0), 100 * cands.mean(axis=1), atol=1.5)
    found = best_chances(boot)
    assert math.isclose(found.p_best.sum(), 1.0) and found.p_best.argmax() == (100 * cands.mean(axis=1)).argmax()
