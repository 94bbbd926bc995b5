"""Benchmark equiv_f1 at import time: what the equiv columns add to importing result files.

Builds synthetic runs (bench/synthetic.py), then, per run, times the `steps` table the importer
builds and the equiv columns computed from it (cold caches, as on a fresh import), and compares
with the harness rescoring of the same steps (`score_batch`); then imports the same files into
fresh stores (bench_store.import_costs: harness only, equiv deferred plus the background fill,
equiv filled at once; caches cleared) and prints the ratios.

    python bench/bench_equiv.py [--runs 20] [--steps 303]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_store import import_costs, print_import_costs  # noqa: E402
from bench.record import Record  # noqa: E402
from bench.synthetic import make_results  # noqa: E402
from lab.scoring import score_batch  # noqa: E402
from lab.scoring.equiv import EquivContext  # noqa: E402
from lab.store.equiv_columns import with_equiv_columns  # noqa: E402
from lab.store.records import steps_table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=303)
    args = ap.parse_args(argv)
    record = Record("bench_equiv", argv=list(sys.argv[1:] if argv is None else argv))
    record.setting(runs=args.runs, steps=args.steps)

    results = make_results(n_runs=args.runs, n_steps=args.steps)
    contexts = {f"{s['task_id']}/{s['step_idx']}": EquivContext("/app", "/root") for s in results[0]["per_step"]}
    t_table, t_equiv, t_harness = [], [], []
    gaps = []
    for i, result in enumerate(results):
        t0 = time.perf_counter()
        table = steps_table(f"run{i}", result["per_step"], f"run{i}")
        t1 = time.perf_counter()
        table = with_equiv_columns(table, contexts, "corrected")
        t2 = time.perf_counter()
        score_batch([(s["pred_command_units"], s["ref_command_units"]) for s in result["per_step"]])
        t3 = time.perf_counter()
        t_table.append(t1 - t0)
        t_equiv.append(t2 - t1)
        t_harness.append(t3 - t2)
        f1 = table.column("command_f1").to_pylist()
        eq = table.column("equiv_f1").to_pylist()
        gaps.append(100 * (sum(eq) - sum(f1)) / len(f1))
        assert all(e >= f for e, f in zip(eq, f1)), "equiv_f1 < F1 on some step"
    n_units = sum(len(s["pred_command_units"]) + len(s["ref_command_units"]) for r in results for s in r["per_step"])
    print(f"{args.runs} runs x {args.steps} steps, {n_units:,} units")
    print(f"{'per run':<44}{'first ms':>10}{'median ms':>11}")
    for name, times in (("steps table (importer, before equiv)", t_table), ("equiv columns (rules + equiv F1)", t_equiv),
                        ("harness F1 rescoring (score_batch)", t_harness)):
        print(f"{name:<44}{times[0] * 1000:>10.0f}{statistics.median(times) * 1000:>11.0f}")
        record.figure(f"per run: {name}", statistics.median(times) * 1000, "ms", note=f"median of {args.runs} runs")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "results").mkdir()
        files = root / "incoming"
        files.mkdir()
        for i, result in enumerate(results):
            (files / f"run{i:03d}.json").write_text(json.dumps(result), encoding="utf-8")
        print_import_costs(import_costs(root, root / "results", files, rounds=1), args.runs, record)
    print(f"total equiv time {sum(t_equiv):.2f} s; mean spelling gap {statistics.mean(gaps):.2f} points "
          f"(min {min(gaps):.2f}, max {max(gaps):.2f})")
    record.figure("mean spelling gap (equiv_f1 - F1) of the synthetic runs", statistics.mean(gaps), "points")
    record.check("equiv_f1 >= F1 on every step", True, "asserted per run above")
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
