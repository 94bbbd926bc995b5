"""lab.training without a trainer: options checked at construction, file names, metrics, budgets, ranks."""
from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from lab.errors import LabError
from lab.training.budget import Deadline
from lab.training.distributed import capped_budget
from lab.training.metrics import checkpoint_metrics, timing_metrics
from lab.training.naming import checkpoint_stem, clean_series, default_series, fresh_series
from lab.training.options import EvalOptions, engine_spec
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.mark.parametrize("kwargs, says", [
    ({"engine": "llama"}, "engine='llama': use one of transformers, vllm"),
    ({"limit": 0}, "limit=0"),
    ({"every_steps": 0}, "every_steps=0"),
    ({"every_steps": 5, "engine": "vllm"}, "every_steps evaluates the model in memory"),
    ({"max_tokens": 0}, "max_tokens=0"),
    ({"time_budget_s": -1}, "time_budget_s=-1"),
    ({"time_budget_s": True}, "time_budget_s=True"),
    ({"engine_options": {"device": "cuda"}}, "engine_options ['device']"),
    ({"engine_options": {"batch_size": "2&lora=/x"}}, "may not hold '&'"),
    ({"name": " "}, "name=' '"),
    ({"queue": "newest"}, "queue='newest'"),
    ({"device": "cpu"}, "needs background=True"),
    ({"device": "gpu0", "background": True}, "device='gpu0'"),
    ({"engine": "vllm", "device": "cpu", "background": True}, "a vLLM server is placed on a GPU by number"),
    ({"every_steps": 2, "background": True}, "and background=False"),
    ({"wait_at_end_s": -1}, "wait_at_end_s=-1"),
    ({"subset_seed": -1}, "subset_seed=-1"),
    ({"colour": "red"}, "colour: not an option of the callback"),
])
def test_bad_options_are_one_line_each(kwargs, says):
    with pytest.raises(LabError, match=None) as info:
        EvalOptions(**kwargs)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_the_callback_checks_everything_before_training(tmp_path, monkeypatch):
    """Unknown preset, an option the engine does not take, a missing replay, an empty selection, a name too
    long: each is a LabError at the line that makes the callback."""
    from lab.training import TB2LiteCallback

    monkeypatch.setenv("LAB_RESULTS", str(tmp_path / "results"))
    cases = [
        ({"preset": "no-such-preset"}, "unknown preset 'no-such-preset'"),
        ({"engine_options": {"batch_size": "many"}}, "engine_options: batch_size='many' is not a whole number"),
        ({"engine_options": {"max_model_len": "many"}, "engine": "vllm"}, "max_model_len='many' is not a whole number"),
        ({"engine_options": {"enforce_eager": "maybe"}, "engine": "vllm"}, "option 'enforce_eager' must be true or false"),
        ({"engine_options": {"flavour": "x"}}, "unknown option(s) ['flavour']"),
        ({"tasks": ["no-such-task"]}, "no steps selected"),
        ({"name": "n" * 200}, "give at most"),
        ({"engine": "vllm", "engine_options": {"trust_remote_code": "true"}}, "trust_remote_code is never a SPEC option"),
    ]
    for kwargs, says in cases:
        with pytest.raises(LabError) as info:
            TB2LiteCallback(str(EXCERPT), **kwargs)
        assert says in str(info.value), (kwargs, str(info.value))
    with pytest.raises(LabError, match="no-such.jsonl"):
        TB2LiteCallback(str(tmp_path / "no-such.jsonl"))
    callback = TB2LiteCallback(str(EXCERPT), tasks=["task-001"], limit=2, preset="qwen35-2b-sft", max_tokens=16)
    assert [s.key for s in callback.steps] == ["task-001/0", "task-001/1"]
    assert callback.selection == {"mode": "corrected", "tasks": ["task-001"], "limit": 2}
    assert callback.options.results == tmp_path / "results" / "runs"
    assert callback.options.spec_options() == {"preset": "qwen35-2b-sft", "max_tokens": "16"}


