"""Benchmark the race of a checkpoint series (`python -m lab sweep --race`: lab.sweep.race_book and
lab.scoring.sequential) on synthetic series shaped like TB2-lite (bench/synthetic_series.py: 303 steps of 50
tasks, task effects and step noise as bench/synthetic_pairs.py models them), each raced in rounds of whole
tasks shuffled with its own seed, exactly as the race plans and judges a real series:

- error rate: of many series of equal checkpoints, how many lose any checkpoint (at most 5 % wanted), with a
  95 % Clopper-Pearson interval of the rate and the binomial bound used (the most a true 5 % gives with 99 %
  probability);
- savings: on series where one checkpoint is clearly better than the others, how often it is kept and what
  share of the full sweep's steps the race spends (at most 60 % wanted), with the rounds it took;
- the same at other true differences, and with the other spending functions (what the choice buys).

Prints a table and records the figures (bench/record.py: bench/results/bench_race.json, with the machine's
cores, load and versions; LAB_BENCH_RESULTS=DIR for a trial run):

    python bench/bench_race.py [--series 400] [--checkpoints 5] [--delta 15] [--other-series 200]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_paired import binomial_bound, clopper_pearson  # noqa: E402
from bench.record import Record  # noqa: E402
from bench.synthetic_series import make_series  # noqa: E402
from lab.scoring.sequential import SPENDING, RaceSettings, load_race_settings  # noqa: E402
from lab.sweep.race_book import ONE_LEFT, STEPS_RAN_OUT, RaceBook  # noqa: E402
from lab.sweep.race_plan import plan_rounds  # noqa: E402

ERROR_LIMIT, SHARE_LIMIT = 0.05, 0.60
OTHER_DELTAS = (5.0, 10.0)


def race_series(series, settings: RaceSettings, seed: int) -> tuple[RaceBook, int]:
    """Race one synthetic series as `python -m lab sweep --race` would: (its book, steps replayed)."""
    k = series.values.shape[1]
    plan = plan_rounds(series.steps, settings.round_tasks, seed)
    keys = [s.key for s in series.steps]
    names = [f"checkpoint-{j}" for j in range(k)]
    book = RaceBook(names, names, keys, series.task_of, plan, settings)
    row = {key: i for i, key in enumerate(keys)}
    spent = 0
    for round_keys in plan.keys:
        racing = book.racing
        for j in racing:
            for key in round_keys:
                book.record(j, key, series.values[row[key], j])
        spent += len(round_keys) * len(racing)
        book.close_round(len(round_keys) * len(racing))
        if len(book.racing) == 1:
            book.end(ONE_LEFT)
            break
    else:
        book.end(STEPS_RAN_OUT)
    return book, spent


def run(settings: RaceSettings, deltas: tuple[float, ...], count: int, seed: int) -> dict:
    """Race `count` series of true differences `deltas`; what they lost and spent."""
    rng = np.random.default_rng([seed, int(1000 * max(deltas)), len(deltas)])
    best = int(np.argmax(deltas)) if max(deltas) > 0 else None
    any_lost = best_lost = 0
    shares, rounds, one_left = [], [], 0
    for i in range(count):
        series = make_series(rng, deltas)
        book, spent = race_series(series, settings, seed=i)
        lost = [j for j in range(len(deltas)) if not book.active[j]]
        any_lost += bool(lost)
        best_lost += best is not None and best in lost
        shares.append(spent / series.values.size)
        rounds.append(len(book.rounds))
        one_left += book.ended == ONE_LEFT
    return {"series": count, "deltas": list(deltas), "spending": settings.spending, "any_lost": any_lost,
            "best_lost": best_lost, "mean_share": float(np.mean(shares)), "p90_share": float(np.quantile(shares, 0.9)),
            "mean_rounds": float(np.mean(rounds)), "one_left": one_left}


def scenario(k: int, delta: float) -> tuple[float, ...]:
    return (delta,) + (0.0,) * (k - 1)


def print_row(label: str, row: dict) -> None:
    low, high = clopper_pearson(row["any_lost"] if max(row["deltas"]) == 0 else row["best_lost"], row["series"])
    lost = row["any_lost"] if max(row["deltas"]) == 0 else row["best_lost"]
    print(f"{label:<44} {row['spending']:<15} {row['series']:>6} {lost:>6} {lost / row['series']:>7.1%} "
          f"{f'[{low:.1%}, {high:.1%}]':>16} {row['mean_share']:>7.1%} {row['p90_share']:>7.1%} {row['mean_rounds']:>6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=400, help="series of each main scenario (equal; one better)")
    parser.add_argument("--checkpoints", type=int, default=5, help="checkpoints in a series")
    parser.add_argument("--delta", type=float, default=15.0,
                        help="how much better the clearly better one is (points; 15 is four times the half-width of "
                             "a full replay's 95 %% interval of a pair, about ±3.7)")
    parser.add_argument("--other-series", type=int, default=200,
                        help="series of each other true difference and each other spending function (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    settings = load_race_settings()
    record = Record("bench_race", packages=("scipy",))
    record.setting(series=args.series, checkpoints=args.checkpoints, delta=args.delta, other_series=args.other_series,
                   spending=settings.spending, round_tasks=settings.round_tasks, confidence=settings.confidence,
                   seed=args.seed)
    t0 = time.perf_counter()
    null = run(settings, scenario(args.checkpoints, 0.0), args.series, args.seed)
    better = run(settings, scenario(args.checkpoints, args.delta), args.series, args.seed)
    others = []
    if args.other_series:
        others += [run(settings, scenario(args.checkpoints, d), args.other_series, args.seed) for d in OTHER_DELTAS]
        for name in (s for s in SPENDING if s != settings.spending):
            other = dataclasses.replace(settings, spending=name)
            others += [run(other, scenario(args.checkpoints, 0.0), args.other_series, args.seed),
                       run(other, scenario(args.checkpoints, args.delta), args.other_series, args.seed)]
    took = time.perf_counter() - t0
    print(f"race of {args.checkpoints}-checkpoint series shaped like TB2-lite (303 steps, 50 tasks), rounds of "
          f"{settings.round_tasks} tasks, {settings.confidence:.0%} family-wise; {os.cpu_count()} cores, {took:.0f} s")
    print(f"{'series':<44} {'spending':<15} {'count':>6} {'lost':>6} {'rate':>7} {'95 % CI':>16} {'steps':>7} "
          f"{'p90':>7} {'rounds':>6}")
    print_row("equal checkpoints: any dropped", null)
    print_row(f"one {args.delta:g} points better: it dropped", better)
    for row in others:
        top = max(row["deltas"])
        print_row("equal checkpoints: any dropped" if top == 0 else f"one {top:g} points better: it dropped", row)
    record_figures(record, args, null, better, others)
    record.write()  # bench/results/bench_race.json ($LAB_BENCH_RESULTS for a trial run)


def record_figures(record: Record, args: argparse.Namespace, null: dict, better: dict, others: list[dict]) -> None:
    """The run's figures and checks, as bench/results/bench_race.json holds them."""
    bound = binomial_bound(null["series"])
    low, high = clopper_pearson(null["any_lost"], null["series"])
    record.figure("equal checkpoints: series that lost any checkpoint", 100 * null["any_lost"] / null["series"], "%",
                  note=f"{null['any_lost']} of {null['series']} series of {args.checkpoints}; 95 % Clopper-Pearson "
                       f"[{100 * low:.1f}, {100 * high:.1f}] %; a true 5 % gives at most {bound} with 99 % probability")
    record.figure("equal checkpoints: steps spent, share of the full sweep", 100 * null["mean_share"], "%")
    record.figure(f"one checkpoint {args.delta:g} points better: series that lost it",
                  100 * better["best_lost"] / better["series"], "%", note=f"{better['best_lost']} of {better['series']}")
    record.figure(f"one checkpoint {args.delta:g} points better: steps spent, share of the full sweep",
                  100 * better["mean_share"], "%", note=f"mean over {better['series']} series; 90th percentile "
                  f"{100 * better['p90_share']:.1f} %; {better['mean_rounds']:.1f} rounds; one left in "
                  f"{better['one_left']} series")
    for row in others:
        top = max(row["deltas"])
        what = "equal checkpoints: lost any" if top == 0 else f"one {top:g} points better: lost it"
        lost = row["any_lost"] if top == 0 else row["best_lost"]
        record.figure(f"{what} ({row['spending']} spending)", 100 * lost / row["series"], "%",
                      note=f"{lost} of {row['series']}; steps spent {100 * row['mean_share']:.1f} % "
                           f"(90th percentile {100 * row['p90_share']:.1f} %)")
    record.check("equal checkpoints: losses within the binomial bound of a true 5 %", null["any_lost"] <= bound,
                 f"{null['any_lost']} ≤ {bound}")
    record.check("the clearly better checkpoint is kept in at least 95 % of series",
                 better["best_lost"] <= binomial_bound(better["series"]), f"{better['best_lost']} lost")
    record.check(f"the race spends at most {SHARE_LIMIT:.0%} of the full sweep's steps (mean)",
                 better["mean_share"] <= SHARE_LIMIT, f"{100 * better['mean_share']:.1f} %")


if __name__ == "__main__":
    main()
