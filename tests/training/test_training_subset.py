"""subset_tasks=K: each save replays K tasks balanced over source groups, the series is judged on them, and the
checkpoints the judgement cannot rule out as the best get the whole replay; the store's series keep the two
coverages apart (one line each, never ranked together).

The judgement and the queueing of whole replays are checked on synthetic result files of known quality (no
model); the whole flow on a real tiny Trainer with the worker beside it, on a synthetic replay of 12 tasks.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.resultfiles.files import read_result_file
from lab.settings import Settings
from tests.helpers_paired import variant, write
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT, REPO
from tests.training.helpers_training import logged, synthetic_replay, tensorboard_scalars, train_tiny

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def _steps(tmp_path, tasks=12, steps=3):
    from lab.data import load_replay

    return load_replay(synthetic_replay(tmp_path / "r.jsonl", tasks=tasks, steps=steps)).steps


def test_the_subset_is_balanced_over_source_groups_and_fixed_by_its_seed(tmp_path):
    from lab.training.subset import stratified_tasks, subset_record, task_groups

    steps = _steps(tmp_path, tasks=13)  # groups of 5, 4 and 4 tasks
    groups = task_groups(steps)
    for k in (5, 6, 7, 12):
        chosen = stratified_tasks(steps, k, seed=3)
        counts = Counter(groups[t] for t in chosen)
        assert len(chosen) == len(set(chosen)) == k and max(counts.values()) - min(counts.values()) <= 1, counts
        assert chosen == stratified_tasks(steps, k, seed=3)  # the same seed, the same subset
    assert {tuple(stratified_tasks(steps, 6, seed=s)) for s in range(8)} != {tuple(stratified_tasks(steps, 6, seed=0))}
    record = subset_record(steps, stratified_tasks(steps, 6, 0), 6, 0)
    assert record["steps"] == 18 and record["of_steps"] == 39 and record["of_tasks"] == 13
    assert record["by_group"] == {"data_science": 2, "software_engineering": 2, "system_administration": 2}
    with pytest.raises(LabError, match="give at least 5 tasks"):
        stratified_tasks(steps, 4, 0)
    with pytest.raises(LabError, match="the selected steps have 13 tasks"):
        stratified_tasks(steps, 13, 0)


def _results(tmp_path: Path, shifts: dict[int, float]) -> dict[int, Path]:
    """Synthetic 303-step result files (50 tasks), one per checkpoint step, moved by a known amount."""
    return {step: write(tmp_path / "runs", f"sft-checkpoint-{step}-subset", variant(f"c{step}", shift, seed=step))
            for step, shift in shifts.items()}


def test_the_series_judgement_keeps_the_checkpoints_it_cannot_rule_out(tmp_path):
    from lab.training.finalists import judge, judgement_line

    judgement = judge(_results(tmp_path, {100: 0.0, 200: 0.01, 300: -0.3, 400: -0.2}))
    assert judgement.finalists == [100, 200]  # 300 and 400 are surely worse than 200: ruled out
    assert judgement.rank_best[2] > 1 and judgement.rank_best[3] > 1
    assert abs(sum(judgement.p_best) - 1) < 1e-9 and judgement.p_best[2] == judgement.p_best[3] == 0
    assert judgement.common_steps == 303 and judgement.tasks == 50
    line = judgement_line(judgement)
    assert "2 of 4 checkpoints ruled out as the best" in line and "whole replay for checkpoint-100, checkpoint-200" in line
    alone = judge(_results(tmp_path / "one", {100: 0.0}))
    assert alone.finalists == [100] and "only finalist" in alone.note


def test_the_whole_replays_are_queued_for_the_finalists_only_once(tmp_path):
    """The worker's last phase on a series whose subset results are files of known quality."""
    from lab.training.jobs import DONE, Job, JobBook
    from lab.training.worker import queue_finalists

    book = JobBook(tmp_path / "state")
    book.write_plan({"subset": {"tasks": ["task-000"], "k": 5}})
    plan = type("Plan", (), {"subset": {"tasks": ["task-000"], "k": 5}})()
    for step, path in _results(tmp_path, {2: 0.0, 4: 0.0, 6: -0.35}).items():
        book.add(Job(step, "subset", str(tmp_path / f"checkpoint-{step}"), status=DONE))
        job = book.get(Job(step, "subset", "").id)
        job.status, job.result_path = DONE, str(path)
        book.save(job)
    book.mark_ended(6)
    said: list[str] = []
    assert queue_finalists(book, plan, said.append)
    assert [(j.step, j.kind, j.status) for j in book.jobs() if j.kind == "full"] == [(2, "full", "queued"),
                                                                                     (4, "full", "queued")]
    assert book.judgement()["finalists"] == [2, 4] and "1 of 3 checkpoints ruled out" in said[0]
    assert not queue_finalists(book, plan, said.append) and len(said) == 1  # judged once for these checkpoints


