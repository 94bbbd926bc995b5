"""Batch replay end to end on the real excerpt: reference scores 100, resume loses nothing."""
from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from lab.data import load_replay
from lab.engines import create_engine
from lab.runs.checkpoint import Checkpoint
from lab.runs.replay import ReplayConfig, replay
from lab.resultfiles.files import read_result_file, scoring_version
from tests.paths import EXCERPT, REPO

PER_STEP_KEYS = {
    "task_id", "sample_idx", "step_idx", "source_group", "bucket", "valid_json", "has_analysis", "has_plan",
    "ref_task_complete", "pred_task_complete", "pred_task_complete_true", "ref_command_units",
    "pred_command_units", "first_cmd_exact", "command_precision", "command_recall", "command_f1",
    "pred_preview", "finish_reason", "stop_reason", "token_ids_preview", "raw_output",
}
TOP_KEYS = {"model", "model_path", "model_short", "gpu", "eval_path", "timestamp", "load_time_sec", "gen_time_sec",
            "avg_sec_per_step", "sampling", "prompt_template", "aggregate", "per_step"}


@pytest.fixture(scope="module")
def steps():
    return load_replay(EXCERPT, mode="corrected").steps


def test_cli_reference_scores_100(tmp_path):
    out = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--engine", "reference", "--out", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    files = sorted(out.glob("*.json"))
    assert len(files) == 1
    result = read_result_file(files[0])
    assert TOP_KEYS <= set(result)
    agg = result["aggregate"]
    assert agg["steps"] == 14 and agg["tasks"] == 2
    assert agg["avg_command_f1"] == 1.0 and 100 * agg["avg_command_f1"] == 100.0
    assert all(r["command_f1"] == 1.0 for r in result["per_step"])
    assert PER_STEP_KEYS <= set(result["per_step"][0])
    assert result["scoring_version"] == scoring_version(result) == "corrected_303"  # as the published files say
    assert "score 100.00" in proc.stdout
    assert not list(out.glob("*.partial.jsonl")), "checkpoint is removed once the run is complete"


class CountingEngine:
    """Wraps an engine and records which steps it was asked to generate."""

    def __init__(self, inner):
        self.inner = inner
        self.asked: list[str] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, requests, sampling, on_done=None):
        self.asked.extend(r.step.key for r in requests)
        return self.inner.generate(requests, sampling, on_done=on_done)


def test_interrupted_replay_resumes_without_redoing_steps(tmp_path, steps):
    engine = CountingEngine(create_engine("reference"))
    engine.load()
    stop = threading.Event()

    def progress(done, total, agg):
        if done >= 5:
            stop.set()

    config = ReplayConfig(out_dir=tmp_path, eval_path=str(EXCERPT), chunk_size=4, run_name="ref")
    with pytest.raises(InterruptedError):
        replay(engine, steps, config, progress=progress, stop=stop)
    header, rows = Checkpoint(tmp_path / "ref.partial.jsonl").read()
    assert header is not None and len(rows) == 8  # two chunks of 4 finished before the stop was seen
    first_pass = list(engine.asked)

    # a torn last line (killed mid-write) must not break resuming
    with open(tmp_path / "ref.partial.jsonl", "a") as fh:
        fh.write('{"row": {"task_id": "task-0')

    engine.asked.clear()
    config.resume = True
    path = replay(engine, steps, config)
    assert not set(engine.asked) & set(first_pass), "resume must not regenerate finished steps"
    assert sorted(first_pass + engine.asked) == sorted(s.key for s in steps)
    result = read_result_file(path)
    assert [f"{r['task_id']}/{r['step_idx']}" for r in result["per_step"]] == [s.key for s in steps]
    assert result["aggregate"]["avg_command_f1"] == 1.0


def test_stored_engine_reproduces_stored_metrics(tmp_path, steps):
    """A result file replayed through `stored:` scores exactly as stored."""
    ref = create_engine("reference")
    ref.load()
    path = replay(ref, steps, ReplayConfig(out_dir=tmp_path, run_name="base"))
    data = json.loads(path.read_text())
    # make a worse "model": drop the last unit of every step and break one step's JSON
    for row in data["per_step"]:
        row["pred_command_units"] = row["pred_command_units"][:-1] or ["ls"]
    data["per_step"][0]["raw_output"] = "not json at all"
    from lab.runs.rescore import rescore_result

    stored_file = tmp_path / "worse.json"
    stored_file.write_text(json.dumps(rescore_result(data, "corrected")))
    expected = {f"{r['task_id']}/{r['step_idx']}": r for r in json.loads(stored_file.read_text())["per_step"]}

    stored = create_engine(f"stored:{stored_file}")
    stored.load()
    out = replay(stored, steps, ReplayConfig(out_dir=tmp_path / "again", run_name="worse"))
    for row in read_result_file(out)["per_step"]:
        exp = expected[f"{row['task_id']}/{row['step_idx']}"]
        for key in ("first_cmd_exact", "command_precision", "command_recall", "command_f1", "pred_command_units"):
            assert row[key] == exp[key], (row["task_id"], row["step_idx"], key)
    assert read_result_file(out)["aggregate"]["avg_command_f1"] < 1.0


def test_rescore_of_lab_result_is_identical(tmp_path, steps):
    ref = create_engine("reference")
    ref.load()
    path = replay(ref, steps, ReplayConfig(out_dir=tmp_path, run_name="r"))
    out = tmp_path / "rescored.json"
    proc = subprocess.run([sys.executable, "-m", "lab", "rescore", str(path), "-o", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    a, b = read_result_file(path), read_result_file(out)
    assert a["aggregate"] == b["aggregate"]
    assert [r["command_f1"] for r in a["per_step"]] == [r["command_f1"] for r in b["per_step"]]


def test_cli_reports_bad_replay_file_clearly(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "task-000"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "lab", "replay", "--replay", str(bad), "--engine", "reference", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert proc.returncode == 2
    assert "bad.jsonl:1" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_unknown_engine_is_a_clear_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--engine", "nosuch:thing",
         "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "nosuch" in proc.stderr


def test_resume_refuses_a_checkpoint_of_other_settings(tmp_path, steps):
    from lab.engines.base import Sampling
    from lab.errors import LabError

    engine = create_engine("reference")
    engine.load()
    stop = threading.Event()
    config = ReplayConfig(out_dir=tmp_path, chunk_size=4, run_name="r", sampling=Sampling(max_tokens=64))
    with pytest.raises(InterruptedError):
        # stopped once a step is kept (a checkpoint with no step is removed: there is nothing to resume)
        replay(engine, steps, config, progress=lambda done, total, agg: done and stop.set(), stop=stop)
    config.resume, config.sampling = True, Sampling(max_tokens=32)
    with pytest.raises(LabError, match="different sampling"):
        replay(engine, steps, config)
    assert (tmp_path / "r.partial.jsonl").exists(), "the checkpoint is kept for a resume with the right settings"
    config.sampling = Sampling(max_tokens=64)
    assert read_result_file(replay(engine, steps, config))["aggregate"]["steps"] == len(steps)
