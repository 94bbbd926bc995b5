"""A training run's series in the store: named by its result files' `training.series` (when that is a plain name),
and never mixing coverages: the runs of a subset of the steps form a series of their own beside the whole
replays, so no ranking, lead or interval puts a subset score against a whole one."""
from __future__ import annotations

import pytest

from lab.store.opening import open_store
from lab.store.series import series_frame
from lab.analysis.series_judgement import series_stats
from tests.helpers_paired import variant, write
from tests.helpers_store import make_results_dir


def _run(runs, name: str, step: int, shift: float, steps: int | None, series: str | None) -> None:
    result = variant(name, shift=shift, seed=step, steps=steps, model_path=f"/ckpts/{name}")
    result["replay_steps"] = 303
    if series is not None:
        result["training"] = {"global_step": step, "series": series, "saved": True}
    write(runs, name, result)


@pytest.fixture()
def store(tmp_path):
    results = make_results_dir(tmp_path)
    runs = results / "runs"
    for step, shift in ((100, 0.0), (200, 0.03), (300, 0.05)):  # every checkpoint on the subset (its first 60 steps)
        _run(runs, f"sft-checkpoint-{step}-subset", step, shift, 60, "sft")
    _run(runs, "sft-checkpoint-300", 300, 0.05, None, "sft")  # the one finalist, on every step
    for step in (10, 20):  # a series named by hand: markup in the training block is no series name
        _run(runs, f"odd-checkpoint-{step}", step, 0.0, None, "<b>x</b>")
    opened = open_store(tmp_path / "lab.duckdb", results)
    yield opened
    opened.close()


def test_the_training_block_names_the_series_and_coverages_stay_apart(store):
    frame = series_frame(store)
    sft = frame[frame["series"].str.startswith("sft")]
    assert sorted(set(sft["series"])) == ["sft", "sft [60/303 steps]"]
    assert list(sft[sft["series"] == "sft [60/303 steps]"]["x"]) == [100, 200, 300]
    whole = sft[sft["series"] == "sft"]
    assert list(whole["x"]) == [300] and list(whole["steps"]) == [303]  # one finalist: still shown
    assert sorted(set(frame["series"]) - set(sft["series"])) == ["odd"]  # from the file names, not the markup


def test_each_coverage_is_judged_on_its_own(store):
    subset = series_stats(store, "sft [60/303 steps]", resamples=500)
    assert set(subset.points["steps"]) == {60} and subset.lead is not None
    assert {subset.lead.runner, subset.lead.best} <= set(subset.points["run_id"])
    whole = series_stats(store, "sft", resamples=500)
    assert list(whole.points["steps"]) == [303] and whole.lead is None  # nothing to rank a whole replay against