def test_engine_spec_is_what_replay_takes():
    assert engine_spec("transformers", "/o/checkpoint-2", {"device": "cpu", "max_tokens": "8"}) == \
        "transformers:/o/checkpoint-2?device=cpu&max_tokens=8"
    assert engine_spec("vllm", "/o/checkpoint-2", {}) == "vllm:/o/checkpoint-2"


def test_store_import_follows_the_results_folder(tmp_path):
    from lab.settings import Settings

    settings = Settings(results_dir=tmp_path / "results")
    assert EvalOptions(results=tmp_path / "results" / "runs").imports_into_store(settings)
    assert EvalOptions(results=tmp_path / "results" / "training").imports_into_store(settings)
    assert not EvalOptions(results=tmp_path / "elsewhere").imports_into_store(settings)
    assert EvalOptions(results=tmp_path / "elsewhere", store=True).imports_into_store(settings)
    assert not EvalOptions(results=tmp_path / "results" / "runs", store=False).imports_into_store(settings)


def test_series_names_never_mix_two_training_runs(tmp_path):
    out = tmp_path / "runs"
    out.mkdir()
    assert default_series("/x/sft-out", None) == "sft-out"
    assert default_series("/x/sft-out", "/x/sft-out") == "sft-out"
    assert default_series("/x/sft-out", "lr 3e-5 / run") == "lr 3e-5 / run"
    assert clean_series("lr 3e-5 / run") == "lr-3e-5-run"
    assert fresh_series(out, "sft") == "sft"
    (out / "sft-checkpoint-100.json").write_text("{}")
    (out / "sft-2-checkpoint-5.partial.jsonl").write_text("")
    (out / "sft-3-checkpointless.json").write_text("{}")  # not a checkpoint file of series sft-3
    assert fresh_series(out, "sft") == "sft-3"
    assert checkpoint_stem(out, "sft", 100) == "sft-checkpoint-100-2"
    (out / "sft-checkpoint-100-2.reference.json").write_text("{}")
    assert checkpoint_stem(out, "sft", 100) == "sft-checkpoint-100-3"
    assert checkpoint_stem(out, "sft", 200) == "sft-checkpoint-200"
    # lab.runs.claims decides: a run in the store whose file is gone, another process writing the name now
    in_store = (lambda path: "a run in the results database" if path.name == "sft-checkpoint-300.json" else None)
    assert checkpoint_stem(out, "sft", 300, taken=in_store) == "sft-checkpoint-300-2"
    import fcntl
    import os

    fd = os.open(out / "sft-checkpoint-500.partial.jsonl", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert checkpoint_stem(out, "sft", 500) == "sft-checkpoint-500-2"
    finally:
        os.close(fd)


def test_metrics_come_from_the_aggregates():
    replay = {"avg_command_f1": 0.39516, "first_cmd_exact_pct": 31.4, "valid_json_pct": 82.2}
    assert checkpoint_metrics(replay, {"ref_nll_per_token": 0.75}) == {
        "tb2lite/score": 39.52, "tb2lite/first_cmd_exact": 31.4, "tb2lite/valid_json": 82.2,
        "tb2lite/ref_nll_per_token": 0.75}
    assert checkpoint_metrics(replay, None) == {"tb2lite/score": 39.52, "tb2lite/first_cmd_exact": 31.4,
                                                "tb2lite/valid_json": 82.2}
    assert checkpoint_metrics(None, {"ref_nll_per_token": None}) == {}
    assert timing_metrics(12.34567, True) == {"tb2lite/eval_seconds": 12.346, "tb2lite/eval_failed": 1.0}


def test_budget_on_several_processes_stays_under_the_process_groups_timeout():
    one = SimpleNamespace(world_size=1, ddp_timeout=1800)
    two = SimpleNamespace(world_size=2, ddp_timeout=1800)
    assert capped_budget(None, one) == (None, None)
    assert capped_budget(5000.0, one) == (5000.0, None)
    budget, note = capped_budget(None, two)
    assert budget == 1680.0 and "ddp_timeout is 1800 s" in note
    assert capped_budget(60.0, two) == (60.0, None)
    assert capped_budget(None, SimpleNamespace(world_size=2, ddp_timeout=100))[0] == 50.0


def test_a_deadline_sets_its_stop_event_once_spent():
    with Deadline(0.05) as deadline:
        assert not deadline.expired
        time.sleep(0.2)
        assert deadline.expired and deadline.elapsed() >= 0.2
    with Deadline(None) as deadline:
        time.sleep(0.05)
    assert not deadline.expired


def test_without_a_trainer_the_numbers_still_go_into_the_state():
    """A training loop of one's own that calls the callbacks: no Trainer on the stack, the state's log gets them."""
    from transformers import TrainerControl, TrainerState

    from lab.training.trainer_log import calling_trainer, log_metrics

    state = TrainerState()
    state.global_step = 7
    assert calling_trainer() is None
    log_metrics(None, state, TrainerControl(), {"tb2lite/score": 12.5})
    assert state.log_history == [{"tb2lite/score": 12.5, "step": 7}]


def test_a_stopped_run_says_what_is_kept_and_how_to_finish_it(tmp_path):
    from lab.runs.checkpoint import Checkpoint
    from lab.training.evaluate import RunPlan, _stopped_line

    plan = RunPlan(out_dir=tmp_path, stem="sft-checkpoint-200", eval_path="/data/tb2lite.jsonl", replay_fingerprint="",
                   selection={}, budget_s=600)
    engine = SimpleNamespace(spec="transformers:/o/checkpoint-200?device=cpu")
    assert _stopped_line(plan, engine, "", 303) == "ran past its 600 s budget before its replay finished a step (of 303)"
    checkpoint = Checkpoint(tmp_path / "sft-checkpoint-200.partial.jsonl")
    checkpoint.start({"engine": engine.spec})
    for i in range(3):
        checkpoint.append({"task_id": "t", "step_idx": i})
    checkpoint.close()
    line = _stopped_line(plan, engine, "", 303)
    assert line == (f"ran past its 600 s budget after 3 of 303 steps of its replay; they are kept in {checkpoint.path} "
                    "(finish with: python -m lab replay --resume --name sft-checkpoint-200 --engine "
                    f"'transformers:/o/checkpoint-200?device=cpu' --replay /data/tb2lite.jsonl --out {tmp_path})")


def test_hostile_names_and_paths_stay_names_and_paths(tmp_path):
    """A series name that walks out of the folder stays inside it; an adapter whose base model would be read as
    a `vllm serve` flag or as more SPEC options is refused; a results folder that is a file is one line."""
    from lab.training.evaluate import one_line
    from lab.training.vllm_checkpoints import adapter_base

    assert clean_series("../../etc/passwd") == "..-..-etc-passwd" and "/" not in clean_series("a/../../b")
    adapter = tmp_path / "checkpoint-2"
    adapter.mkdir()
    for base in ("--trust-remote-code", "/m?served_model_name=x", "org/m&kv_cache_gb=99", " "):
        (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base}))
        with pytest.raises(LabError, match="is not a folder or Hub id|names no base"):
            adapter_base(adapter, None)
    with pytest.raises(LabError, match="base_model: base model '-x'"):
        adapter_base(adapter, "-x")
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/base"}))
    assert adapter_base(adapter, None) == "org/base" and adapter_base(tmp_path, None) is None
    blocker = tmp_path / "results-file"
    blocker.write_text("")
    try:
        (blocker / "runs").mkdir(parents=True)
    except OSError as exc:
        assert one_line(exc) == f"{blocker / 'runs'}: Not a directory"


