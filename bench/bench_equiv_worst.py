"""Benchmark equiv_f1 on the costliest unit shapes (bench/equiv_shapes.py): per shape and size, one
step whose two sides are `count` distinct units of `length` characters, timed cold (caches
cleared) through equiv_step (Compare) and equiv_batch (the store's fill), beside the harness's own
score_batch of the same step. A step past the rules file's limits is skipped ("equiv skipped: too
large"), so the full size (the limits: 20 units of 10,000 characters, 300 of 666) is what any
input costs at most.

    python bench/bench_equiv_worst.py [--sizes 20x2500,20x10000,300x666] [--shapes 'cd chain,...']
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.equiv_shapes import SHAPES  # noqa: E402
from bench.record import Record  # noqa: E402
from lab.scoring.equiv import EquivContext, equiv_batch, equiv_step  # noqa: E402
from lab.scoring.equiv import pipeline as equiv_pipeline  # noqa: E402
from lab.scoring.equiv import score as equiv_score  # noqa: E402
from lab.scoring.equiv import shell as equiv_shell  # noqa: E402
from lab.scoring.metrics import score_batch  # noqa: E402
from lab.scoring.tokens import clear_caches  # noqa: E402

CONTEXT = EquivContext("/app", "/root")
BOUND_US_PER_CHAR = 100  # what tests/scoring/test_equiv_cost.py allows a step at the limits


def clear_equiv_caches() -> None:
    """Every cache equiv and the harness keep, so each timing is a first sight of its units."""
    clear_caches()
    equiv_shell._parsed.clear()
    equiv_score._scored.clear()
    equiv_pipeline._pipeline_for.cache_clear()


def time_shape(shape: str, count: int, length: int) -> dict:
    """Seconds of equiv_step, equiv_batch and score_batch on one step of `shape`, and what equiv said."""
    pred = SHAPES[shape](count, length)
    ref = [u.replace("a", "b", 1) for u in SHAPES[shape](count, length)]
    out = {"shape": shape, "units": count, "chars": sum(map(len, pred)) + sum(map(len, ref))}
    clear_equiv_caches()
    started = time.perf_counter()
    step = equiv_step(pred, ref, CONTEXT)
    out["step_s"] = time.perf_counter() - started
    clear_equiv_caches()
    started = time.perf_counter()
    equiv_batch([(pred, ref, CONTEXT)])
    out["batch_s"] = time.perf_counter() - started
    clear_equiv_caches()
    started = time.perf_counter()
    score_batch([(pred, ref)])
    out["harness_s"] = time.perf_counter() - started
    out["skipped"] = step.skipped
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20x2500,20x10000,300x666", help="COUNTxLENGTH,… (units a side x characters a unit)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated names from bench/equiv_shapes.py")
    args = ap.parse_args(argv)
    record = Record("bench_equiv_worst", packages=("bashlex",), argv=list(sys.argv[1:] if argv is None else argv))
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    record.setting(sizes=args.sizes, shapes=args.shapes.split(","))
    print(f"{'shape':<26}{'size':>10}{'chars':>9}{'step ms':>9}{'batch ms':>9}{'harness ms':>11}{'us/char':>8}  equiv")
    worst = 0.0
    for shape in args.shapes.split(","):
        for count, length in sizes:
            r = time_shape(shape, count, length)
            per_char = 1e6 * max(r["step_s"], r["batch_s"]) / r["chars"]
            worst = max(worst, per_char)
            print(f"{shape:<26}{f'{count}x{length}':>10}{r['chars']:>9,}{1000 * r['step_s']:>9.0f}{1000 * r['batch_s']:>9.0f}"
                  f"{1000 * r['harness_s']:>11.0f}{per_char:>8.1f}  {r['skipped'] or 'normalised'}", flush=True)
            note = f"{r['chars']:,} characters; harness {1000 * r['harness_s']:.0f} ms; {r['skipped'] or 'normalised'}"
            record.figure(f"{shape}, {count} x {length}: equiv_step (Compare) / equiv_batch (the fill)",
                          1000 * max(r["step_s"], r["batch_s"]), "ms", note=note)
    print(f"worst: {worst:.1f} us a character of the step")
    record.figure("worst cost a character of a step, every shape and size", worst, "us")
    record.check(f"every step costs at most {BOUND_US_PER_CHAR} us a character", worst <= BOUND_US_PER_CHAR)
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