def test_a_subset_series_is_finished_with_the_whole_replay_and_shown_apart(tiny_model_dir, tmp_path, monkeypatch):
    from lab.store import open_store
    from lab.store.series import series_frame
    from lab.analysis.series_judgement import series_stats
    from lab.training import TB2LiteCallback

    results = make_results_dir(tmp_path / "lab")
    monkeypatch.setenv("LAB_RESULTS", str(results))
    replay = synthetic_replay(tmp_path / "synthetic.jsonl", tasks=12, steps=3)
    callback = TB2LiteCallback(str(replay), max_tokens=8, reference=True, background=True, subset_tasks=6,
                               subset_seed=1)
    out = tmp_path / "sft-sub"
    trainer, _ = train_tiny(tiny_model_dir, out, [callback], report_to=["tensorboard"])
    runs = results / "runs"
    for step in (2, 4):
        part = read_result_file(runs / f"sft-sub-checkpoint-{step}-subset.json")
        assert part["aggregate"]["steps"] == 18 and part["training"]["subset"]["tasks"] == callback.subset["tasks"]
        assert part["training"]["subset"]["by_group"] == {"data_science": 2, "software_engineering": 2,
                                                          "system_administration": 2}
        assert sorted({r["task_id"] for r in part["per_step"]}) == callback.subset["tasks"]
        reference = json.loads((runs / f"sft-sub-checkpoint-{step}.reference.json").read_text())
        assert reference["aggregate"]["steps"] == 36  # the reference likelihood on every step
    judgement = callback.book.judgement()
    assert judgement["judged"] == [2, 4] and "too few for an interval" in judgement["note"]  # 18 steps: none ruled out
    for step in judgement["finalists"]:
        assert read_result_file(runs / f"sft-sub-checkpoint-{step}.json")["aggregate"]["steps"] == 36
    scalars = tensorboard_scalars(out)
    assert sorted(scalars["train/tb2lite/subset/score"]) == [2, 4]  # the subset's scores under their own key
    assert sorted(scalars["train/tb2lite/score"]) == judgement["finalists"]  # the whole replays' under the plain one
    assert sorted(logged(trainer, "tb2lite/subset/eval_failed")) == [2, 4]
    store = open_store(Settings())
    try:
        frame = series_frame(store)
        frame = frame[frame["series"].str.startswith("sft-sub")]
        assert sorted(set(frame["series"])) == ["sft-sub", "sft-sub [18/36 steps]"]
        assert list(frame[frame["series"] == "sft-sub"]["steps"]) == [36] * len(judgement["finalists"])
        assert list(frame[frame["series"] == "sft-sub [18/36 steps]"]["x"]) == [2, 4]
        for name in set(frame["series"]):
            stats = series_stats(store, name, resamples=200)
            assert set(stats.points["steps"]) == {36 if name == "sft-sub" else 18}  # one coverage per series
    finally:
        store.close()
    shown = subprocess.run([sys.executable, "-m", "lab", "training", "status", str(out)], cwd=REPO,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "subset 6 of 12 tasks (18 of 36 steps)" in shown.stdout and "never ranked against a whole one" in shown.stdout
    assert "kept, P(best)" in shown.stdout
