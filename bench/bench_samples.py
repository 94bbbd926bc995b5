"""Benchmark sampling stability at full size: R synthetic runs x 303 steps x N samples.

Times `lab rescore` of one sampled file (every sample rescored), the DuckDB import of all the
runs (samples + sample_stats tables), and Triage's stability queries (median of repeats).

    python bench/bench_samples.py [--runs 8] [--steps 303] [--samples 10] [--repeat 9]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Record  # noqa: E402
from bench.synthetic import _per_step_rows, _result, _score_rows, make_references  # noqa: E402
from lab.runs.rescore import rescore_result  # noqa: E402
from lab.runs.sample_scores import rescore_samples  # noqa: E402
from lab.store import open_store  # noqa: E402
from lab.triage.stability import samples_head_to_head, stability_by_run, unstable_steps  # noqa: E402

SAMPLE_KEYS = ("pred_command_units", "valid_json", "first_cmd_exact", "command_precision", "command_recall",
               "command_f1", "finish_reason")


def sampled_run(run_index: int, refs, n_samples: int) -> dict:
    """One synthetic run whose sample k is the synthetic prediction drawn with seed k (sample 0: the run)."""
    draws = [_per_step_rows(run_index, refs, seed) for seed in range(n_samples)]
    _score_rows([row for rows in draws for row in rows])
    result = _result(run_index, draws[0])
    for i, row in enumerate(result["per_step"]):
        row["samples"] = [{"sample": k, "seed": k, "raw_output": draws[k][i]["pred_preview"],
                           **{key: draws[k][i][key] for key in SAMPLE_KEYS}} for k in range(n_samples)]
    return rescore_samples(result, "corrected")


def median_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=303)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    record = Record("bench_samples")
    record.setting(runs=args.runs, steps=args.steps, samples=args.samples, repeat=args.repeat)
    refs = make_references(args.steps, 0)
    t0 = time.perf_counter()
    runs = [sampled_run(i, refs, args.samples) for i in range(args.runs)]
    build_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        results.mkdir()
        size = 0
        for i, run in enumerate(runs):
            path = results / f"run{i:02d}.json"
            path.write_text(json.dumps(run))
            size += path.stat().st_size
        rescore_ms = median_ms(lambda: rescore_result(runs[0], "corrected"), max(1, args.repeat // 3))
        t0 = time.perf_counter()
        store = open_store(Path(tmp) / "lab.duckdb", results)
        import_s = time.perf_counter() - t0
        with store:
            n_samples = store.scalar("SELECT count(*) FROM samples")
            ids = [r[0] for r in store.rows("SELECT run_id FROM runs ORDER BY run_id")]
            timings = {
                "unstable steps (spread >= 0.5, all runs)": median_ms(lambda: unstable_steps(store, [], 0.5), args.repeat),
                "mean F1 vs stability per run": median_ms(lambda: stability_by_run(store, 0.5), args.repeat),
                "samples A vs B (per step)": median_ms(lambda: samples_head_to_head(store, ids[0], ids[1]), args.repeat),
            }
    print(f"{args.runs} runs x {args.steps} steps x {args.samples} samples = {n_samples} sample rows; "
          f"files {size / 2**20:.1f} MiB (built in {build_s:.1f} s)")
    print(f"| step | time |\n| --- | --- |\n| rescore one sampled file ({args.steps * args.samples} samples) | "
          f"{rescore_ms:.0f} ms |\n| build the DuckDB store from the files | {import_s:.2f} s |")
    for name, ms in timings.items():
        print(f"| {name} | {ms:.1f} ms |")
    record.figure(f"rescore one sampled file ({args.steps * args.samples} samples)", rescore_ms, "ms")
    record.figure(f"build the DuckDB store from {args.runs} sampled files ({n_samples:,} sample rows)", import_s, "s")
    for name, ms in timings.items():
        record.figure(name, ms, "ms", note=f"median of {args.repeat}")
    record.write()


if __name__ == "__main__":
    main()
