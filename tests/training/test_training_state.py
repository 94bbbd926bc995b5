"""The series' state on disk and the commands that read it, without training: `python -m lab training finish` and
`status` on folders that are not a series', on state files that are broken or hostile, and against a worker that
holds the series. Each is one line and exit 2, nothing loaded or contacted that the state does not own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.errors import LabError
from tests.paths import EXCERPT, REPO

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def _lab(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", "training", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def _series(tmp_path: Path, **options) -> Path:
    """A series' state folder as the callback writes it (plan.json), for the excerpt's first task."""
    from lab.data import load_replay
    from lab.settings import Settings
    from lab.training.jobs import JobBook
    from lab.training.options import EvalOptions
    from lab.training.plan import SeriesPlan, settings_record

    settings = Settings(results_dir=tmp_path / "results")
    opts = EvalOptions(replay=str(EXCERPT), results=tmp_path / "runs", tasks=["task-000"], limit=1, max_tokens=4,
                       store=False, **options)
    replay = load_replay(EXCERPT)
    plan = SeriesPlan(options=opts.model_dump(mode="json"), series="sft", replay_path=str(EXCERPT),
                      replay_fingerprint=replay.fingerprint, replay_steps=len(replay.steps),
                      selection={"mode": "corrected", "tasks": ["task-000"], "limit": 1}, subset=None, budget_s=None,
                      settings=settings_record(settings), output_dir=str(tmp_path / "out"))
    book = JobBook(tmp_path / "out" / "tb2lite-eval" / "sft")
    book.write_plan(plan.to_dict())
    return book.folder


def test_a_folder_without_a_series_is_one_line(tmp_path):
    done = _lab("finish", str(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "no evaluation state of a training run" in done.stderr and "Traceback" not in done.stderr


def test_two_series_in_one_output_folder_must_be_named(tmp_path):
    first = _series(tmp_path)
    (first.parent / "sft-2").mkdir()
    (first.parent / "sft-2" / "plan.json").write_text((first / "plan.json").read_text())
    done = _lab("status", str(tmp_path / "out"))
    assert done.returncode == 2 and "holds the evaluations of 2 series (sft, sft-2); give one" in done.stderr
    assert _lab("status", str(first)).returncode == 0


def test_a_broken_plan_is_one_line_naming_the_file(tmp_path):
    folder = _series(tmp_path)
    (folder / "plan.json").write_text("{not json")
    done = _lab("finish", str(folder))
    assert done.returncode == 2 and f"{folder / 'plan.json'}: cannot read the evaluation state" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_plan_with_options_out_of_bounds_is_refused(tmp_path):
    folder = _series(tmp_path)
    plan = json.loads((folder / "plan.json").read_text())
    plan["options"]["engine_options"] = {"batch_size": "9" * 50}
    (folder / "plan.json").write_text(json.dumps(plan))
    done = _lab("finish", str(folder))
    assert done.returncode == 2 and "engine_options: batch_size=" in done.stderr and "out of range" in done.stderr


def test_a_changed_replay_file_is_refused(tmp_path):
    folder = _series(tmp_path)
    plan = json.loads((folder / "plan.json").read_text())
    plan["replay_fingerprint"] = "0" * 64
    (folder / "plan.json").write_text(json.dumps(plan))
    done = _lab("finish", str(folder))
    assert done.returncode == 2 and "the replay file changed since this training run began" in done.stderr


def test_a_job_naming_another_engine_is_failed_without_contacting_it(tmp_path):
    """A job file is data: a SPEC that points at a server (or any other model than its checkpoint) is refused in one
    line, and nothing is contacted."""
    import socket

    from lab.training.jobs import Job, JobBook

    folder = _series(tmp_path)
    checkpoint = tmp_path / "out" / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    book = JobBook(folder)
    book.add(Job(2, "save", str(checkpoint), f"openai:http://127.0.0.1:{port}/v1#m?max_tokens=4", {"saved": True}))
    book.add(Job(4, "save", str(checkpoint), "transformers:/elsewhere/model?device=cpu", {"saved": True}))
    done = _lab("finish", str(folder))
    assert done.returncode == 0, done.stderr
    with pytest.raises(socket.timeout):
        listener.accept()  # never contacted
    listener.close()
    jobs = {j.step: j for j in book.jobs()}
    assert jobs[2].status == jobs[4].status == "failed"
    assert "is not a transformers SPEC of its checkpoint folder" in jobs[2].reason
    assert "is not a transformers SPEC of its checkpoint folder" in jobs[4].reason
    assert "2 failed (try them again:" in done.stdout


def test_a_second_worker_on_one_series_is_refused(tmp_path):
    from lab.training.jobs import JobBook, hold_lock

    folder = _series(tmp_path)
    book = JobBook(folder)
    book.heartbeat(4242, None)
    fd = hold_lock(book)
    try:
        done = _lab("finish", str(folder))
        assert done.returncode == 2 and "a worker (pid 4242) is evaluating this series now" in done.stderr
        with pytest.raises(LabError, match="is evaluating this series now"):
            hold_lock(book)
    finally:
        os.close(fd)


def test_state_files_are_written_whole(tmp_path):
    """A job written over and over never leaves a temporary file or half a file behind."""
    from lab.training.jobs import Job, JobBook

    book = JobBook(tmp_path / "state")
    job = book.add(Job(2, "save", "/x/checkpoint-2"))
    for i in range(50):
        job.reason = "x" * i
        book.save(job)
    assert [p.name for p in (tmp_path / "state" / "jobs").iterdir()] == ["000000002-save.json"]
    assert book.get(job.id).reason == "x" * 49


def test_a_state_broken_by_hand_is_one_line_and_training_goes_on(tiny_model_dir, tmp_path, monkeypatch, caplog):
    import logging

    from lab.training import TB2LiteCallback
    from tests.training.helpers_training import logged, train_tiny

    monkeypatch.setenv("LAB_RESULTS", str(tmp_path / "results"))
    state = tmp_path / "sft-broken" / "tb2lite-eval" / "sft-broken"
    state.mkdir(parents=True)
    (state / "plan.json").write_text("{half a file")
    callback = TB2LiteCallback(str(EXCERPT), tmp_path / "runs", tasks=["task-000"], limit=1, max_tokens=4)
    with caplog.at_level(logging.WARNING, logger="lab.training"):
        trainer, _ = train_tiny(tiny_model_dir, tmp_path / "sft-broken", [callback])
    lines = [r.getMessage() for r in caplog.records if r.name == "lab.training"]
    assert len(lines) == 1 and "cannot read the evaluation state" in lines[0] and "this run writes it again" in lines[0]
    assert logged(trainer, "tb2lite/eval_failed") == {2: 0.0, 4: 0.0}
    assert json.loads((state / "plan.json").read_text())["series"] == "sft-broken"
