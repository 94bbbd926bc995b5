"""Stored runs compared (lab.analysis.run_pairs) on their common steps, one way for every surface: the run-level
figures are the store's own, the reference NLL is a lower-is-better ratio, sampled runs resample their answers,
the Results table gets ranks, Δ and verdicts, and published rows without per-step data say so."""
from __future__ import annotations

import pytest

from lab.errors import LabError
from lab.store.importer import import_path
from lab.analysis.leaderboard import (
    DELTA_COLUMN, NO_STEPS, TIES_COLUMN, VERDICT_COLUMN, check_baseline, row_runs, with_comparisons,
)
from lab.store.opening import open_store
from lab.analysis.run_pairs import compare_against, compare_runs, summary_line, task_breakdown
from lab.published.links import link_published
from lab.store import queries
from tests.helpers_paired import reference_file, variant, write
from tests.helpers_store import make_results_dir

RESAMPLES = 1000
RERUN = "published/lfm25_echo_rlvr_gpu6_eval_20260612/lfm25-raw-base-no-sft-rerun-20260612"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("paired")
    results = make_results_dir(root)
    runs = results / "runs"
    base = variant("base", seed=1)
    write(runs, "base", base)
    better = variant("better", shift=0.08, seed=2)
    write(runs, "better", better)
    write(runs, "same", variant("same", shift=0.0, seed=3))
    write(runs, "short", variant("short", shift=0.02, seed=4, steps=120))
    write(runs, "sampled", variant("sampled", shift=0.0, seed=5, samples=4))
    write(runs, "tiny", variant("tiny", seed=6, steps=12))
    write(runs, "base.reference", reference_file(base, 2.0, seed=1))
    write(runs, "better.reference", reference_file(better, 1.6, seed=2))
    write(results, RERUN, variant("rerun", shift=0.01, seed=7))  # stands in for the published file a row names
    store = open_store(root / "lab.duckdb", results)
    link_published(store)
    ids = {name: store.scalar("SELECT run_id FROM runs WHERE model_short = ?", [name])
           for name in ("base", "better", "same", "short", "sampled", "tiny", "rerun")}
    yield store, ids, results
    store.close()


def test_the_difference_is_the_stores_own_scores_and_counts_every_step(lab):
    store, ids, _ = lab
    cmp = compare_runs(store, ids["base"], ids["better"], resamples=RESAMPLES)
    score = cmp.get("score")
    a, b = (store.scalar("SELECT avg_command_f1 FROM runs WHERE run_id = ?", [ids[n]]) for n in ("base", "better"))
    assert score.delta == pytest.approx(100 * (b - a), abs=5e-3)  # the aggregate is rounded to 4 decimals
    assert (score.steps, score.tasks) == (303, 50)
    assert score.improved + score.regressed + score.unchanged == 303
    assert score.verdict == "better" and score.low > 0
    assert summary_line(cmp).startswith("score +") and "303 common steps of 50 tasks): better" in summary_line(cmp)
    shape = cmp.to_dict()["metrics"]["score"]
    assert {"delta", "ci", "improved", "regressed", "unchanged", "steps"} <= set(shape) and len(shape["ci"]) == 2


def test_reference_nll_is_a_ratio_where_lower_is_better(lab):
    store, ids, _ = lab
    cmp = compare_runs(store, ids["base"], ids["better"], resamples=RESAMPLES)
    nll = cmp.get("ref_nll")
    tokens = store.dicts("SELECT r.run_id, sum(-ref_logprob) / sum(ref_tokens) AS nll FROM step_reference r "
                         "WHERE run_id IN (?, ?) GROUP BY 1", [ids["base"], ids["better"]])
    by_run = {t["run_id"]: t["nll"] for t in tokens}
    assert nll.delta == pytest.approx(by_run[ids["better"]] - by_run[ids["base"]])
    assert nll.delta < 0 and nll.verdict == "better" and nll.improved > nll.regressed
    missing = compare_runs(store, ids["base"], ids["same"], resamples=RESAMPLES)
    assert missing.get("ref_nll") is None and missing.notes["ref_nll"] == "not recorded for the candidate"


def test_only_common_steps_count_and_too_few_say_so(lab):
    store, ids, _ = lab
    short = compare_runs(store, ids["base"], ids["short"], resamples=RESAMPLES).get("score")
    assert short.steps == 120 and short.ci is not None
    tiny = compare_runs(store, ids["base"], ids["tiny"], resamples=RESAMPLES).get("score")
    assert tiny.steps == 12 and tiny.ci is None and tiny.note == "fewer than 30 common steps (12): no interval"


