"""A runs folder with links in it (issue: writing outside the runs folder through a symlink). A link named like
a run's checkpoint or result file is never opened: --overwrite and --resume are refused in one line naming it,
a dangling link never creates its target, an auto-named run steps over a name any entry holds, and --resume
continues only a checkpoint the lab wrote."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.data import load_replay
from lab.engines import create_engine
from lab.errors import LabError
from lab.runs.checkpoint import Checkpoint
from lab.runs.claims import RunNameTaken, claim_run
from lab.runs.names import finished_run_file
from lab.runs.replay import ReplayConfig, replay
from lab.security.safe_files import LinkRefused
from tests.paths import EXCERPT, REPO

PRECIOUS = "precious\nsecond line\nthird line\n"


def lab_replay(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--engine", "reference",
                           "--limit", "3", "--out", str(out), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


@pytest.fixture
def runs(tmp_path):
    out = tmp_path / "runs"
    out.mkdir()
    return out


@pytest.fixture
def outside(tmp_path):
    target = tmp_path / "elsewhere" / "notes.txt"
    target.parent.mkdir()
    target.write_text(PRECIOUS)
    return target


@pytest.fixture(scope="module")
def steps():
    return load_replay(EXCERPT, mode="corrected").steps[:3]


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("flag", ["--overwrite", "--resume"])
def test_overwrite_or_resume_never_write_through_a_linked_checkpoint(runs, outside, flag):
    (runs / "R.partial.jsonl").symlink_to(outside)
    proc = lab_replay(runs, "--name", "R", flag)
    assert proc.returncode != 0
    [line] = error_lines(proc)
    assert "R.partial.jsonl: is a symbolic link" in line and "remove the link" in line
    assert "Traceback" not in proc.stderr
    assert outside.read_text() == PRECIOUS  # neither truncated nor appended to
    assert (runs / "R.partial.jsonl").is_symlink() and not (runs / "R.json").exists()


def test_a_dangling_link_never_creates_its_target(runs, tmp_path):
    target = tmp_path / "elsewhere-created.txt"
    (runs / "R.partial.jsonl").symlink_to(target)
    proc = lab_replay(runs, "--name", "R")
    assert proc.returncode != 0 and "R.partial.jsonl: is a symbolic link" in proc.stderr
    assert not target.exists()


def test_an_auto_named_run_steps_over_a_dangling_link_of_the_next_name(runs, tmp_path):
    (runs / "reference.json").write_text("{}")
    (runs / "reference-2.json").symlink_to(tmp_path / "nothing.json")
    proc = lab_replay(runs)
    assert proc.returncode == 0, proc.stderr
    assert "File exists" not in proc.stderr and ".tmp" not in proc.stderr
    assert (runs / "reference-3.json").is_file() and not (tmp_path / "nothing.json").exists()
    assert json.loads((runs / "reference.json").read_text()) == {}


def test_resume_refuses_a_file_that_is_not_its_checkpoint(runs):
    (runs / "R.partial.jsonl").write_text(PRECIOUS)
    proc = lab_replay(runs, "--name", "R", "--resume")
    assert proc.returncode == 2
    [line] = error_lines(proc)
    assert "R.partial.jsonl: not a checkpoint of a lab run" in line
    assert (runs / "R.partial.jsonl").read_text() == PRECIOUS


def test_resume_refuses_json_lines_without_a_header(runs, steps):
    rows = "".join(json.dumps({"row": {"task_id": "t", "step_idx": i}}) + "\n" for i in range(2))
    (runs / "R.partial.jsonl").write_text(rows)
    config = ReplayConfig(out_dir=runs, run_name="R", name_given=True, resume=True)
    with pytest.raises(LabError, match="not a checkpoint of a lab run"):
        replay(create_engine("reference"), steps, config)
    assert (runs / "R.partial.jsonl").read_text() == rows


def test_an_empty_checkpoint_is_resumed_from_the_start(runs, steps):
    """A run that died between claiming its name and writing its header left an empty file: --resume runs it."""
    (runs / "R.partial.jsonl").write_text("")
    path = replay(create_engine("reference"), steps, ReplayConfig(out_dir=runs, run_name="R", name_given=True,
                                                                  resume=True))
    assert json.loads(path.read_text())["aggregate"]["steps"] == 3


def test_a_fifo_named_like_the_checkpoint_is_refused_without_blocking(runs):
    os.mkfifo(runs / "R.partial.jsonl")
    proc = lab_replay(runs, "--name", "R", "--resume")
    assert proc.returncode != 0 and "R.partial.jsonl: is not a regular file" in proc.stderr


def test_a_link_swapped_in_after_the_claim_is_never_written(runs, outside):
    """A race: the checkpoint becomes a link between the claim and the first write."""
    with claim_run(runs, "R", explicit=True) as claim:
        claim.checkpoint.unlink()
        claim.checkpoint.symlink_to(outside)
        checkpoint = Checkpoint(claim.checkpoint)
        with pytest.raises(LinkRefused):
            checkpoint.start({"engine": "reference"})
        with pytest.raises(LinkRefused):
            checkpoint.append({"task_id": "t", "step_idx": 0})
        with pytest.raises(LinkRefused):
            checkpoint.read_entries()
    assert outside.read_text() == PRECIOUS
    assert claim.checkpoint.is_symlink()  # a link is not the lab's to remove


def test_a_result_name_taken_while_the_run_was_going_moves_on(runs, tmp_path):
    with claim_run(runs, "R") as claim:
        (runs / "R.json").symlink_to(tmp_path / "late.json")  # dangling, made while the run went
        (runs / "R-2.json").write_text("{}")
        path = claim.write_final({"x": 1})
    assert path.name == "R-3.json" and json.loads(path.read_text()) == {"x": 1}
    assert "R.json appeared" in claim.note and not (tmp_path / "late.json").exists()


def test_a_linked_folder_lock_is_refused(runs, tmp_path):
    (runs / ".lab-runs.lock").symlink_to(tmp_path / "lock-elsewhere")
    with pytest.raises(LinkRefused, match=r"\.lab-runs\.lock: is a symbolic link"):
        claim_run(runs, "R")
    assert not (tmp_path / "lock-elsewhere").exists()


def test_a_linked_result_file_is_not_a_finished_run_and_is_not_replaced(runs, outside):
    (runs / "R.json").symlink_to(outside)
    assert finished_run_file(runs, "R") is None
    with pytest.raises(RunNameTaken, match="R.json: is a symbolic link"):
        claim_run(runs, "R", explicit=True, overwrite=True)
    with claim_run(runs, "R") as claim:  # a name the lab made up: the next free one
        assert claim.stem == "R-2" and "symbolic link" in claim.note
    assert outside.read_text() == PRECIOUS


def test_a_hard_linked_checkpoint_is_never_truncated(runs, outside):
    if os.stat(runs).st_dev != os.stat(outside).st_dev:
        pytest.skip("a hard link needs one file system")
    os.link(outside, runs / "R.partial.jsonl")
    for flag in ("--overwrite", "--resume"):
        proc = lab_replay(runs, "--name", "R", flag)
        assert proc.returncode != 0 and "R.partial.jsonl: is a hard link" in proc.stderr, proc.stderr
    assert outside.read_text() == PRECIOUS
