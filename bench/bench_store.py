"""Benchmark the DuckDB store: import 100 synthetic runs x 303 steps, then time every plot query
and a per-step slice (median of several repeats). Prints a table.

    python bench/bench_store.py [--runs 100] [--steps 303] [--repeat 15]
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

from bench.synthetic import make_results  # noqa: E402
import lab.store.importer as importer  # noqa: E402
from lab.store import import_path, open_store  # noqa: E402
from lab.store import queries as q  # noqa: E402
from lab.store.plots import PLOT_SPECS  # noqa: E402

PLOT_QUERY_BUDGET_MS = 50.0
SLICE_BUDGET_MS = 200.0
REPO = Path(__file__).resolve().parents[1]


def _median_ms(fn, repeat: int, prepare=None) -> tuple[float, int]:
    """Median wall time of `fn()`; `prepare()` (not timed) runs before each call."""
    fn()  # warm-up
    times, rows = [], 0
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        t0 = time.perf_counter()
        rows = len(fn())
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), rows


def _store_costs(store, fn, repeat: int) -> list[tuple[str, float]]:
    """What the process-shared store adds (lab.store.connection): the same query with its read
    cache cleared (file kept open), and after the file was closed (reopen + query)."""
    def reopen() -> None:
        store.cache.clear()
        store.close()

    uncached, _ = _median_ms(fn, repeat, store.cache.clear)
    cold, _ = _median_ms(fn, max(3, repeat // 3), reopen)
    return [("uncached (file open)", uncached), ("cold (reopen file)", cold)]


def _harness_only(steps, contexts, scorer):
    """The equiv columns copied from the harness ones (no rules): what importing cost before equiv_f1."""
    import pyarrow as pa

    from lab.store.equiv_columns import EQUIV_STEP_SCHEMA

    for field, source in zip(EQUIV_STEP_SCHEMA, ("command_precision", "command_recall", "command_f1", None)):
        column = steps.column(source) if source else pa.nulls(steps.num_rows, field.type)
        steps = steps.append_column(field, column.cast(field.type))
    return steps


def import_costs(root: Path, results: Path, files: Path) -> tuple[float, float]:
    """Seconds to import `files` into a fresh store: harness only (equiv columns copied), then with
    equiv_f1 (its caches cleared first: a fresh process)."""
    from lab.scoring.equiv import score as equiv_score

    real = importer.with_equiv_columns
    importer.with_equiv_columns = _harness_only
    try:
        store = open_store(root / "harness.duckdb", results)
        t0 = time.perf_counter()
        import_path(store, files)
        t_harness = time.perf_counter() - t0
        store.close()
    finally:
        importer.with_equiv_columns = real
    getattr(equiv_score, "_scored", {}).clear()
    store = open_store(root / "equiv.duckdb", results)
    t0 = time.perf_counter()
    import_path(store, files)
    t_equiv = time.perf_counter() - t0
    store.close()
    return t_harness, t_equiv


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=303)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results = root / "results"
        results.mkdir()
        for csv in (REPO / "results").glob("*.csv"):
            (results / csv.name).write_bytes(csv.read_bytes())

        t0 = time.perf_counter()
        synthetic = make_results(n_runs=args.runs, n_steps=args.steps)
        files = root / "incoming"
        files.mkdir()
        for i, result in enumerate(synthetic):
            (files / f"run{i:03d}.json").write_text(json.dumps(result), encoding="utf-8")
        t_make = time.perf_counter() - t0
        mb = sum(p.stat().st_size for p in files.iterdir()) / 1e6

        t_harness_only, t_with_equiv = import_costs(root, results, files)
        store = open_store(root / "lab.duckdb", results)
        t0 = time.perf_counter()
        report = import_path(store, files)
        t_import = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = import_path(store, files)
        t_reimport = time.perf_counter() - t0
        assert report.ok and len(report.added) == args.runs and not again.added, report.summary()
        n_steps = store.scalar("SELECT count(*) FROM steps")

        run_ids = q.runs(store, order="score")["run_id"].tolist()
        a, b = run_ids[0], run_ids[-1]
        plot_params = {"checkpoint_series": {"family_or_pattern": "%"}, "by_bucket": {"run_ids": run_ids[:10]},
                       "by_source_group": {"run_ids": run_ids[:10]}}
        rows = []
        for name, (query, _) in PLOT_SPECS.items():
            ms, n = _median_ms(lambda: query(store, **plot_params.get(name, {})), args.repeat)
            rows.append((f"plot: {name}", n, ms, PLOT_QUERY_BUDGET_MS))
        for name, fn in (("plot: by_bucket (all runs)", lambda: q.by_bucket(store)),
                         ("plot: by_source_group (all runs)", lambda: q.by_source_group(store))):
            ms, n = _median_ms(fn, args.repeat)
            rows.append((name, n, ms, PLOT_QUERY_BUDGET_MS))
        ms, n = _median_ms(lambda: q.slice_pair(store, a, b, 0.8, 0.2), args.repeat)
        rows.append(("slice: A F1>=0.8 and B F1<0.2", n, ms, SLICE_BUDGET_MS))
        step_key = q.run_steps(store, a)["step_key"].iloc[args.steps // 2]
        ms, n = _median_ms(lambda: q.step_across_runs(store, step_key), args.repeat)
        rows.append(("step across all runs", n, ms, SLICE_BUDGET_MS))
        ms, n = _median_ms(lambda: q.run_steps(store, a), args.repeat)
        rows.append(("one run's steps (303 rows, units)", n, ms, SLICE_BUDGET_MS))
        extra = []
        if hasattr(store, "cache"):  # the store shared by processes
            first_plot = next(iter(PLOT_SPECS.values()))[0]
            extra = _store_costs(store, lambda: first_plot(store), args.repeat)
        store.close()

    print(f"synthetic data: {args.runs} runs x {args.steps} steps ({mb:.1f} MB JSON) built in {t_make:.1f} s")
    print(f"import: {t_import:.2f} s ({t_import / args.runs * 1000:.0f} ms/file, {n_steps} step rows); "
          f"re-import (all unchanged): {t_reimport * 1000:.0f} ms")
    print(f"import per run, harness only: {t_harness_only / args.runs * 1000:.0f} ms; with equiv_f1: "
          f"{t_with_equiv / args.runs * 1000:.0f} ms; ratio {t_with_equiv / t_harness_only:.2f} (goal <= 1.3)")
    print(f"\n{'query':<38} {'rows':>6} {'median ms':>10} {'budget':>7}  ok")
    ok = True
    for name, n, ms, budget in rows:
        ok &= ms < budget
        print(f"{name:<38} {n:>6} {ms:>10.2f} {budget:>7.0f}  {'yes' if ms < budget else 'NO'}")
    for label, ms in extra:
        print(f"plot: leaderboard, {label:<25} {ms:>10.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
