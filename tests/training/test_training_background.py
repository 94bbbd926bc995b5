"""TB2LiteCallback(background=True) in a real tiny `transformers.Trainer` on CPU: the saves are evaluated by a worker
process beside training (lab.training.worker), on the saved folders.

What must hold: both saves' result files; their scalars in TensorBoard's event files at the saves' global steps
(and the step metric beside them); the parameters and losses of a run without the callback; the training loop
never held by the callback past the bound (timed by callbacks placed just before and just after it); the queue
policy; a checkpoint deleted by save_total_limit before its evaluation is a skip, said in one line; a worker
killed in the middle of an evaluation, or stuck, is started again and its evaluation finished or failed in one
line; a killed training run keeps every finished evaluation and `python -m lab training finish` does the rest.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from transformers import TrainerCallback

from lab.resultfiles.files import read_result_file
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT, REPO
from tests.training.helpers_training import (
    clock,
    logged,
    losses,
    same_parameters,
    synthetic_replay,
    tensorboard_scalars,
    train_tiny,
)

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
BOUND_S = 1.0  # what the training may wait in the callback at a save, or at any step


@pytest.fixture
def lab_results(tmp_path, monkeypatch):
    """A results folder of the test's own (a rerun starts clean)."""
    results = make_results_dir(tmp_path / "lab")
    monkeypatch.setenv("LAB_RESULTS", str(results))
    monkeypatch.delenv("LAB_RUNS_DIR", raising=False)
    monkeypatch.delenv("LAB_DB", raising=False)
    return results


@pytest.fixture(scope="module")
def replay(tmp_path_factory) -> Path:
    return synthetic_replay(tmp_path_factory.mktemp("replay") / "synthetic.jsonl", tasks=12, steps=3)


@pytest.fixture(scope="module")
def baseline(tiny_model_dir, tmp_path_factory):
    return train_tiny(tiny_model_dir, tmp_path_factory.mktemp("plain") / "sft-out", [])


class After(TrainerCallback):
    """Placed after the callback: runs `act(step)` at each save, and `begin()` when training begins."""

    def __init__(self, act=None, begin=None) -> None:
        self.act, self.begin = act, begin

    def on_train_begin(self, args, state, control, **kwargs):
        if self.begin is not None:
            self.begin()

    def on_save(self, args, state, control, **kwargs):
        if self.act is not None:
            self.act(state.global_step)


def held_until(callback, step: int) -> After:
    """A callback after ours that holds the worker still (SIGSTOP) from the training's start until save `step`."""
    def hold() -> None:
        os.kill(callback.state.worker.proc.pid, signal.SIGSTOP)

    def act(at: int) -> None:
        if at == step:
            os.kill(callback.state.worker.proc.pid, signal.SIGCONT)

    return After(act, hold)


def status_of(callback, step: int) -> str | None:
    job = callback.book.get(f"{step:09d}-save")
    return job.status if job is not None else None


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "lab.training"]


def wait_for(condition, timeout: float = 120.0, what: str = "") -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.1)


@pytest.fixture
def worker_settings(monkeypatch):
    """options.yaml's `worker` block, changed for one test (the callback's watch reads it at each look)."""
    from lab.training import options

    table = {**options.training_defaults(), "worker": dict(options.training_defaults()["worker"])}
    monkeypatch.setattr(options, "training_defaults", lambda: table)
    for module in ("series_state", "worker_process", "callback", "worker", "naming", "metrics", "distributed"):
        monkeypatch.setattr(f"lab.training.{module}.training_defaults", lambda: table, raising=False)
    return table["worker"]


