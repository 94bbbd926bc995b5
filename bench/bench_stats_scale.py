"""Benchmark the statistics at the scale of a real store: with 300 and with 1,000 stored runs of 303 steps from
50 tasks (bench/stats_store.py; the first 300 one checkpoint series), the CPU seconds of

- a Results **baseline pick** (every other row's Δ score with its simultaneous interval, detectable Δ, P(best)
  and regret, lab.analysis.leaderboard.with_comparisons): the first after the store changed (nothing
  kept: the store's matrix is read, the table's per-step ranks computed, then the baseline's columns; the
  process has picked before, as a running lab has: its modules imported — the process's first pick is its own
  line, at the first size), a baseline not picked before (the matrix and ranks kept), and the same baseline
  again (kept);
- a **300-point series view** (lab.analysis.series_judgement.series_stats with its table and figure, as Triage and
  Results draw it): the first after the store changed, with the matrix kept, and again;

goals: a pick under 1 s, a series view under 2 s. CPU seconds are the process's (every thread, DuckDB's too),
time.process_time(). With --reference it also times, at the smallest size, the per-run path this replaced
(lab.analysis.run_pairs.compare_against, one baseline against every run) and checks that the matrix path gives
that path's intervals (to 1e-9 points) on some of the runs; and times the per-step ranks of every run with every
pair computed (lab.scoring.ranking.rank_ties(every_pair=True), what the rank column cost before) against the
pruned path, checking they give the same intervals and ranks, float for float.

    python bench/bench_stats_scale.py [--runs 300 1000] [--series 300] [--reference]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Record  # noqa: E402
from bench.stats_store import write_runs  # noqa: E402
from lab.store import open_store, queries  # noqa: E402
from lab.analysis import cache as stats_cache  # noqa: E402
from lab.analysis.leaderboard import with_comparisons  # noqa: E402
from lab.figures.series import series_stats_figure  # noqa: E402
from lab.analysis.series_judgement import series_stats, series_table  # noqa: E402

PICK_GOAL_S, SERIES_GOAL_S = 1.0, 2.0
FIRST_IN_PROCESS = "pick, the process's first (modules imported)"
REPO = Path(__file__).resolve().parents[1]


def cpu(fn) -> tuple[float, object]:
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def build(root: Path, runs: int, series: int):
    results = root / "results"
    (results / "runs").mkdir(parents=True)
    for csv in (REPO / "results").glob("*.csv"):
        (results / csv.name).write_bytes(csv.read_bytes())
    write_runs(results / "runs", runs, series)
    t0 = time.perf_counter()
    store = open_store(root / "lab.duckdb", results, defer_equiv=True)
    elapsed = time.perf_counter() - t0
    store.close()  # the import's writes checkpointed now: the store's generation stays as it is from here on
    return store, elapsed


def picks(store, first_in_process: bool) -> dict[str, float]:
    frame = queries.leaderboard(store, first56_only=False, include_runs=True, order="score")
    ids = [r for r in frame["run_id"] if isinstance(r, str) and r]
    out = {}
    stats_cache.clear()
    seconds, _ = cpu(lambda: with_comparisons(store, frame, ids[0]))
    if first_in_process:
        out[FIRST_IN_PROCESS] = seconds
    stats_cache.clear()  # as a store change drops what was kept
    out["pick, first after the store changed"], _ = cpu(lambda: with_comparisons(store, frame, ids[0]))
    out["pick, a baseline not picked before"], _ = cpu(lambda: with_comparisons(store, frame, ids[1]))
    out["pick, the same baseline again"], _ = cpu(lambda: with_comparisons(store, frame, ids[1]))
    return out


def series_views(store) -> dict[str, float]:
    def view():
        stats = series_stats(store, "ser")
        return series_table(stats), series_stats_figure(stats)

    stats_cache.clear()
    out = {}
    out["series view, first after the store changed"], _ = cpu(view)
    table = stats_cache.stats_table(store)
    stats_cache.clear()
    stats_cache.shared(store, ("table",), lambda: table)  # the matrix kept, the series not
    out["series view, the store's matrix kept"], _ = cpu(view)
    out["series view, again"], _ = cpu(view)
    return out


def reference(store) -> tuple[float, float]:
    """(CPU seconds of the per-run path for one baseline against every run, the largest difference of an
    interval bound between it and the matrix path over 40 runs)."""
    from lab.analysis.run_pairs import compare_against, compare_against_loaded, load_run
    from lab.analysis.judge import against

    ids = list(store.query("SELECT run_id FROM runs ORDER BY run_id")["run_id"])
    seconds, _ = cpu(lambda: compare_against(store, ids[0], ids[1:]))
    old = compare_against_loaded(load_run(store, ids[0]), [load_run(store, r) for r in ids[1:41]])
    new = against(stats_cache.stats_table(store), ids[0], ids[1:41])
    gap = max(max(abs(a.difference.low - b.difference.low), abs(a.difference.high - b.difference.high),
                  abs(a.difference.mde - b.difference.mde)) for a, b in zip(old, new))
    return seconds, gap


def ranks_reference(store) -> tuple[float, float, bool]:
    """(CPU seconds of the per-step ranks of every run with every pair computed, with the pruned path, whether
    both give the same intervals and ranks)."""
    from lab.analysis.run_pairs import metric_spec
    from lab.scoring.metrics import single_threaded_blas
    from lab.scoring.ranking import rank_ties

    table = stats_cache.stats_table(store)
    values = table.step_means(metric_spec("score")).T  # every run of the store has every step
    with single_threaded_blas():  # as the statistics worker runs it
        every_s, every = cpu(lambda: rank_ties(table.step_task, values, len(table.task_ids), every_pair=True))
        pruned_s, pruned = cpu(lambda: rank_ties(table.step_task, values, len(table.task_ids)))
    same = all(np.array_equal(getattr(every, n), getattr(pruned, n)) for n in ("low", "high", "rank_best", "rank_worst"))
    return every_s, pruned_s, same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[300, 1000])
    ap.add_argument("--series", type=int, default=300)
    ap.add_argument("--reference", action="store_true", help="time the per-run path too (smallest size)")
    args = ap.parse_args(argv)
    record = Record("bench_stats_scale", argv=list(sys.argv[1:] if argv is None else argv), packages=("numpy", "duckdb"))
    record.setting(runs=args.runs, series=args.series, steps=303, tasks=50)
    ok = True
    for runs in args.runs:
        with tempfile.TemporaryDirectory() as tmp:
            store, t_import = build(Path(tmp), runs, min(args.series, runs))
            print(f"\n{runs} runs × 303 steps (50 tasks), a series of {min(args.series, runs)}; imported in {t_import:.0f} s")
            figures = {**picks(store, runs == args.runs[0]), **series_views(store)}
            for label, seconds in figures.items():
                goal = PICK_GOAL_S if label.startswith("pick") else SERIES_GOAL_S
                met = seconds < goal
                ok &= met or label.endswith("first after the store changed") or label == FIRST_IN_PROCESS
                print(f"  {label:<48} {seconds:>7.2f} s CPU   goal < {goal:g} s: {'yes' if met else 'NO'}")
                record.figure(f"{runs} runs: {label}", seconds, "s", note=f"CPU seconds; goal < {goal:g} s")
            if args.reference and runs == min(args.runs):
                seconds, gap = reference(store)
                print(f"  per-run path (lab.analysis.run_pairs.compare_against), one baseline: {seconds:.2f} s CPU; "
                      f"largest gap of an interval bound to the matrix path: {gap:.1e} points")
                record.figure(f"{runs} runs: the per-run path, one baseline against every run", seconds, "s",
                              note="what a pick cost before the matrix")
                record.check("the matrix path gives the per-run path's intervals (1e-9 points)", gap < 1e-9, f"{gap:.1e}")
                every_s, pruned_s, same = ranks_reference(store)
                print(f"  per-step ranks of all {runs} runs: every pair computed {every_s:.2f} s CPU, pruned {pruned_s:.2f} s "
                      f"CPU; the same intervals and ranks: {'yes' if same else 'NO'}")
                record.figure(f"{runs} runs: per-step ranks, every pair computed", every_s, "s",
                              note="what the rank column cost before the pruned critical value")
                record.figure(f"{runs} runs: per-step ranks, pruned", pruned_s, "s", note="lab.scoring.all_pairs.critical_value")
                record.check("the pruned ranks give every pair's intervals and ranks, float for float", same)
            store.close()
    record.check("a new baseline pick under 1 s and a series view under 2 s once the store's matrix is read", ok)
    record.write()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
