"""Benchmark the paired comparison (lab.scoring.paired) on synthetic pairs of runs shaped like TB2-lite
(bench/synthetic_pairs.py: 50 tasks of uneven length and difficulty, 303 steps):

- calibration: of many pairs with no true difference, how many 95 % intervals exclude 0 (at most 5 %
  wanted), with the count, a 95 % Clopper-Pearson interval of the rate and the binomial bound used (the
  most exclusions a true rate of 5 % gives with 99 % probability); the plain percentile interval's rate
  beside it, for what the expansion buys;
- the same for runs with several answers per step (the two-level bootstrap);
- power: at true differences of 1, 2, 3 and 5 points, how often the interval excludes 0 on the right side;
- a worked example: one pair at each true difference, its interval and verdict;
- timing: one comparison of 303 steps × 10,000 resamples (median of repeats), and its two-level variant.

Prints a table and records the figures (bench/record.py: bench/results/bench_paired.json, with the machine's
cores, load and versions; LAB_BENCH_RESULTS=DIR for a trial run):

    python bench/bench_paired.py [--pairs 4000] [--power-pairs 1000] [--sample-pairs 300]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Record  # noqa: E402
from bench.synthetic_pairs import make_pair  # noqa: E402
from lab.scoring.paired import (  # noqa: E402
    PairedMetric, compare, expanded_alpha, load_settings, replicates,
)

DELTAS = (1.0, 2.0, 3.0, 5.0)
TIME_LIMIT_S = 0.2  # one comparison of 303 steps x 10,000 resamples


def binomial_bound(pairs: int, rate: float = 0.05, level: float = 0.99) -> int:
    """The most exclusions a true rate of `rate` gives with probability `level` (one-sided)."""
    from scipy.stats import binom

    return int(binom.ppf(level, pairs, rate))


def clopper_pearson(count: int, pairs: int, level: float = 0.95) -> tuple[float, float]:
    from scipy.stats import beta

    a = (1 - level) / 2
    low = 0.0 if count == 0 else float(beta.ppf(a, count, pairs - count + 1))
    high = 1.0 if count == pairs else float(beta.ppf(1 - a, count + 1, pairs - count))
    return low, high


def run_pairs(pairs: int, delta: float, resamples: int, seed: int, samples: int = 1) -> dict:
    """Draw `pairs` pairs at a true difference of `delta` points; count intervals above / below 0."""
    rng = np.random.default_rng([seed, int(delta * 1000), samples])
    above = below = plain_excl = means_excl = 0
    widths, means_widths = [], []
    for i in range(pairs):
        pair = make_pair(rng, delta, samples=samples)
        metric = PairedMetric(pair.task, pair.baseline, pair.candidate)
        diff = compare(metric, resamples=resamples, seed=i)
        above += diff.low > 0
        below += diff.high < 0
        widths.append(diff.high - diff.low)
        if samples == 1:  # the plain percentile interval of the same draws, for comparison
            column = replicates([metric], int(pair.task.max()) + 1, resamples, i)[:, 0]
            low, high = np.quantile(column, [0.025, 0.975])
            plain_excl += low > 0 or high < 0
        else:  # one level over each step's mean answer, for what the second level adds
            means = compare(PairedMetric(pair.task, pair.baseline.mean(axis=1), pair.candidate.mean(axis=1)),
                            resamples=resamples, seed=i)
            means_excl += means.low > 0 or means.high < 0
            means_widths.append(means.high - means.low)
    return {"pairs": pairs, "true_delta": delta, "samples": samples, "above": int(above), "below": int(below),
            "exclude_0": int(above + below), "rate": (above + below) / pairs, "power": above / pairs,
            "mean_width": float(np.mean(widths)), "plain_percentile_exclude_0": int(plain_excl) if samples == 1 else None,
            "one_level_on_means_exclude_0": int(means_excl) if samples > 1 else None,
            "one_level_on_means_mean_width": float(np.mean(means_widths)) if samples > 1 else None}


def timing(resamples: int, repeat: int, samples: int = 1) -> float:
    pair = make_pair(np.random.default_rng(0), 2.0, samples=samples)
    metric = PairedMetric(pair.task, pair.baseline, pair.candidate)
    compare(metric, resamples=resamples)  # imports and first-call costs outside the timing
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        compare(metric, resamples=resamples)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def worked_example(resamples: int) -> list[dict]:
    out = []
    rng = np.random.default_rng(2026)
    for delta in (0.0, *DELTAS):
        pair = make_pair(rng, delta)
        diff = compare(PairedMetric(pair.task, pair.baseline, pair.candidate), resamples=resamples)
        out.append({"true_delta": delta, "baseline": round(diff.baseline, 2), "candidate": round(diff.candidate, 2),
                    "delta": round(diff.delta, 2), "ci": [round(diff.low, 2), round(diff.high, 2)],
                    "verdict": diff.verdict, "improved": diff.improved, "regressed": diff.regressed,
                    "unchanged": diff.unchanged})
    return out


def record_figures(record: Record, t_one: float, t_two: float, null: dict, null_two: dict, power: list[dict],
                   example: list[dict], repeat: int) -> None:
    """The run's figures and checks, as bench/results/bench_paired.json holds them."""
    bound, bound_two = binomial_bound(null["pairs"]), binomial_bound(null_two["pairs"])
    low, high = clopper_pearson(null["exclude_0"], null["pairs"])
    record.figure("one comparison, 303 steps x 10,000 resamples", t_one, "s", note=f"median of {repeat}")
    record.figure("two-level comparison, 303 steps x 4 answers x 10,000 resamples", t_two, "s")
    record.figure("null pairs whose 95 % interval excludes 0", 100 * null["rate"], "%",
                  note=f"{null['exclude_0']} of {null['pairs']}; 95 % Clopper-Pearson [{100 * low:.1f}, {100 * high:.1f}] %; "
                       f"a true 5 % gives at most {bound} with 99 % probability")
    record.figure("the same, plain percentile interval (not used)", 100 * null["plain_percentile_exclude_0"] / null["pairs"], "%")
    record.figure("mean width of the interval (null pairs)", null["mean_width"], "points")
    record.figure("null pairs excluding 0, 4 answers per step, two levels", 100 * null_two["rate"], "%",
                  note=f"{null_two['exclude_0']} of {null_two['pairs']}; mean width {null_two['mean_width']:.2f} points")
    record.figure("the same pairs, one level over each step's mean answer", 100 * null_two["one_level_on_means_exclude_0"]
                  / null_two["pairs"], "%", note=f"mean width {null_two['one_level_on_means_mean_width']:.2f} points")
    for row in power:
        record.figure(f"power at a true difference of {row['true_delta']:g} points (interval above 0)", 100 * row["power"],
                      "%", note=f"{row['pairs']} pairs; {row['below']} below 0; mean width {row['mean_width']:.2f} points")
    for row in example:
        record.figure(f"worked example, true difference {row['true_delta']:+.1f} points: Δ", row["delta"], "points",
                      note=f"[{row['ci'][0]:+.2f}, {row['ci'][1]:+.2f}] {row['verdict']}; baseline {row['baseline']:.2f}, "
                           f"candidate {row['candidate']:.2f}")
    record.check(f"one comparison under {TIME_LIMIT_S} s", t_one < TIME_LIMIT_S, f"{1000 * t_one:.1f} ms")
    record.check("null exclusions within the binomial bound of a true 5 %", null["exclude_0"] <= bound,
                 f"{null['exclude_0']} ≤ {bound}")
    record.check("two-level null exclusions within that bound", null_two["exclude_0"] <= bound_two,
                 f"{null_two['exclude_0']} ≤ {bound_two}")
    record.check("no interval on the wrong side at 3 and 5 points",
                 all(r["below"] == 0 for r in power if r["true_delta"] >= 3))