def test_two_saves_are_evaluated_beside_training(tiny_model_dir, lab_results, replay, baseline, tmp_path, caplog):
    from lab.training import TB2LiteCallback

    before, after = clock(), clock()
    callback = TB2LiteCallback(str(replay), max_tokens=8, reference=True, background=True)
    out = tmp_path / "sft-bg"
    with caplog.at_level(logging.WARNING, logger="lab.training"):
        trainer, model = train_tiny(tiny_model_dir, out, [before, callback, after], report_to=["tensorboard"])
    assert not warnings_of(caplog)
    runs = lab_results / "runs"
    for step in (2, 4):
        result = read_result_file(runs / f"sft-bg-checkpoint-{step}.json")
        assert result["training"]["global_step"] == step and result["aggregate"]["steps"] == 36
        assert result["engine_spec"] == f"transformers:{out}/checkpoint-{step}?max_tokens=8&device=cpu&dtype=float32"
        assert (runs / f"sft-bg-checkpoint-{step}.reference.json").is_file()
    scalars = tensorboard_scalars(out)
    for key in ("tb2lite/score", "tb2lite/ref_nll_per_token", "tb2lite/eval_seconds", "tb2lite/global_step"):
        assert sorted(scalars[f"train/{key}"]) == [2, 4], key
    assert scalars["train/tb2lite/global_step"] == {2: 2.0, 4: 4.0}  # the step metric for W&B-like loggers
    assert logged(trainer, "tb2lite/eval_failed") == {2: 0.0, 4: 0.0}
    assert same_parameters(model, baseline[1]) and losses(trainer) == losses(baseline[0])
    held = [after.saves[s] - before.saves[s] for s in (2, 4)] + \
           [after.steps[s] - before.steps[s] for s in before.steps]
    assert max(held) < BOUND_S, held
    jobs = {j.step: j for j in callback.book.jobs()}
    assert [jobs[s].status for s in (2, 4)] == ["done", "done"]
    assert callback.state.worker.starts == 1  # one worker, started when training began
    assert callback.state.worker.proc.wait(timeout=60) == 0  # all done: it ends on its own


def test_queue_latest_evaluates_the_newest_save_and_says_which_it_skipped(tiny_model_dir, lab_results, replay,
                                                                           tmp_path, caplog, worker_settings):
    """The worker held still (SIGSTOP) from the training's start until its third save: with queue='latest' it
    evaluates checkpoint-6 alone and says that 2 and 4 were overtaken."""
    from lab.training import TB2LiteCallback

    worker_settings["stuck_after_s"] = 600  # a worker held still on purpose is not stuck
    callback = TB2LiteCallback(str(replay), max_tokens=8, background=True, queue="latest")

    with caplog.at_level(logging.WARNING, logger="lab.training"):
        trainer, _ = train_tiny(tiny_model_dir, tmp_path / "sft-latest", [callback, held_until(callback, 6)],
                                max_steps=6)
    jobs = {j.step: j for j in callback.book.jobs()}
    assert [jobs[s].status for s in (2, 4, 6)] == ["skipped", "skipped", "done"]
    lines = warnings_of(caplog)
    for step in (2, 4):
        assert f"TB2-lite: checkpoint-{step} skipped: overtaken by checkpoint-6 (queue='latest')" in lines
    assert sorted(logged(trainer, "tb2lite/score")) == [6]
    assert not (lab_results / "runs" / "sft-latest-checkpoint-2.json").exists()


def test_a_checkpoint_deleted_before_its_evaluation_is_skipped(tiny_model_dir, lab_results, replay, tmp_path, caplog,
                                                               worker_settings):
    """save_total_limit=1 deletes checkpoint-2 at the second save, while the worker is held still: its job is
    skipped with one line saying why, checkpoint-4 is evaluated, nothing crashes."""
    from lab.training import TB2LiteCallback

    worker_settings["stuck_after_s"] = 600
    callback = TB2LiteCallback(str(replay), max_tokens=8, background=True)

    with caplog.at_level(logging.WARNING, logger="lab.training"):
        trainer, _ = train_tiny(tiny_model_dir, tmp_path / "sft-limit", [callback, held_until(callback, 4)],
                                save_total_limit=1)
    assert not (tmp_path / "sft-limit" / "checkpoint-2").exists()
    jobs = {j.step: j for j in callback.book.jobs()}
    assert jobs[2].status == "skipped" and jobs[4].status == "done"
    said = [line for line in warnings_of(caplog) if "checkpoint-2 skipped" in line]
    assert len(said) == 1 and "was deleted before its evaluation began (the trainer's save_total_limit?)" in said[0]
    assert sorted(logged(trainer, "tb2lite/score")) == [4]


