"""The statistics from the store's matrix (lab.analysis.judge) are the per-run path's (lab.analysis.run_pairs)
figures: runs whose step sets differ (a prefix, steps missing here and there), runs with several answers per step
(the two-level bootstrap), the reference NLL (a ratio with its own weights), notes for runs that cannot be
compared, parts of the steps; each judged run's P(best); the kept results and their admission."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lab.errors import LabError
from lab.scoring.ranking import rank_ties
from lab.analysis import cache as stats_cache
from lab.store.importer import import_path
from lab.store.opening import open_store
from lab.analysis.run_pairs import (
    compare_against_loaded, compare_loaded, load_run, metric_spec, step_values, task_numbering,
)
from lab.analysis.judge import against, chances
from lab.analysis.run_matrix import read_table, table_of
from tests.helpers_paired import reference_file, variant, write
from tests.helpers_store import make_results_dir

RESAMPLES = 1000
NAMES = ("base", "better", "same", "short", "holes", "sampled", "sampled2", "tiny")


def holes(result: dict) -> dict:
    """A run that lacks every 7th step (steps missing inside tasks, whole tasks kept)."""
    result["per_step"] = [row for i, row in enumerate(result["per_step"]) if i % 7]
    return result


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("judge")
    results = make_results_dir(root)
    runs = results / "runs"
    base = variant("base", seed=1)
    write(runs, "base", base)
    better = variant("better", shift=0.05, seed=2)
    write(runs, "better", better)
    write(runs, "same", variant("same", seed=3))
    write(runs, "short", variant("short", shift=0.02, seed=4, steps=120))
    write(runs, "holes", holes(variant("holes", shift=0.01, seed=5)))
    write(runs, "sampled", variant("sampled", seed=6, samples=3))
    write(runs, "sampled2", variant("sampled2", shift=0.03, seed=7, samples=2))
    write(runs, "tiny", variant("tiny", seed=8, steps=12))
    write(runs, "base.reference", reference_file(base, 2.0, seed=1))
    write(runs, "better.reference", reference_file(better, 1.7, seed=2))
    store = open_store(root / "lab.duckdb", results)
    ids = {n: store.scalar("SELECT run_id FROM runs WHERE model_short = ?", [n]) for n in NAMES}
    yield store, ids, results
    store.close()


def same_difference(old, new) -> None:
    assert (old is None) == (new is None)
    if old is None:
        return
    for name in ("steps", "tasks", "improved", "regressed", "unchanged", "verdict", "note", "adjustment", "two_level"):
        assert getattr(old, name) == getattr(new, name), name
    for name in ("baseline", "candidate", "delta", "low", "high", "mde"):
        a, b = getattr(old, name), getattr(new, name)
        assert (a is None) == (b is None) and (a is None or math.isclose(a, b, rel_tol=0, abs_tol=1e-9)), (name, a, b)


@pytest.mark.parametrize("metric", ["score", "ref_nll", "first_cmd_exact", "equiv_f1"])
@pytest.mark.parametrize("baseline", ["base", "sampled"])
def test_one_against_many_is_the_per_run_path(lab, metric, baseline):
    store, ids, _ = lab
    table = read_table(store)
    others = [ids[n] for n in NAMES if n != baseline]
    old = compare_against_loaded(load_run(store, ids[baseline]), [load_run(store, r) for r in others], metric,
                                 resamples=RESAMPLES)
    new = against(table, ids[baseline], others, metric, resamples=RESAMPLES)
    for a, b in zip(old, new):
        assert (a.run_id, a.name, a.note) == (b.run_id, b.name, b.note)
        same_difference(a.difference, b.difference)
    if metric == "score":
        assert any(b.difference is not None and b.difference.two_level for b in new)  # the slower path was taken
        assert next(b for b in new if b.run_id == ids["tiny"]).difference.ci is None  # too few steps: no interval


def test_a_part_of_the_steps_and_pairwise_intervals_are_the_per_run_path(lab):
    store, ids, _ = lab
    table = read_table(store)
    keys = [k for k in table.step_keys if k.split("/")[0] in {f"task-{i:03d}" for i in range(0, 50, 3)}]
    a = load_run(store, ids["holes"])
    for name in ("base", "sampled2", "short"):
        old = compare_loaded(a, load_run(store, ids[name]), ["score"], keys, resamples=RESAMPLES).get("score")
        new = against(table, ids["holes"], [ids[name]], "score", keys, simultaneous=False, resamples=RESAMPLES)[0]
        same_difference(old, new.difference)


def test_the_ranking_is_the_one_the_runs_give(lab):
    """Results' per-step ranks from the matrix: the runs on the same steps ranked as rank_ties ranks them from
    the loaded runs (answers averaged per step)."""
    from lab.analysis.leaderboard import _tie_groups

    store, ids, _ = lab
    members = sorted(ids[n] for n in ("base", "better", "same", "sampled", "sampled2"))
    groups = _tie_groups(read_table(store), sorted(ids.values()), RESAMPLES, None)
    group = groups[ids["base"]]
    assert group.run_ids == members and groups[ids["short"]].ranking is None
    runs = [load_run(store, r) for r in members]
    keys = runs[0].steps.dropna(subset=["command_f1"]).index
    index = task_numbering(*runs)
    task = np.array([index[t] for t in runs[0].steps.loc[keys, "task_id"]])
    values = np.column_stack([np.nanmean(step_values(r, metric_spec("score"), keys), axis=1) for r in runs])
    want = rank_ties(task, values, len(index), resamples=RESAMPLES)
    assert np.allclose(group.ranking.low, want.low, atol=1e-9) and (group.ranking.rank_best == want.rank_best).all()


def test_each_judged_run_gets_its_chance_of_being_the_best(lab):
    store, ids, _ = lab
    table = read_table(store)
    names = ["base", "better", "same", "short", "holes"]
    found = chances(table, [ids[n] for n in names], ids["base"], resamples=RESAMPLES)
    p = dict(zip(names, found.p_best))
    assert p["short"] is None and p["holes"] is None and "2 runs lacking steps" in found.note
    judged = [p[n] for n in ("base", "better", "same")]
    assert math.isclose(sum(judged), 1.0) and p["better"] == max(judged) and found.steps == 303 and found.tasks == 50
    assert all(r >= 0 for r in found.expected_regret if r is not None)
    alone = chances(table, [ids["base"], ids["tiny"]], ids["tiny"], resamples=RESAMPLES)
    assert alone.p_best == [None, None] and alone.note.startswith("no P(best)")


def test_runs_loaded_from_several_stores_make_the_same_table(lab):
    store, ids, _ = lab
    runs = [load_run(store, ids[n]) for n in ("base", "holes", "sampled")]
    mine, theirs = table_of(runs), read_table(store)
    for a, b in zip(against(mine, ids["base"], [ids["holes"], ids["sampled"]], resamples=RESAMPLES),
                    against(theirs, ids["base"], [ids["holes"], ids["sampled"]], resamples=RESAMPLES)):
        same_difference(a.difference, b.difference)
    with pytest.raises(LabError, match="given twice"):
        table_of([runs[0], runs[0]])
    with pytest.raises(LabError, match="no run 'nope' in the store"):
        against(mine, ids["base"], ["nope"])


def test_results_are_kept_for_everybody_until_the_store_changes(lab, tmp_path):
    """Asked twice, a comparison is computed once (and admitted once); a new run in the store is a new
    generation: computed again, with the new run in it."""
    from lab.analysis.leaderboard import baseline_columns

    store, ids, results = lab
    stats_cache.clear()
    admitted = []

    class Admit:
        def __enter__(self):
            admitted.append(1)

        def __exit__(self, *exc):
            return False

    runs = [ids[n] for n in ("base", "better", "same")]
    first = baseline_columns(store, runs, ids["base"], admit=Admit, resamples=RESAMPLES)
    again = baseline_columns(store, runs, ids["base"], admit=Admit, resamples=RESAMPLES)
    assert first == again and len(admitted) == 1  # the comparison once (the store's matrix is read unadmitted)
    write(results / "runs", "newer", variant("newer", shift=0.04, seed=11))
    assert not import_path(store, results / "runs" / "newer.json").failed
    newer = store.scalar("SELECT run_id FROM runs WHERE model_short = 'newer'")
    after = baseline_columns(store, [*runs, newer], ids["base"], admit=Admit, resamples=RESAMPLES)
    assert len(admitted) == 2 and after.delta[-1].startswith("+")
    store.execute("DELETE FROM runs WHERE run_id = ?", [newer])
    store.execute("DELETE FROM steps WHERE run_id = ?", [newer])