def test_sampled_answers_are_resampled_within_their_steps(lab):
    store, ids, _ = lab
    score = compare_runs(store, ids["base"], ids["sampled"], resamples=RESAMPLES).get("score")
    means = store.scalar("SELECT 100 * avg(m) FROM (SELECT avg(command_f1) AS m FROM samples WHERE run_id = ? "
                         "GROUP BY step_key)", [ids["sampled"]])
    assert score.two_level and score.candidate == pytest.approx(means)


def test_one_against_many_is_simultaneous_and_the_tasks_add_up(lab):
    store, ids, _ = lab
    many = compare_against(store, ids["base"], [ids["better"], ids["same"], ids["tiny"]], resamples=RESAMPLES)
    assert [m.difference.adjustment for m in many[:2]] == ["simultaneous over 2 comparisons (max-T)"] * 2
    assert many[2].difference.ci is None  # 12 steps: no interval, not counted in k
    pair = compare_runs(store, ids["base"], ids["better"], resamples=RESAMPLES)
    assert many[0].difference.high - many[0].difference.low > pair.get("score").high - pair.get("score").low
    tasks = task_breakdown(pair)
    assert len(tasks) == 50 and tasks["contribution"].sum() == pytest.approx(pair.get("score").delta, abs=1e-2)
    assert abs(tasks["contribution"].iloc[0]) >= abs(tasks["contribution"].iloc[-1])


def test_results_rows_get_ranks_deltas_and_verdicts_and_rows_without_steps_say_so(lab):
    store, ids, _ = lab
    frame = queries.leaderboard(store)
    shown, note = with_comparisons(store, frame, ids["base"], resamples=RESAMPLES)
    cols = list(shown.columns)
    assert cols[cols.index("score") + 1: cols.index("score") + 4] == [TIES_COLUMN, DELTA_COLUMN, VERDICT_COLUMN]
    runs = row_runs(store, frame)
    published = shown[shown["source"] == "published"]
    linked = published[published["name"] == "LiquidAI/LFM2.5-8B-A1B raw rerun 20260612"]
    assert len(linked) == 1 and linked.iloc[0][TIES_COLUMN] != NO_STEPS  # a fetched run gives the row its steps
    others = published.drop(linked.index)
    assert set(others[TIES_COLUMN]) == {NO_STEPS} and set(others[DELTA_COLUMN]) == {NO_STEPS}
    by_run = dict(zip(runs, shown.to_dict("records")))
    assert by_run[ids["base"]][DELTA_COLUMN] == "baseline"
    assert by_run[ids["better"]][VERDICT_COLUMN] == "better" and by_run[ids["better"]][DELTA_COLUMN].startswith("+")
    assert by_run[ids["tiny"]][VERDICT_COLUMN] == "no interval"
    assert " of " in by_run[ids["better"]][TIES_COLUMN]
    assert "simultaneous over" in note and "max-T" in note
    assert by_run[ids["tiny"]][TIES_COLUMN] == "no ranking: no other run on the same steps"


def test_runs_of_other_scorers_or_unknown_ids_are_refused_in_one_line(lab, tmp_path):
    store, ids, _ = lab
    with pytest.raises(LabError, match="no run 'nope'"):
        compare_runs(store, ids["base"], "nope")
    legacy = variant("legacy", seed=9)
    legacy["scoring_version"] = "legacy_386"
    legacy["total_input_steps"] = 386
    path = write(tmp_path, "legacy", legacy)
    report = import_path(store, path)
    assert not report.failed, report.failed
    legacy_id = store.scalar("SELECT run_id FROM runs WHERE model_short = 'legacy'")
    assert store.scalar("SELECT scoring_version FROM runs WHERE run_id = ?", [legacy_id]) == "legacy_386"
    with pytest.raises(LabError, match="not comparable"):
        compare_runs(store, ids["base"], legacy_id)


def test_a_baseline_the_store_does_not_have_is_refused(lab):
    """What a page sends as the baseline is checked against the store (a parameter, never SQL text)."""
    store, ids, _ = lab
    assert check_baseline(store, None) is None and check_baseline(store, ids["base"]) == ids["base"]
    for hostile in ("x' OR '1'='1", "../../etc/passwd", "<script>alert(1)</script>"):
        with pytest.raises(LabError, match="is not a run of the store"):
            check_baseline(store, hostile)
