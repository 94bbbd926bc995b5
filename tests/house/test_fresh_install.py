"""A newcomer's install, on every run of the suite: a brand-new virtual environment made from requirements.txt
as the README says (`pip install -r requirements.txt`; uv installs the same lock here, in seconds instead of
minutes), with nothing reused from the tests' own environment. `pip check` is clean in it, every
distribution in it is pinned in requirements.txt, and it replays two steps through a managed
`transformers serve`, the OpenAI-protocol path a served engine takes (it failed on every fresh install when
the openai SDK's HTTP library moved under an unpinned lock)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.paths import EXCERPT, REPO

pytestmark = pytest.mark.slow


def run(argv: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory):
    """(the new environment's python, seconds the install took)."""
    root = tmp_path_factory.mktemp("fresh-install")
    made = run([sys._base_executable, "-m", "venv", root / "v"], timeout=300)  # noqa: SLF001 - not this venv's python
    assert made.returncode == 0, made.stderr
    python = root / "v" / "bin" / "python"
    uv = shutil.which("uv")
    assert uv, "uv is in the tests' lock (requirements-test.txt)"
    # where this machine keeps PyTorch's CPU wheel for pip (its find-links); uv reads neither pip's config nor it
    links = [arg for folder in os.environ.get("PIP_FIND_LINKS", "").split() for arg in ("--find-links", folder)]
    start = time.perf_counter()
    installed = run([uv, "pip", "install", "--quiet", "--python", python, *links, "-r", "requirements.txt"],
                    cwd=REPO, timeout=1800)
    seconds = time.perf_counter() - start
    assert installed.returncode == 0, installed.stderr[-3000:]
    print(f"\nfresh install of requirements.txt: {seconds:.1f} s")
    return python, seconds


def test_pip_check_is_clean_and_every_distribution_is_pinned(fresh_env):
    python, _ = fresh_env
    checked = run([python, "-m", "pip", "check"], timeout=300)
    assert checked.returncode == 0 and "No broken requirements" in checked.stdout, checked.stdout + checked.stderr
    exact = run([sys.executable, "scripts/env_lock.py", "check", "requirements.txt", "--python", python],
                cwd=REPO, timeout=300)
    assert exact.returncode == 0, exact.stderr


def test_two_steps_replay_through_a_managed_transformers_serve(fresh_env, tiny_model_dir, tmp_path):
    python, _ = fresh_env
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
    env.pop("VIRTUAL_ENV", None)
    env.pop("LAB_TRANSFORMERS", None)  # the new environment's own `transformers` serves
    done = run([python, "-m", "lab", "replay", "--replay", EXCERPT, "--engine",
                f"transformers-serve:{tiny_model_dir}?name=fresh", "--limit", "2", "--max-tokens", "8",
                "--out", tmp_path / "runs"], cwd=REPO, env=env, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    result = json.loads((tmp_path / "runs" / "fresh.json").read_text())
    steps = result["per_step"]
    assert len(steps) == 2 and all(not s.get("error") for s in steps), steps
    # the model answered (random weights: any text) and was scored against the reference
    assert all(isinstance(s["pred_preview"], str) and 0.0 <= s["command_f1"] <= 1.0 for s in steps), steps
    assert result["aggregate"]["steps"] == 2
