"""Calibration and power of the paired comparison on synthetic pairs shaped like TB2-lite (bench/synthetic_pairs.py:
303 steps of 50 tasks of uneven length and difficulty), at a size that fits the fast loop. bench/bench_paired.py
measures the same at full size (4,000 null pairs, 10,000 resamples) and prints the rates."""
from __future__ import annotations

import numpy as np
from scipy.stats import binom

from bench.synthetic_pairs import make_pair
from lab.scoring.paired import PairedMetric, compare

RESAMPLES = 1000


def exclusions(pairs: int, delta: float, seed: int, samples: int = 1) -> tuple[int, int, float]:
    """(intervals above 0, intervals below 0, mean width) over `pairs` fresh pairs."""
    rng = np.random.default_rng(seed)
    above = below = 0
    widths = []
    for i in range(pairs):
        pair = make_pair(rng, delta, samples=samples)
        diff = compare(PairedMetric(pair.task, pair.baseline, pair.candidate), resamples=RESAMPLES, seed=i)
        above += diff.low > 0
        below += diff.high < 0
        widths.append(diff.high - diff.low)
    return above, below, float(np.mean(widths))


def test_null_pairs_exclude_0_at_most_5_percent_of_the_time():
    """400 pairs with no true difference: a true exclusion rate of 5 % gives more than the bound below with
    probability 0.001 (one-sided binomial), so a count above it means the intervals are too narrow."""
    pairs = 400
    above, below, width = exclusions(pairs, 0.0, seed=11)
    bound = int(binom.ppf(0.999, pairs, 0.05))  # 33 of 400
    assert above + below <= bound, f"{above + below} of {pairs} null intervals exclude 0 (bound {bound})"
    assert 5.0 < width < 9.5  # ±2.5 to ±4.75 points, as DESIGN §8 expects of TB2-lite-shaped runs


def test_the_interval_finds_a_5_point_difference_most_of_the_time_and_never_the_wrong_way():
    """Power at a true difference of 5 points: about 75 % at full size (bench/bench_paired.py); 150 pairs here, so
    at least 60 % (a true 75 % falls below that with probability under 0.001), none on the wrong side."""
    pairs = 150
    above, below, _ = exclusions(pairs, 5.0, seed=12)
    assert above >= 0.6 * pairs, f"{above} of {pairs} intervals above 0 at a true difference of 5 points"
    assert below == 0


def test_power_grows_with_the_true_difference():
    pairs = 120
    found = [exclusions(pairs, delta, seed=13)[0] for delta in (1.0, 3.0, 5.0)]
    assert found[0] < found[1] < found[2], found


def test_sampling_noise_widens_the_interval():
    """Four answers per step: the two-level bootstrap's interval is wider than the one that takes each step's
    mean answer as fixed (sampling noise counted), and its null pairs stay calibrated."""
    rng = np.random.default_rng(14)
    wider = 0
    pairs = 12
    for i in range(pairs):
        pair = make_pair(rng, 0.0, samples=4)
        two = compare(PairedMetric(pair.task, pair.baseline, pair.candidate), resamples=500, seed=i)
        means = compare(PairedMetric(pair.task, pair.baseline.mean(axis=1), pair.candidate.mean(axis=1)),
                        resamples=500, seed=i)
        wider += (two.high - two.low) > (means.high - means.low)
        assert two.two_level and two.delta == means.delta
    assert wider >= pairs - 1
    above, below, _ = exclusions(30, 0.0, seed=15, samples=4)
    assert above + below <= int(binom.ppf(0.999, 30, 0.05))
