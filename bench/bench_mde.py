"""Benchmark the minimum detectable effect (lab.scoring.power) the lab reports beside every interval: on synthetic
pairs of runs shaped like TB2-lite (bench/synthetic_pairs.py: 303 steps of 50 tasks), how often does the 95 %
interval find a true difference equal to the reported MDE? 80 % is what the MDE promises.

1. pilot pairs at a true difference near it give the MDE the lab reports for such a pair (their median);
2. pairs whose true difference is that MDE: the share whose interval lies above 0, with its 95 % Clopper-Pearson
   interval and the number of pairs; the median MDE reported on those pairs beside it;
3. the same for runs with 4 answers per step (the two-level bootstrap), with fewer pairs and resamples;
4. what TB2-lite can see: the MDE for one answer per step, and for 2 and 4 answers and 2× and 4× the tasks
   (the planner's model on the pilot pairs, lab.analysis.plan), for docs/compare-runs.md.

    python bench/bench_mde.py [--pairs 1000] [--pilot 200] [--sample-pairs 150]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_paired import clopper_pearson  # noqa: E402
from bench.record import Record  # noqa: E402
from bench.synthetic_pairs import make_pair  # noqa: E402
from lab.scoring.paired import PairedMetric, compare, expanded_alpha, load_settings  # noqa: E402
from lab.scoring.power import critical_value, split_variance, z_power  # noqa: E402

PILOT_DELTA = 5.0
WANTED = 0.80


def draw(pairs: int, delta: float, resamples: int, seed: int, samples: int = 1) -> list:
    rng = np.random.default_rng([seed, int(delta * 1000), samples])
    out = []
    for i in range(pairs):
        pair = make_pair(rng, delta, samples=samples)
        metric = PairedMetric(pair.task, pair.baseline, pair.candidate)
        out.append((metric, compare(metric, resamples=resamples, seed=i)))
    return out


def found_rate(pairs: int, delta: float, resamples: int, seed: int, samples: int = 1) -> dict:
    got = draw(pairs, delta, resamples, seed, samples)
    found = sum(d.low > 0 for _, d in got)
    low, high = clopper_pearson(found, pairs)
    return {"pairs": pairs, "true_delta": delta, "found": found, "rate": found / pairs, "ci": [low, high],
            "median_mde": statistics.median(d.mde for _, d in got), "samples": samples}


def designs(pilot: list) -> dict[str, float]:
    """The median over pilot pairs of the planner's MDE for other designs (one answer per step: the between-steps
    part holds the answers' noise, so more answers are shown with all of it counted as answers' noise)."""
    rows: dict[str, list[float]] = {}
    for metric, diff in pilot:
        d = 100 * (metric.step_means("candidate") - metric.step_means("baseline"))
        parts = split_variance(metric.task, d - d.mean())
        crit = critical_value(expanded_alpha(load_settings().confidence, metric.effective_tasks))
        for label, factor, answers in (("as now: 50 tasks, 1 answer per step", 1, 1), ("2× the tasks", 2, 1),
                                       ("4× the tasks", 4, 1)):
            c = critical_value(expanded_alpha(load_settings().confidence, metric.effective_tasks * factor))
            scale = np.sqrt(parts.variance(factor, answers) / parts.variance()) * (c + z_power()) / (crit + z_power())
            rows.setdefault(label, []).append(diff.mde * scale)
        shares = parts.shares()
        rows.setdefault("share of the variance between tasks (%)", []).append(100 * shares["between tasks"])
    return {k: statistics.median(v) for k, v in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000, help="pairs at a true difference of the MDE")
    parser.add_argument("--pilot", type=int, default=200, help="pilot pairs that give the MDE")
    parser.add_argument("--sample-pairs", type=int, default=150, help="pairs with 4 answers per step")
    parser.add_argument("--resamples", type=int, default=load_settings().resamples)
    parser.add_argument("--sample-resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    record = Record("bench_mde", packages=("scipy",))
    record.setting(pairs=args.pairs, pilot=args.pilot, sample_pairs=args.sample_pairs, resamples=args.resamples,
                   sample_resamples=args.sample_resamples, seed=args.seed, wanted=WANTED)
    pilot = draw(args.pilot, PILOT_DELTA, args.resamples, args.seed)
    mde = round(statistics.median(d.mde for _, d in pilot), 2)
    one = found_rate(args.pairs, mde, args.resamples, args.seed + 1)
    pilot_two = draw(max(20, args.pilot // 5), PILOT_DELTA, args.sample_resamples, args.seed + 2, samples=4)
    mde_two = round(statistics.median(d.mde for _, d in pilot_two), 2)
    two = found_rate(args.sample_pairs, mde_two, args.sample_resamples, args.seed + 3, samples=4)
    plan = designs(pilot)
    print(f"TB2-lite-shaped pairs (303 steps, 50 tasks); the MDE the lab reports for such a pair: {mde:.2f} points "
          f"(median of {args.pilot} pilot pairs at a true {PILOT_DELTA:g})")
    print(f"\n{'answers':>7} {'true Δ = MDE':>12} {'pairs':>6} {'found':>6} {'rate':>7} {'95 % CI':>17} {'MDE reported':>13}")
    for row in (one, two):
        ci = f"[{row['ci'][0]:.1%}, {row['ci'][1]:.1%}]"
        print(f"{row['samples']:>7} {row['true_delta']:>12.2f} {row['pairs']:>6} {row['found']:>6} {row['rate']:>7.1%} "
              f"{ci:>17} {row['median_mde']:>13.2f}")
    print(f"\nwhat TB2-lite can see (the planner's model, median over the pilot pairs), wanted {WANTED:.0%}:")
    for label, value in plan.items():
        print(f"  {label:<42} {value:6.2f}")
    for row, label in ((one, "one answer per step"), (two, "4 answers per step, two-level bootstrap")):
        record.figure(f"MDE reported for a TB2-lite-shaped pair, {label}", row["true_delta"], "points",
                      note=f"median over the pilot pairs; on the pairs below: {row['median_mde']:.2f}")
        record.figure(f"pairs at a true difference of the MDE whose interval finds it, {label}", 100 * row["rate"], "%",
                      note=f"{row['found']} of {row['pairs']}; 95 % Clopper-Pearson [{100 * row['ci'][0]:.1f}, "
                           f"{100 * row['ci'][1]:.1f}] %; 80 % wanted")
    for label, value in plan.items():
        unit = "%" if label.endswith("(%)") else "points"
        record.figure(f"what TB2-lite can see: {label.removesuffix(' (%)')}", value, unit,
                      note="the planner's model, median over the pilot pairs (one answer per step)")
    record.check("the interval finds a true difference of the MDE about 80 % of the time (70-90 %)",
                 0.70 <= one["rate"] <= 0.90, f"{one['rate']:.1%}")
    record.write()


if __name__ == "__main__":
    main()
