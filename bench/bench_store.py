"""Benchmark the DuckDB store: import 100 synthetic runs x 303 steps, then time every plot query
and a per-step slice (median of several repeats). Prints a table.

The import is timed per run three ways (fresh stores, cold equiv caches): harness only (its equiv
step switched off: the cost before equiv_f1), as the user waits for it in the app (equiv columns
left pending for the background filler, whose total is timed after), and with equiv filled at
once after each file (CLI processes). Harness-only and deferred rounds alternate (noise).

    python bench/bench_store.py [--runs 100] [--steps 303] [--repeat 15]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Record  # noqa: E402
from bench.synthetic import make_results  # noqa: E402
import lab.store.importer as importer  # noqa: E402
from lab.store import import_path, open_store  # noqa: E402
from lab.store import queries as q  # noqa: E402
from lab.figures.plots import PLOT_SPECS  # noqa: E402

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


def _cold_equiv_caches() -> None:
    """Forget every equiv cache of this process (a fresh process, as the app after a restart)."""
    from lab.scoring.equiv import pipeline
    from lab.scoring.equiv import score as equiv_score

    equiv_score._scored.clear()
    pipeline._pipeline_for.cache_clear()


@dataclass
class ImportCosts:
    """Seconds for importing the same files into fresh stores, per way of importing."""

    harness_only: list[float] = field(default_factory=list)  # no equiv work at all (before equiv_f1)
    deferred: list[float] = field(default_factory=list)  # what the user waits for: equiv left pending
    fill: list[float] = field(default_factory=list)  # the background filler, after the deferred import
    synchronous: float | None = None  # equiv filled right after each import (CLI processes)
    fill_states: dict[str, int] = field(default_factory=dict)  # runs per equiv_state after the last fill


def _timed_import(store, files: Path) -> float:
    t0 = time.perf_counter()
    report = import_path(store, files)
    elapsed = time.perf_counter() - t0
    assert report.ok and report.added, report.summary()
    return elapsed


def _harness_only_import(db: Path, results: Path, files: Path) -> float:
    """The import with its equiv step switched off: what importing cost before equiv_f1."""
    real = importer.after_import
    importer.after_import = lambda store, run_id: None
    try:
        with open_store(db, results, defer_equiv=True) as store:
            return _timed_import(store, files)
    finally:
        importer.after_import = real


def _deferred_import(db: Path, results: Path, files: Path) -> tuple[float, float, dict[str, int]]:
    """(import, background fill) seconds, as in the app: equiv pending, an EquivFiller attached."""
    from lab.store.equiv_filler import EquivFiller

    with open_store(db, results, defer_equiv=True) as store:
        filler = EquivFiller(store)
        store.equiv_filler = filler
        _cold_equiv_caches()
        t_import = _timed_import(store, files)
        t0 = time.perf_counter()
        filler.kick()
        filler.wait()
        t_fill = time.perf_counter() - t0 - filler.settle  # the settle delay is a wait, not work
        states = dict(store.rows("SELECT equiv_state, count(*) FROM runs GROUP BY equiv_state"))
        # the fill is over when no run is pending; synthetic runs with a relative `cd` and no replay to read the
        # step's screen from end as needs_replay, as a user's would
        assert not states.get("pending") and not states.get("failed"), (states, filler.error)
    return t_import, t_fill, states


def import_costs(root: Path, results: Path, files: Path, rounds: int = 3, synchronous: bool = True) -> ImportCosts:
    """Harness-only and deferred imports alternated `rounds` times (fresh stores, cold equiv caches),
    then once with equiv filled synchronously after each file."""
    costs = ImportCosts()
    for i in range(rounds):
        costs.harness_only.append(_harness_only_import(root / f"harness{i}.duckdb", results, files))
        t_import, t_fill, costs.fill_states = _deferred_import(root / f"deferred{i}.duckdb", results, files)
        costs.deferred.append(t_import)
        costs.fill.append(t_fill)
    if synchronous:
        _cold_equiv_caches()
        with open_store(root / "sync.duckdb", results) as store:
            costs.synchronous = _timed_import(store, files)
    return costs


def print_import_costs(costs: ImportCosts, runs: int, record: Record | None = None) -> None:
    """Per run: harness only, as the user waits (equiv deferred), the ratio; the fill's total (and into `record`)."""
    harness, deferred = statistics.median(costs.harness_only), statistics.median(costs.deferred)
    per = lambda seconds: f"{seconds / runs * 1000:.0f} ms"  # noqa: E731
    print(f"import per run, harness only: {per(harness)} (rounds: {', '.join(per(t) for t in costs.harness_only)})")
    print(f"import per run as the user waits (equiv deferred): {per(deferred)} "
          f"(rounds: {', '.join(per(t) for t in costs.deferred)}); ratio {deferred / harness:.2f} (goal <= 1.3)")
    print(f"background equiv fill of {runs} runs: {statistics.median(costs.fill):.2f} s in all "
          f"({per(statistics.median(costs.fill))}; rounds: {', '.join(f'{t:.2f} s' for t in costs.fill)})")
    if costs.synchronous is not None:
        print(f"import per run with equiv filled at once (CLI): {per(costs.synchronous)}; "
              f"ratio {costs.synchronous / harness:.2f}")
    if record is None:
        return
    note = f"median of {len(costs.deferred)} alternated rounds, fresh stores, cold equiv caches"
    record.figure("import per run, harness columns only", harness / runs * 1000, "ms", note=note)
    record.figure("import per run as the user waits (equiv_f1 left to the background fill)", deferred / runs * 1000,
                  "ms", note=note)
    record.figure("as the user waits / harness only", deferred / harness, "x", note="goal <= 1.3")
    states = ", ".join(f"{n} {state}" for state, n in sorted(costs.fill_states.items()))
    record.figure(f"background equiv fill of {runs} runs", statistics.median(costs.fill), "s",
                  note=f"runs after the fill: {states}" + (" (no replay given: a run whose steps need one ends as "
                                                           "needs_replay)" if costs.fill_states.get("needs_replay") else ""))
    if costs.synchronous is not None:
        record.figure("import per run with equiv filled at once (CLI imports)", costs.synchronous / runs * 1000, "ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=303)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3, help="harness-only / deferred import rounds (alternated)")
    args = ap.parse_args(argv)
    record = Record("bench_store", argv=list(sys.argv[1:] if argv is None else argv))
    record.setting(runs=args.runs, steps=args.steps, repeat=args.repeat, rounds=args.rounds)

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

        costs = import_costs(root, results, files, args.rounds)
        store = open_store(root / "deferred0.duckdb", results)  # imported and filled above
        t0 = time.perf_counter()
        again = import_path(store, files)
        t_reimport = time.perf_counter() - t0
        assert not again.added and len(again.skipped) == args.runs, again.summary()
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
    print(f"{n_steps} step rows; re-import (all unchanged): {t_reimport * 1000:.0f} ms")
    print_import_costs(costs, args.runs, record)
    record.figure(f"re-import of {args.runs} unchanged runs", t_reimport * 1000, "ms")
    print(f"\n{'query':<38} {'rows':>6} {'median ms':>10} {'budget':>7}  ok")
    ok = True
    for name, n, ms, budget in rows:
        ok &= ms < budget
        print(f"{name:<38} {n:>6} {ms:>10.2f} {budget:>7.0f}  {'yes' if ms < budget else 'NO'}")
        record.figure(f"{name} ({n} rows)", ms, "ms", note=f"median of {args.repeat}; budget {budget:.0f} ms")
    for label, ms in extra:
        print(f"plot: leaderboard, {label:<25} {ms:>10.2f}")
        record.figure(f"plot: leaderboard, {label}", ms, "ms")
    record.check("every query within its budget", ok)
    record.write()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
