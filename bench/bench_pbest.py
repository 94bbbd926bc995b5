"""Benchmark each checkpoint's chance of being the best (P(best), lab.scoring.best.judged_chances, from the
task-bootstrap figures the lab's series and Results compute, lab.scoring.paired_matrix): on synthetic checkpoint
series shaped like TB2-lite (bench/synthetic_series.make_series, the race's: 303 steps of 50 tasks, each checkpoint
a known number of points above the others, so the best is known), are the checkpoints given P(best) ≈ p the best
about p of the time?

Prints the reliability table (P(best) in bins: the checkpoints in each, their mean P(best), how often they were
the best, with a 95 % Clopper-Pearson interval), the Brier score beside that of always saying 1/k and that of
the resamples read as they are (without the pull toward the mean), how often the checkpoint with the top
P(best) is the best, and the mean expected regret against the mean true regret of picking by P(best).

    python bench/bench_pbest.py [--series 2000] [--checkpoints 6] [--spread 4]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_paired import clopper_pearson  # noqa: E402
from bench.record import Record  # noqa: E402
from bench.synthetic_series import make_series  # noqa: E402
from lab.scoring import paired_matrix  # noqa: E402
from lab.scoring.best import best_chances, judged_chances  # noqa: E402
from lab.scoring.paired import load_settings, task_counts, task_draws  # noqa: E402

BINS = np.array([0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0001])


def judge(series, resamples: int, seed: int):
    """(P(best) and expected regret of a series' checkpoints as lab.analysis.judge.chances computes them,
    the same from the resamples read as they are)."""
    task = np.array([int(s.task_id.rsplit("-", 1)[1]) for s in series.steps])
    runs = series.values.T
    n = int(task.max()) + 1
    every = np.ones(runs.shape, dtype=bool)
    value = paired_matrix.task_sums(runs, every, task, n)
    weight = paired_matrix.task_sums(np.ones(runs.shape), every, task, n)
    boot = paired_matrix.figures(task_counts(task_draws(seed, resamples, n), n), value, weight, 100.0)
    effective = weight[0].sum() ** 2 / (weight[0] ** 2).sum()
    point = 100.0 * value.sum(axis=1) / weight.sum(axis=1)
    return judged_chances(boot, point, effective, load_settings().confidence), best_chances(boot)


def _plain_high(plain: np.ndarray, hit: np.ndarray) -> dict:
    """The resamples read as they are: how often checkpoints they give P(best) 0.5–0.95 were the best."""
    inside = (plain >= 0.5) & (plain < 0.95)
    return {"checkpoints": int(inside.sum()), "mean_p_best": float(plain[inside].mean()) if inside.any() else None,
            "rate": float(hit[inside].mean()) if inside.any() else None}


def run(series_count: int, k: int, spread: float, resamples: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    p_all, plain_all, best_all, top_hits, regret_said, regret_true = [], [], [], 0, [], []
    for i in range(series_count):
        deltas = rng.uniform(0, spread, k)
        series = make_series(rng, tuple(deltas))
        found, plain = judge(series, resamples, i)
        best = deltas.argmax()
        p_all += list(found.p_best)
        plain_all += list(plain.p_best)
        best_all += [j == best for j in range(k)]
        pick = int(np.argmax(found.p_best))
        top_hits += pick == best
        regret_said.append(float(found.expected_regret[pick]))
        regret_true.append(float(deltas[best] - deltas[pick]))
    p, hit, plain = np.array(p_all), np.array(best_all, dtype=float), np.array(plain_all)
    rows = []
    for low, high in zip(BINS[:-1], BINS[1:]):
        inside = (p >= low) & (p < high)
        if not inside.any():
            continue
        count, wins = int(inside.sum()), int(hit[inside].sum())
        ci = clopper_pearson(wins, count)
        rows.append({"bin": [float(low), float(min(high, 1.0))], "checkpoints": count, "mean_p_best": float(p[inside].mean()),
                     "best": wins, "rate": wins / count, "ci": list(ci)})
    return {"series": series_count, "checkpoints": k, "rows": rows, "brier": float(((p - hit) ** 2).mean()),
            "brier_uniform": float(((1 / k - hit) ** 2).mean()), "brier_plain": float(((plain - hit) ** 2).mean()),
            "plain_high": _plain_high(plain, hit), "top_is_best": top_hits / series_count,
            "expected_regret": float(np.mean(regret_said)), "true_regret": float(np.mean(regret_true)),
            "ece": float(sum(r["checkpoints"] * abs(r["mean_p_best"] - r["rate"]) for r in rows) / len(p))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=2000)
    parser.add_argument("--checkpoints", type=int, default=6)
    parser.add_argument("--spread", type=float, default=4.0, help="true differences drawn from 0 to this (points)")
    parser.add_argument("--resamples", type=int, default=load_settings().resamples)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    record = Record("bench_pbest", packages=("numpy",))
    record.setting(series=args.series, checkpoints=args.checkpoints, spread=args.spread, resamples=args.resamples,
                   seed=args.seed)
    out = run(args.series, args.checkpoints, args.spread, args.resamples, args.seed)
    print(f"{args.series} synthetic series of {args.checkpoints} checkpoints (303 steps, 50 tasks; true differences "
          f"uniform in 0–{args.spread:g} points), {args.resamples} task resamples each\n")
    print(f"{'P(best) in':>14} {'checkpoints':>11} {'mean P(best)':>12} {'were best':>9} {'rate':>7} {'95 % CI':>17}")
    for r in out["rows"]:
        ci, span = f"[{r['ci'][0]:.1%}, {r['ci'][1]:.1%}]", f"[{r['bin'][0]:.2f}, {r['bin'][1]:.2f})"
        print(f"{span:>14} {r['checkpoints']:>11} {r['mean_p_best']:>12.3f} {r['best']:>9} {r['rate']:>7.1%} {ci:>17}")
        record.figure(f"P(best) in [{r['bin'][0]:.2f}, {r['bin'][1]:.2f}): were the best", 100 * r["rate"], "%",
                      note=f"{r['best']} of {r['checkpoints']} checkpoints, mean P(best) {r['mean_p_best']:.3f}; "
                           f"95 % CI [{100 * r['ci'][0]:.1f}, {100 * r['ci'][1]:.1f}] %")
    high = out["plain_high"]
    print(f"\nBrier score {out['brier']:.4f} (saying 1/{args.checkpoints} for every checkpoint: {out['brier_uniform']:.4f}; "
          f"the resamples read as they are: {out['brier_plain']:.4f}); calibration error (weighted |mean P(best) − "
          f"rate|) {out['ece']:.3f}")
    if high["checkpoints"]:
        print(f"read as they are, the resamples gave {high['checkpoints']} checkpoints P(best) 0.5–0.95 (mean "
              f"{high['mean_p_best']:.2f}); {high['rate']:.1%} of them were the best")
    print(f"the checkpoint with the top P(best) was the best in {out['top_is_best']:.1%} of the series; its expected "
          f"regret {out['expected_regret']:.2f} points on average, its true regret {out['true_regret']:.2f}")
    record.figure("Brier score of P(best)", out["brier"], "", note=f"1/k for every checkpoint: {out['brier_uniform']:.4f}; "
                  f"the resamples read as they are (no pull toward the mean): {out['brier_plain']:.4f}")
    if high["checkpoints"]:
        record.figure("without the pull: checkpoints given P(best) 0.5-0.95 that were the best", 100 * high["rate"], "%",
                      note=f"{high['checkpoints']} checkpoints, mean P(best) {high['mean_p_best']:.2f}")
    record.figure("calibration error of P(best) (weighted |mean P(best) − rate| over the bins)", out["ece"], "")
    record.figure("series whose top-P(best) checkpoint is the best", 100 * out["top_is_best"], "%")
    record.figure("expected regret of the top-P(best) checkpoint, mean", out["expected_regret"], "points",
                  note=f"its true regret, mean: {out['true_regret']:.2f} points")
    record.check("P(best) calibrated: every bin's rate within 0.1 of its mean P(best) or its 95 % interval holding it",
                 all(abs(r["rate"] - r["mean_p_best"]) <= 0.1 or r["ci"][0] <= r["mean_p_best"] <= r["ci"][1]
                     for r in out["rows"]))
    record.write()


if __name__ == "__main__":
    main()
