"""The statistics Compare and Triage show, from the store's StatsTable and kept for every visitor until the store
changes (lab.analysis.cache): a pair of runs on every metric, and several runs against the first with each
one's chance of being the best. The store's lock (`hold`) is taken to read only; `admit` is entered around a
computation nobody has made yet (a public lab's per-visitor limits)."""
from __future__ import annotations

from contextlib import nullcontext
from typing import Sequence

from lab.store.db import Store
from lab.analysis.run_pairs import AgainstBaseline, RunComparison, compare_loaded
from lab.analysis.cache import Admit, shared, stats_table
from lab.analysis.judge import Chances, against, chances
from lab.analysis.run_matrix import Hold


def pair_comparison(store: Store, baseline: str, candidate: str, *, hold: Hold = nullcontext,
                    admit: Admit = nullcontext, resamples: int | None = None, seed: int | None = None) -> RunComparison:
    """Two stored runs on every metric (lab.analysis.run_pairs.compare_loaded; LabError for a run the store lacks)."""
    table = stats_table(store, hold)
    table.index(baseline), table.index(candidate)

    def make() -> RunComparison:
        return compare_loaded(table.run_steps(baseline), table.run_steps(candidate), resamples=resamples, seed=seed)
    return shared(store, ("pair", baseline, candidate, resamples, seed), make, admit)


def against_first(store: Store, run_ids: Sequence[str], metric: str = "score", *, hold: Hold = nullcontext,
                  admit: Admit = nullcontext, resamples: int | None = None,
                  seed: int | None = None) -> tuple[list[AgainstBaseline], Chances]:
    """The first run against each of the others (simultaneous intervals) and every run's P(best) and expected
    regret on the first one's steps."""
    table = stats_table(store, hold)
    ids = list(run_ids)
    for run_id in ids:
        table.index(run_id)

    def make() -> tuple[list[AgainstBaseline], Chances]:
        return (against(table, ids[0], ids[1:], metric, resamples=resamples, seed=seed),
                chances(table, ids, ids[0], metric, resamples=resamples, seed=seed))
    return shared(store, ("against", tuple(ids), metric, resamples, seed), make, admit)