# --- issue: the callback keeps its promises: every bad argument fails where the callback is made, in one line --
def _refused(tmp_path, monkeypatch, **kwargs) -> str:
    from lab.training import TB2LiteCallback

    monkeypatch.setenv("LAB_RESULTS", str(tmp_path / "results"))
    with pytest.raises(LabError) as info:
        TB2LiteCallback(str(EXCERPT), **kwargs)
    line = str(info.value)
    assert "\n" not in line and len(line) < 400, line
    return line


def test_results_that_is_a_file_is_refused(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert f"{blocker} is a file, not a folder" in _refused(tmp_path, monkeypatch, results=str(blocker))


def test_results_under_a_file_is_refused(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert "(above it) is a file" in _refused(tmp_path, monkeypatch, results=blocker / "runs")


def test_results_holding_nul_is_refused(tmp_path, monkeypatch):
    assert "NUL" in _refused(tmp_path, monkeypatch, results="runs\0x")


def test_results_that_is_a_number_is_refused(tmp_path, monkeypatch):
    assert _refused(tmp_path, monkeypatch, results=123).startswith("results=123: input should be a valid string")


def test_a_string_for_a_tokenizer_is_refused(tmp_path, monkeypatch):
    assert _refused(tmp_path, monkeypatch, tokenizer="not a tokenizer").startswith(
        "tokenizer='not a tokenizer': give a tokenizer object")


@pytest.mark.parametrize("budget", [float("inf"), 1e300, float("nan")])
def test_an_endless_time_budget_is_refused(tmp_path, monkeypatch, budget):
    assert f"time_budget_s={budget!r}" in _refused(tmp_path, monkeypatch, time_budget_s=budget)


@pytest.mark.parametrize("name", ["limit", "every_steps"])
def test_true_for_a_count_is_refused(tmp_path, monkeypatch, name):
    assert _refused(tmp_path, monkeypatch, **{name: True}).startswith(f"{name}=True: input should be a valid integer")


def test_a_trillion_max_tokens_is_refused(tmp_path, monkeypatch):
    assert "max_tokens=1000000000000: at most 32768" in _refused(tmp_path, monkeypatch, max_tokens=10**12)


def test_no_for_reference_is_refused(tmp_path, monkeypatch):
    assert _refused(tmp_path, monkeypatch, reference="no").startswith("reference='no': input should be a valid boolean")


def test_yes_for_store_is_refused(tmp_path, monkeypatch):
    assert _refused(tmp_path, monkeypatch, store="yes").startswith("store='yes': input should be a valid boolean")


def test_a_batch_size_of_many_digits_is_refused(tmp_path, monkeypatch):
    line = _refused(tmp_path, monkeypatch, engine_options={"batch_size": "1010" * 30})
    assert line.startswith("engine_options: batch_size=") and "out of range (1 to 1024)" in line


def test_a_flag_for_a_base_model_is_refused(tmp_path, monkeypatch):
    assert _refused(tmp_path, monkeypatch, base_model="--trust-remote-code").startswith(
        "base_model='--trust-remote-code': not a folder or Hub id")


def test_a_number_for_a_name_is_refused(tmp_path, monkeypatch):
    assert _refused(tmp_path, monkeypatch, name=5).startswith("name=5: input should be a valid string")


def test_a_list_for_engine_options_is_refused(tmp_path, monkeypatch):
    assert _refused(tmp_path, monkeypatch, engine_options=["x"]).startswith(
        "engine_options=['x']: input should be a valid dictionary")


def test_a_string_for_tasks_is_refused(tmp_path, monkeypatch):
    assert _refused(tmp_path, monkeypatch, tasks="task-000").startswith("tasks='task-000': input should be a valid list")


def test_a_trainer_that_is_no_trainer_is_refused(tmp_path, monkeypatch):
    assert _refused(tmp_path, monkeypatch, trainer="mine").startswith("trainer='mine': give the transformers Trainer")


def test_a_subset_needs_enough_tasks_and_fewer_than_the_selection(tmp_path, monkeypatch):
    assert "give at least 5 tasks" in _refused(tmp_path, monkeypatch, subset_tasks=2)
    assert "the selected steps have 2 tasks" in _refused(tmp_path, monkeypatch, subset_tasks=5)


def test_a_deadline_past_what_a_timer_waits_is_no_budget():
    """No OverflowError from the timer thread at every save (threading.Timer(inf) raised one)."""
    import threading

    for budget in (float("inf"), 1e300, threading.TIMEOUT_MAX * 2):
        with Deadline(budget) as deadline:
            time.sleep(0.05)
        assert deadline.budget_s is None and not deadline.expired
