"""Benchmark: rescoring many stored runs with the fast batch scorer.

    python bench/bench_rescore.py [--runs 100 --steps 303 --repeat 3]

Generates synthetic runs (bench/synthetic.py; not timed), times `rescore_many` over all of
them (best of N; tokenization caches are cleared before every timed pass, so each pass is
cold), then checks that every step's numbers are identical to the straightforward per-step
`score_units` (each distinct step once, on all cores; that check is slow by design).
"""
from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Record  # noqa: E402
from bench.synthetic import make_results  # noqa: E402
from lab.runs.rescore import rescore_many  # noqa: E402
from lab.scoring.metrics import score_units  # noqa: E402
from lab.scoring.tokens import clear_caches  # noqa: E402

KEYS = ("first_cmd_exact", "command_precision", "command_recall", "command_f1")


def _plain(job: tuple) -> dict:
    pred, ref, scorer = job
    return score_units(pred, ref, scorer).to_dict()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=303)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scorer", default="corrected", choices=("corrected", "legacy"))
    args = parser.parse_args(argv)
    record = Record("bench_rescore", argv=list(sys.argv[1:] if argv is None else argv))
    record.setting(runs=args.runs, steps=args.steps, repeat=args.repeat, scorer=args.scorer)

    t0 = time.perf_counter()
    results = make_results(args.runs, args.steps, seed=args.seed)
    print(f"generated {args.runs} runs in {time.perf_counter() - t0:.1f}s (not timed)")
    rows = [row for r in results for row in r["per_step"]]
    pairs = sum(len(r["pred_command_units"]) * len(r["ref_command_units"]) for r in rows)

    timings = []
    for _ in range(args.repeat):
        clear_caches()
        start = time.perf_counter()
        rescored = rescore_many(results, args.scorer)
        timings.append(time.perf_counter() - start)
    best = min(timings)

    start = time.perf_counter()
    stored: dict[tuple, list[dict]] = {}
    for result in rescored:
        for row in result["per_step"]:
            key = (tuple(row["pred_command_units"]), tuple(row["ref_command_units"]))
            stored.setdefault(key, []).append(row)
    jobs = [(list(p), list(r), args.scorer) for p, r in stored]
    with multiprocessing.Pool() as pool:
        plain = pool.map(_plain, jobs, chunksize=64)
    mismatches = sum(
        any(want[k] != row[k] for k in KEYS) for want, rows in zip(plain, stored.values()) for row in rows
    )
    check_s = time.perf_counter() - start

    print(f"runs {args.runs}  steps {len(rows)}  unit pairs {pairs:,}")
    print(f"rescore_many: best of {args.repeat} {best:.3f}s (all: {', '.join(f'{t:.3f}' for t in timings)})"
          f"  -> {len(rows) / best:,.0f} steps/s")
    print(f"check: straightforward score_units on {len(jobs)} distinct steps took {check_s:.1f}s "
          f"on {multiprocessing.cpu_count()} processes")
    print(f"identical numbers on every step: {mismatches == 0} ({mismatches} mismatches)")
    record.figure(f"rescore_many over {args.runs} runs x {args.steps} steps ({pairs:,} unit pairs)", best, "s",
                  note=f"best of {args.repeat}, tokenization caches cleared before each pass")
    record.figure("steps rescored per second", round(len(rows) / best), "steps/s")
    record.check("identical numbers to per-step score_units on every step", mismatches == 0,
                 f"{mismatches} mismatches over {len(jobs)} distinct steps")
    record.write()
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
