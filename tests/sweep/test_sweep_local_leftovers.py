"""`python -m lab sweep --ray local` killed with kill -9 mid-sweep: every process of the Ray instance it
started ends within seconds (the raylet's dashboard and runtime-env agents stayed for minutes), and its
actor's temporary folder goes. HOME and TMPDIR are the test's own (a local `ray.init()` writes a token to
~/.ray/auth_token; the actor's folder lives in TMPDIR)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from lab.sweep.process_start import same_process_running, start_mark
from tests.sweep.helpers_ray import STARTUP_TIMEOUT
from tests.paths import EXCERPT
from tests.sweep.test_sweep_ray import ROOT, env_for, servers_of

pytestmark = [pytest.mark.ray, pytest.mark.slow,
              pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")]


def alive(procs: dict[int, tuple[float, str]]) -> list[str]:
    """The command lines of the noted processes still running (not zombies, pid not reused)."""
    return [cmd for pid, (started, cmd) in procs.items() if same_process_running(pid, started)]


@pytest.mark.timeout(600)
def test_a_killed_local_driver_leaves_no_ray_process_and_no_actor_folder(tiny_model_dir, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    tmp = Path(tempfile.mkdtemp(prefix="labtmp-", dir="/tmp"))  # short: Ray's sockets live under it (107 bytes)
    try:
        run_and_kill(tiny_model_dir, tmp_path, home, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_and_kill(tiny_model_dir: Path, tmp_path: Path, home: Path, tmp: Path) -> None:
    spec = f"transformers-serve:{tiny_model_dir}?device=cpu&max_tokens=24&name=ts"
    env = {**env_for(tmp_path), "HOME": str(home), "TMPDIR": str(tmp)}
    for key in ("RAY_AUTH_MODE", "RAY_ADDRESS", "LAB_RAY_ADDRESS"):
        env.pop(key, None)
    out = tmp_path / "sweep"
    args = [sys.executable, "-m", "lab", "sweep", "--replay", str(EXCERPT), "--limit", "5", "--chunk-size", "1",
            "--engine", spec, "--ray", "local", "--out", str(out)]
    log = tmp_path / "driver.log"
    for _ in range(3):  # Ray gives a local node 30 s to register (hard-coded): a loaded machine may need another go
        with open(log, "wb") as err:
            proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                    start_new_session=True)
        while proc.poll() is None and "Ray cluster local" not in log.read_text(errors="replace"):
            time.sleep(0.2)
        if proc.poll() is None or STARTUP_TIMEOUT not in log.read_text(errors="replace"):
            break
    assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
    noted: dict[int, tuple[float, str]] = {}
    try:
        driver = psutil.Process(proc.pid)
        deadline = time.time() + 300

        def agents_and_actor() -> bool:
            cmds = [c for _, c in noted.values()]
            return (any("DashboardAgent" in c or "dashboard/agent.py" in c for c in cmds)
                    and any("RuntimeEnvAgent" in c or "runtime_env/agent" in c for c in cmds)
                    and bool(servers_of(tiny_model_dir))  # the actor's model server is up
                    and bool(list(tmp.glob("lab-sweep-*"))))

        ray_roots: set[str] = set()  # Ray's own folders under TMPDIR while the sweep runs
        while not agents_and_actor():  # mid-sweep: the actor holds its folder and serves its engine
            ray_roots.update(p.name for p in tmp.iterdir() if p.name.startswith("ray"))
            assert time.time() < deadline and proc.poll() is None, (noted, log.read_text(errors="replace")[-3000:])
            for child in driver.children(recursive=True):
                try:
                    noted.setdefault(child.pid, (start_mark(child.pid), " ".join(child.cmdline())[:160]))
                except psutil.Error:
                    continue
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        t0 = time.time()
        while (alive(noted) or list(tmp.glob("lab-sweep-*"))) and time.time() - t0 < 45:
            time.sleep(0.5)
        took = time.time() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the local instance keeps its sockets and logs in this user's own folder, never Ray's shared /tmp/ray
    # (TMPDIR/ray), which the first user of a machine owns (issue 41)
    assert ray_roots == {f"ray-{os.getuid()}"}, ray_roots
    left = alive(noted)
    for pid, (started, _) in noted.items():  # the test's own clean-up whatever the outcome
        try:
            if same_process_running(pid, started):
                psutil.Process(pid).kill()
        except psutil.Error:
            pass
    assert not left, f"processes of the killed driver's Ray instance still running after {took:.0f} s: {left}"
    assert not list(tmp.glob("lab-sweep-*")), "the killed local sweep's actor folder was left"
    assert not servers_of(tiny_model_dir)
    print(f"\nkill -9 of a `--ray local` driver: its Ray instance and actor folder gone {took:.1f} s later")