def signal_mid_evaluation(tiny_model_dir, tmp_path: Path, name: str, sig: int):
    """Train with a callback whose evaluations take seconds (answers of 64 tokens, one at a time); at the first save
    a callback after it waits until the worker evaluates checkpoint-2 and sends the worker `sig`."""
    from lab.training import TB2LiteCallback

    slow = synthetic_replay(tmp_path / "slow.jsonl", tasks=12, steps=3)
    callback = TB2LiteCallback(str(slow), max_tokens=64, background=True, engine_options={"batch_size": 1})

    def act(step: int) -> None:
        if step == 2:
            wait_for(lambda: status_of(callback, 2) == "running", what="the evaluation to start")
            os.kill(callback.state.worker.proc.pid, sig)

    train_tiny(tiny_model_dir, tmp_path / name, [callback, After(act)])
    return callback


def test_a_worker_killed_in_the_middle_of_an_evaluation_is_started_again(tiny_model_dir, lab_results, tmp_path, caplog):
    """The worker killed (SIGKILL) while it evaluates checkpoint-2: the watch says so in one line, starts it again,
    and the evaluation is finished on the second try."""
    with caplog.at_level(logging.WARNING, logger="lab.training"):
        callback = signal_mid_evaluation(tiny_model_dir, tmp_path, "sft-killed", signal.SIGKILL)
    lines = [line for line in warnings_of(caplog) if "evaluation worker" in line]
    assert lines and lines[0].startswith("TB2-lite: the evaluation worker exited (code -9); started again (1 of 3")
    jobs = {j.step: j for j in callback.book.jobs()}
    assert jobs[2].status == "done" and jobs[2].attempts == 2 and jobs[4].status == "done"
    assert read_result_file(jobs[2].result_path)["aggregate"]["steps"] == 36


def test_a_stuck_worker_is_stopped_its_evaluation_failed_and_the_worker_started_again(
        tiny_model_dir, lab_results, tmp_path, caplog, worker_settings):
    """A worker that stops answering (SIGSTOP while it evaluates checkpoint-2): after `stuck_after_s` without a
    heartbeat it is killed, the evaluation failed as stuck, one line said, and a new worker does checkpoint-4."""
    worker_settings["stuck_after_s"] = 4
    with caplog.at_level(logging.WARNING, logger="lab.training"):
        callback = signal_mid_evaluation(tiny_model_dir, tmp_path, "sft-stuck", signal.SIGSTOP)
    lines = [line for line in warnings_of(caplog) if "stuck" in line]
    assert any(line.startswith("TB2-lite: the evaluation worker was stuck (no heartbeat for") and "started again" in line
               for line in lines), lines
    jobs = {j.step: j for j in callback.book.jobs()}
    assert jobs[2].status == "failed" and jobs[2].reason.startswith("stuck: no heartbeat for")
    assert jobs[4].status == "done"
    assert any(line.startswith("TB2-lite evaluation of checkpoint-2 failed") for line in warnings_of(caplog))


