"""A sweep actor's temporary folder goes as soon as its actor process is gone, however it ended, and any
lab process that starts removes the folders of actors no longer running on its machine (issue 40 item 7:
a driver killed on a `ray start` cluster left them until the next sweep). Real processes stand for the
actor here; tests/sweep/test_sweep_ray_start.py kills a real driver on a real cluster."""
from __future__ import annotations

import json
import subprocess
import time

import pytest

from lab.sweep.leftovers import PREFIX, keep, remove_orphans
from tests.sweep.helpers_ray import wait_until
from tests.helpers_app import lab_env, run_lab_cli


def gone(predicate) -> bool:
    """Whether `predicate` comes to hold within 20 s."""
    wait_until(predicate, timeout=20, every=0.1)
    return predicate()


@pytest.fixture
def actor():
    """A real process standing for a sweep actor (killed at the end if still running)."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_the_keeper_removes_the_folder_when_its_actor_is_killed(actor, tmp_path):
    folder = tmp_path / f"{PREFIX}{actor.pid}-abc"
    folder.mkdir()
    (folder / "run.partial.jsonl").write_text('{"header": {}}\n')
    keep(folder, actor.pid)
    time.sleep(1.0)
    assert folder.is_dir()  # kept while the actor runs
    actor.kill()  # kill -9, as Ray ends a killed driver's actors
    actor.wait()
    assert gone(lambda: not folder.exists()), "the actor's folder outlived it"


def test_the_keeper_ends_when_the_actor_removes_its_folder_itself(actor, tmp_path):
    import psutil

    folder = tmp_path / f"{PREFIX}{actor.pid}-def"
    folder.mkdir()
    keep(folder, actor.pid)

    def keepers() -> list:
        return [p for p in psutil.process_iter(["cmdline"]) if str(folder) in " ".join(p.info["cmdline"] or [])]

    assert gone(lambda: len(keepers()) == 1)
    folder.rmdir()  # a normal close
    assert gone(lambda: not keepers()), "the keeper outlived the folder"
    assert actor.poll() is None  # and never touched the actor


def test_any_lab_process_start_removes_folders_of_actors_no_longer_running(actor, tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = tmp_path / f"{PREFIX}{dead.pid}-old"
    live = tmp_path / f"{PREFIX}{actor.pid}-new"
    other = tmp_path / "lab-sweepstakes"
    for folder in (gone, live, other):
        folder.mkdir()
    out = run_lab_cli(["equiv", "--cwd", "/app", "--ref", json.dumps(["ls"]), "--pred", json.dumps(["ls"])],
                      env=lab_env(TMPDIR=str(tmp_path)))
    assert out.returncode == 0, out.stderr
    assert not gone.exists() and live.is_dir() and other.is_dir()
    assert remove_orphans(tmp_path) == []