def print_table(args: argparse.Namespace, load: float, t_one: float, t_two: float, null: dict, null_two: dict,
                power: list[dict], example: list[dict]) -> None:
    print(f"paired bootstrap over tasks, TB2-lite-shaped synthetic pairs (303 steps, 50 tasks), "
          f"{args.resamples} resamples; {os.cpu_count()} cores, load {load:.1f}")
    print(f"timing: 303 steps × {args.resamples} resamples {1000 * t_one:.1f} ms (median of {args.repeat}); "
          f"two-level, 4 answers per step: {1000 * t_two:.0f} ms")
    print()
    print(f"{'pairs':>6} {'true Δ':>7} {'answers':>7} {'excl. 0':>8} {'rate':>7} {'95 % CI of rate':>17} "
          f"{'bound (99 %)':>12} {'plain pct':>9} {'mean width':>10}")
    for row in (null, null_two):
        lo, hi = clopper_pearson(row["exclude_0"], row["pairs"])
        plain = "" if row["plain_percentile_exclude_0"] is None else f"{row['plain_percentile_exclude_0'] / row['pairs']:.1%}"
        bound = f"≤ {binomial_bound(row['pairs'])}"
        print(f"{row['pairs']:>6} {row['true_delta']:>7.1f} {row['samples']:>7} {row['exclude_0']:>8} {row['rate']:>7.1%} "
              f"{f'[{lo:.1%}, {hi:.1%}]':>17} {bound:>12} {plain:>9} {row['mean_width']:>10.2f}")
    print(f"  4 answers per step, one level over each step's mean answer instead: {null_two['one_level_on_means_exclude_0']}"
          f" of {null_two['pairs']} exclude 0, mean width {null_two['one_level_on_means_mean_width']:.2f} (the second "
          "level counts the answers' noise again: wider, conservative)")
    print()
    print(f"{'pairs':>6} {'true Δ':>7} {'power (low > 0)':>16} {'wrong side':>10} {'mean width':>10}")
    for row in power:
        print(f"{row['pairs']:>6} {row['true_delta']:>7.1f} {row['power']:>16.1%} {row['below']:>10} {row['mean_width']:>10.2f}")
    print()
    print("worked example (one pair at each true difference):")
    for row in example:
        print(f"  true Δ {row['true_delta']:+.1f}: baseline {row['baseline']:.2f}, candidate {row['candidate']:.2f}, "
              f"Δ {row['delta']:+.2f} [{row['ci'][0]:+.2f}, {row['ci'][1]:+.2f}] {row['verdict']} "
              f"({row['improved']} improved, {row['regressed']} regressed, {row['unchanged']} unchanged)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4000, help="null pairs for the calibration")
    parser.add_argument("--power-pairs", type=int, default=1000, help="pairs per true difference")
    parser.add_argument("--sample-pairs", type=int, default=300, help="null pairs with 4 answers per step")
    parser.add_argument("--resamples", type=int, default=load_settings().resamples)
    parser.add_argument("--repeat", type=int, default=20, help="timing repeats")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    record = Record("bench_paired", packages=("scipy",))
    record.setting(pairs=args.pairs, power_pairs=args.power_pairs, sample_pairs=args.sample_pairs,
                   resamples=args.resamples, seed=args.seed, alpha_expanded_50_tasks=round(
                       expanded_alpha(load_settings().confidence, 50), 4))
    load = os.getloadavg()[0]
    t_one = timing(args.resamples, args.repeat)
    t_two = timing(args.resamples, max(3, args.repeat // 4), samples=4)
    null = run_pairs(args.pairs, 0.0, args.resamples, args.seed)
    null_two = run_pairs(args.sample_pairs, 0.0, args.resamples, args.seed, samples=4)
    power = [run_pairs(args.power_pairs, d, args.resamples, args.seed) for d in DELTAS]
    example = worked_example(args.resamples)
    print_table(args, load, t_one, t_two, null, null_two, power, example)
    record_figures(record, t_one, t_two, null, null_two, power, example, args.repeat)
    record.write()  # bench/results/bench_paired.json ($LAB_BENCH_RESULTS for a trial run)


if __name__ == "__main__":
    main()