def test_a_killed_training_run_is_finished_by_the_command(tiny_model_dir, tmp_path):
    """A training process killed (SIGKILL) while the worker evaluates its second save: the first save's result is
    kept as it was, the worker stops keeping what it finished, and `python -m lab training finish` continues the
    second from there and says all is finished."""
    results = make_results_dir(tmp_path / "lab")
    slow = synthetic_replay(tmp_path / "slow.jsonl", tasks=12, steps=3)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "LAB_RESULTS": str(results)}
    out = tmp_path / "sft-crash"
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "training" / "killed_train.py"), str(tiny_model_dir),
                           str(out), str(slow)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stdout[-2000:] + proc.stderr[-2000:]
    state = out / "tb2lite-eval" / "sft-crash"
    first = results / "runs" / "sft-crash-checkpoint-2.json"
    kept = first.read_bytes()
    wait_for(lambda: (json.loads((state / "worker.json").read_text()).get("exited")), 60, "the worker to stop")
    second = json.loads((state / "jobs" / "000000004-save.json").read_text())
    assert second["status"] == "queued" and "stopped before it finished" in second["reason"]
    partial = results / "runs" / "sft-crash-checkpoint-4.partial.jsonl"
    assert partial.is_file() and len(partial.read_text().splitlines()) >= 2  # a header and a finished step
    done = subprocess.run([sys.executable, "-m", "lab", "training", "finish", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "checkpoint-4: evaluating (try 2)" in done.stdout and "all evaluations of sft-crash finished" in done.stdout
    assert first.read_bytes() == kept and not partial.exists()
    assert read_result_file(results / "runs" / "sft-crash-checkpoint-4.json")["aggregate"]["steps"] == 36
    status = subprocess.run([sys.executable, "-m", "lab", "training", "status", str(state), "--json"], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=120)
    assert [(j["checkpoint"], j["status"]) for j in json.loads(status.stdout)["jobs"]] == [(2, "done"), (4, "done")]


def test_relative_paths_are_read_from_the_training_folder(tiny_model_dir, lab_results, tmp_path, monkeypatch):
    """A script run in its own folder with relative paths (replay, results, output folder): the worker reads them
    there, and the state names them whole, so `finish` works from anywhere."""
    from lab.training import TB2LiteCallback

    monkeypatch.chdir(tmp_path)
    synthetic_replay(tmp_path / "rel.jsonl", tasks=12, steps=3)
    callback = TB2LiteCallback("rel.jsonl", "my-runs", max_tokens=8, background=True)
    train_tiny(tiny_model_dir, Path("sft-rel"), [callback])
    assert sorted(p.name for p in (tmp_path / "my-runs").glob("*.json")) == ["sft-rel-checkpoint-2.json",
                                                                            "sft-rel-checkpoint-4.json"]
    plan = json.loads((tmp_path / "sft-rel" / "tb2lite-eval" / "sft-rel" / "plan.json").read_text())
    assert plan["replay_path"] == str(tmp_path / "rel.jsonl") and plan["output_dir"] == str(tmp_path / "sft-rel")
    assert plan["options"]["results"] == str(tmp_path / "my-runs") and plan["cwd"] == str(tmp_path)
    assert all(Path(j.folder).is_absolute() for j in callback.book.jobs())


def test_a_budget_spent_beside_training_ends_that_evaluation_only(tiny_model_dir, lab_results, replay, tmp_path,
                                                                 caplog):
    """time_budget_s beside training: each save's evaluation runs past it and fails in one line; the worker goes on
    to the next save (a spent budget is no Stop of the worker)."""
    from lab.training import TB2LiteCallback

    callback = TB2LiteCallback(str(replay), max_tokens=8, background=True, time_budget_s=0.01)
    with caplog.at_level(logging.WARNING, logger="lab.training"):
        trainer, _ = train_tiny(tiny_model_dir, tmp_path / "sft-budget", [callback])
    jobs = {j.step: j for j in callback.book.jobs()}
    assert [jobs[s].status for s in (2, 4)] == ["failed", "failed"]
    assert all("ran past its 0.01 s budget" in jobs[s].reason for s in (2, 4))
    assert callback.state.worker.starts == 1 and not [line for line in warnings_of(caplog) if "worker" in line]
    assert logged(trainer, "tb2lite/eval_failed") == {2: 1.0, 4: 1.0}
