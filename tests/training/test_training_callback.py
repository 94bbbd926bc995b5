"""TB2LiteCallback in a real tiny `transformers.Trainer` (and TRL's SFTTrainer) on CPU, two saves each.

What must hold: two result files (and reference files) in the lab's results folder, in the published
schema, with step, epoch and run name; a series of two points in the lab's store; the tb2lite scalars in
TensorBoard's event files at the saves' global steps (read back with TensorBoard's own reader); the
model's parameters and losses identical to the same training without the callback; the greedy in-training
answers identical to `python -m lab replay` on the saved checkpoint; a failed evaluation, or one past its
time budget, is one warning line and `tb2lite/eval_failed` 1, and training goes on.
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from lab.resultfiles.files import read_result_file
from lab.settings import Settings
from tests.helpers_runs import untimed_steps
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT, REPO
from tests.training.helpers_training import (
    MAX_STEPS,
    SAVE_STEPS,
    logged,
    losses,
    same_parameters,
    tensorboard_scalars,
    train_tiny,
)

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
SAVES = list(range(SAVE_STEPS, MAX_STEPS + 1, SAVE_STEPS))
RUN_TIMINGS = {"timestamp", "load_time_sec", "gen_time_sec", "avg_sec_per_step", "training"}


@pytest.fixture(scope="module")
def lab_results(tmp_path_factory):
    """A results folder of the lab's own (LAB_RESULTS), its store inside."""
    results = make_results_dir(tmp_path_factory.mktemp("lab"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAB_RESULTS", str(results))
        mp.delenv("LAB_RUNS_DIR", raising=False)
        mp.delenv("LAB_DB", raising=False)
        yield results


@pytest.fixture(scope="module")
def baseline(tiny_model_dir, tmp_path_factory):
    """The same training without the callback."""
    return train_tiny(tiny_model_dir, tmp_path_factory.mktemp("plain") / "sft-out", [])


@pytest.fixture(scope="module")
def evaluated(tiny_model_dir, lab_results, tmp_path_factory):
    """The training with the callback: greedy, one step, the reference scored, TensorBoard on."""
    from lab.training import TB2LiteCallback

    out = tmp_path_factory.mktemp("cb") / "sft-out"
    callback = TB2LiteCallback(str(EXCERPT), tasks=["task-000"], limit=1, max_tokens=8, reference=True)
    trainer, model = train_tiny(tiny_model_dir, out, [callback], report_to=["tensorboard"])
    return trainer, model, callback, out


def test_each_save_writes_a_result_file_in_the_published_schema(evaluated, lab_results):
    trainer, _, callback, out = evaluated
    runs = lab_results / "runs"
    assert sorted(p.name for p in runs.glob("*.json")) == sorted(
        [f"sft-out-checkpoint-{s}.json" for s in SAVES] + [f"sft-out-checkpoint-{s}.reference.json" for s in SAVES])
    assert not list(runs.glob("*.partial.jsonl"))
    for step in SAVES:
        result = read_result_file(runs / f"sft-out-checkpoint-{step}.json")  # the one validator of result files
        assert result["aggregate"]["steps"] == 1 and result["per_step"][0]["task_id"] == "task-000"
        assert result["engine_spec"] == f"transformers:{out}/checkpoint-{step}?max_tokens=8&device=cpu&dtype=float32"
        training = result["training"]
        assert training["global_step"] == step and training["saved"] and training["series"] == "sft-out"
        assert training["epoch"] == pytest.approx(step * 2 / 14) and training["checkpoint"] == f"{out}/checkpoint-{step}"
        assert training["trainer"] == "Trainer" and training["run_name"] is None and training["world_size"] == 1
        reference = json.loads((runs / f"sft-out-checkpoint-{step}.reference.json").read_text())
        assert reference["training"] == training and reference["aggregate"]["ref_nll_per_token"] > 0
    assert set(callback.outcomes) == set(SAVES) and all(o.error is None for o in callback.outcomes.values())


def test_the_store_holds_the_series_with_two_points(evaluated, lab_results):
    from lab.store import open_store
    from lab.store.series import series_frame

    store = open_store(Settings())
    try:
        series = series_frame(store)
        points = series[series["series"] == "sft-out"]
        assert list(points["x"]) == SAVES and list(points["x_kind"]) == ["checkpoint step"] * 2
        # issue 56: limit=1 was chosen, so the points are whole for their step, not "[partial 1/14]"
        assert all(name.endswith(" [limited to 1 step]") for name in points["name"]), list(points["name"])
        assert points["ref_nll"].notna().all()  # the reference runs joined to their checkpoints
        logged_scores = logged(evaluated[0], "tb2lite/score")
        assert list(points["score"]) == [logged_scores[s] for s in SAVES]
    finally:
        store.close()


def test_the_trainer_logs_the_scalars_at_the_saves_global_steps(evaluated):
    trainer, _, _, out = evaluated
    keys = ("tb2lite/score", "tb2lite/first_cmd_exact", "tb2lite/valid_json", "tb2lite/ref_nll_per_token",
            "tb2lite/eval_seconds", "tb2lite/eval_failed")
    for key in keys:
        assert sorted(logged(trainer, key)) == SAVES, key
    assert set(logged(trainer, "tb2lite/eval_failed").values()) == {0.0}
    assert all(v > 0 for v in logged(trainer, "tb2lite/eval_seconds").values())
    scalars = tensorboard_scalars(out)
    for key in keys:  # the TensorBoard integration prefixes the trainer's own keys with train/
        assert scalars[f"train/{key}"] == pytest.approx(logged(trainer, key), abs=1e-4), key
    assert sorted(scalars["train/loss"]) == list(range(1, MAX_STEPS + 1))


def test_training_is_the_same_as_without_the_callback(evaluated, baseline):
    trainer, model, _, _ = evaluated
    plain_trainer, plain_model = baseline
    assert same_parameters(model, plain_model)
    assert losses(trainer) == losses(plain_trainer) and len(losses(trainer)) == MAX_STEPS


def test_the_in_training_answers_are_those_of_replay_on_the_saved_checkpoint(evaluated, lab_results, tmp_path):
    """`python -m lab replay --engine <the file's engine_spec>` on the saved checkpoint: the same file, byte for
    byte, but for wall times."""
    runs = lab_results / "runs"
    ours = read_result_file(runs / f"sft-out-checkpoint-{SAVES[-1]}.json")
    proc = subprocess.run([sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--engine", ours["engine_spec"],
                           "--tasks", "task-000", "--limit", "1", "--name", f"sft-out-checkpoint-{SAVES[-1]}",
                           "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = read_result_file(tmp_path / f"sft-out-checkpoint-{SAVES[-1]}.json")

    def strip(result: dict) -> str:
        return json.dumps({**{k: v for k, v in result.items() if k not in RUN_TIMINGS},
                           "per_step": untimed_steps(result["per_step"])},
                          sort_keys=True)

    assert strip(ours) == strip(theirs)
    assert ours["per_step"][0]["raw_output"] and ours["per_step"][0]["logprobs"]


def test_a_failed_evaluation_is_one_line_and_training_goes_on(tiny_model_dir, baseline, lab_results, tmp_path, caplog):
    """No tokenizer anywhere (the trainer has no processing_class, the checkpoints none saved): each save's
    evaluation fails with one line; training finishes exactly as without the callback."""
    from lab.training import TB2LiteCallback

    callback = TB2LiteCallback(str(EXCERPT), tmp_path / "runs", tasks=["task-000"], limit=1, max_tokens=8)
    with caplog.at_level(logging.WARNING, logger="lab.training"):
        trainer, model = train_tiny(tiny_model_dir, tmp_path / "no-tok", [callback], processing_class=False)
    lines = [r.getMessage() for r in caplog.records if r.name == "lab.training"]
    assert len(lines) == len(SAVES) and all("\n" not in line for line in lines)
    assert all("failed after" in line and "no tokenizer to render prompts with" in line for line in lines)
    assert logged(trainer, "tb2lite/eval_failed") == {s: 1.0 for s in SAVES}
    assert sorted(logged(trainer, "tb2lite/eval_seconds")) == SAVES and not logged(trainer, "tb2lite/score")
    assert trainer.state.global_step == MAX_STEPS and same_parameters(model, baseline[1])
    assert not list((tmp_path / "runs").glob("*.json")) if (tmp_path / "runs").exists() else True


def test_an_evaluation_past_its_budget_is_stopped(tiny_model_dir, baseline, tmp_path, caplog):
    """A budget far shorter than the replay: stopped before its first step, logged as such with its time, no
    file and no checkpoint left (nothing to resume); training goes on unchanged."""
    from lab.training import TB2LiteCallback

    callback = TB2LiteCallback(str(EXCERPT), tmp_path / "runs", tasks=["task-000"], limit=2, max_tokens=64,
                               engine_options={"batch_size": 1}, time_budget_s=0.01)
    with caplog.at_level(logging.WARNING, logger="lab.training"):
        trainer, model = train_tiny(tiny_model_dir, tmp_path / "slow", [callback])
    lines = [r.getMessage() for r in caplog.records if r.name == "lab.training"]
    assert len(lines) == len(SAVES), lines
    assert all("ran past its 0.01 s budget before its replay finished a step (of 2)" in line for line in lines)
    assert logged(trainer, "tb2lite/eval_failed") == {s: 1.0 for s in SAVES}
    assert all(s < 60 for s in logged(trainer, "tb2lite/eval_seconds").values())
    assert not [p.name for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    assert same_parameters(model, baseline[1]) and losses(trainer) == losses(baseline[0])


def test_a_two_second_budget_stops_a_generate_in_its_middle(tiny_model_dir, baseline, tmp_path, caplog):
    """time_budget_s=2.0 on answers of up to 2,048 tokens (the first alone takes several seconds uncut): each save's
    evaluation is cut inside its first generate and ends within a second of the budget, training unchanged."""
    from lab.training import TB2LiteCallback

    callback = TB2LiteCallback(str(EXCERPT), tmp_path / "runs", limit=8, max_tokens=2048, time_budget_s=2.0,
                               engine_options={"batch_size": 1})
    with caplog.at_level(logging.WARNING, logger="lab.training"):
        trainer, model = train_tiny(tiny_model_dir, tmp_path / "budget", [callback])
    seconds = logged(trainer, "tb2lite/eval_seconds")
    assert sorted(seconds) == SAVES and all(s < 2.0 + 1.0 for s in seconds.values()), seconds
    lines = [r.getMessage() for r in caplog.records if r.name == "lab.training"]
    assert len(lines) == 2 and all("ran past its 2 s budget before its replay finished a step (of 8)" in line
                                   for line in lines), lines
    assert same_parameters(model, baseline[1]) and losses(trainer) == losses(baseline[0])


def test_trl_sft_trainer_takes_it_unchanged(tiny_model_dir, tmp_path):
    """TRL's SFTTrainer (a Trainer), seeded sampling in the evaluation and every_steps=1: an evaluation at
    every optimizer step, the saved ones named by their folders; training as without the callback."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from lab.data import load_replay
    from lab.training import TB2LiteCallback
    from tests.training.helpers_training import tiny_training_model

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    data = Dataset.from_dict({"text": [s.ref_raw for s in load_replay(EXCERPT).steps]})

    def train(callbacks, out):
        model = tiny_training_model(tiny_model_dir)
        config = SFTConfig(output_dir=str(out), max_steps=MAX_STEPS, save_steps=SAVE_STEPS, logging_steps=1,
                           per_device_train_batch_size=2, learning_rate=1e-2, seed=0, use_cpu=True, report_to="none",
                           disable_tqdm=True, max_length=96, packing=False)
        trainer = SFTTrainer(model=model, args=config, train_dataset=data, processing_class=tokenizer,
                             callbacks=callbacks)
        trainer.train()
        return trainer, model

    torch.manual_seed(0)
    plain_trainer, plain = train([], tmp_path / "plain")
    callback = TB2LiteCallback(str(EXCERPT), tmp_path / "runs", tasks=["task-001"], limit=1, max_tokens=8,
                               every_steps=1, engine_options={"temperature": 1.0, "seed": 3})
    trainer, model = train([callback], tmp_path / "grpo-free-sft")
    assert same_parameters(model, plain) and losses(trainer) == losses(plain_trainer)
    assert sorted(logged(trainer, "tb2lite/score")) == list(range(1, MAX_STEPS + 1))
    for step in range(1, MAX_STEPS + 1):
        result = read_result_file(tmp_path / "runs" / f"grpo-free-sft-checkpoint-{step}.json")
        assert result["training"]["saved"] == (step in SAVES) and result["training"]["trainer"] == "SFTTrainer"
        assert result["sampling"]["temperature"] == 1.0 and result["sampling"]["seed"] == 3
