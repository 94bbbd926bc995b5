"""A sweep actor's temporary folder goes as soon as its actor process is gone, however it ended, and any
lab process that starts removes the folders of actors no longer running on its machine (issue 40 item 7:
a driver killed on a `ray start` cluster left them until the next sweep). Real processes stand for the
actor here; tests/sweep/test_sweep_ray_start.py kills a real driver on a real cluster."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from lab.sweep.leftovers import PREFIX, keep, remove_orphans
from lab.sweep.process_start import same_process_running, start_mark
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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the boot time read afresh is Linux's")
def test_a_running_actor_stays_itself_when_the_clock_is_adjusted(actor, monkeypatch):
    """psutil's create_time() adds the boot time as read now (/proc/stat's btime, the wall clock less the
    uptime), so an adjusted clock moves it. The keeper took a running actor for a new process then and
    removed its folder mid-sweep (CI: "No such file or directory: …/tf.reference.partial.jsonl")."""
    import psutil
    from psutil import _pslinux

    mark, before = start_mark(actor.pid), psutil.Process(actor.pid).create_time()
    assert mark == pytest.approx(before - psutil.boot_time(), abs=0.02)
    read = _pslinux.boot_time
    monkeypatch.setattr(_pslinux, "boot_time", lambda: read() + 1.0)  # the clock stepped by a second
    assert psutil.Process(actor.pid).create_time() != before  # the hazard is there in this psutil
    assert start_mark(actor.pid) == mark and same_process_running(actor.pid, mark)
    assert not same_process_running(actor.pid, mark - 0.01)  # another start: a reused pid
    actor.kill()
    actor.wait()
    assert not same_process_running(actor.pid, mark) and not same_process_running(actor.pid)
    for pid in (0, -5, 10**20):  # a folder's name holds any digits; no such process, and no exception
        assert not same_process_running(pid) and not same_process_running(pid, mark)
