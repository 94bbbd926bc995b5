"""scripts/env_lock.py, which lets scripts/test.sh and scripts/vllm_cpu_env.sh reuse an environment only when
it is exactly its lock: every distribution, not only the direct ones, at the locked version, and nothing the
lock does not name. `sync` makes a differing environment the lock's. Real pip on real virtual environments,
with wheels built here (no index: network only to loopback)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
import env_lock  # noqa: E402


def test_differences_name_every_kind_of_mismatch():
    have = {"torch": ["2.13.0+cpu"], "httpx2": ["2.17.0"], "extra": ["1.0"], "pip": ["23.2.1"], "twice": ["1", "2"]}
    lock = {"torch": "2.13.0", "httpx2": "2.16.2", "missing": "0.1", "twice": "2"}
    assert env_lock.differences(have, lock) == [
        "httpx2 2.17.0 is installed, httpx2==2.16.2 is locked",
        "missing is not installed (missing==0.1 is locked)",
        "twice is installed 2 times (1, 2); 2 is locked",
        "extra 1.0 is installed and not in the lock",
    ]
    assert env_lock.differences({"torch": ["2.13.0+cpu"]}, {"torch": "2.13.0"}) == []  # pip's `==` admits the build
    assert env_lock.differences({"torch": ["2.13.0"]}, {"torch": "2.13.0+cpu"}) != []


def test_the_lock_is_read_by_canonical_name():
    lock = REPO / "requirements.txt"
    pins = env_lock.read_lock(lock)
    assert pins["pyyaml"] and pins["huggingface-hub"] and pins["httpx2"] and pins["torch"] == "2.13.0"
    assert len(pins) == sum(1 for line in lock.read_text().splitlines() if env_lock.PIN.match(line))


def wheel(folder: Path, name: str, version: str) -> None:
    """A real wheel of an empty distribution, built with pip (setuptools of this environment, no index)."""
    source = folder / f"src-{name}-{version}"
    (source / name.replace("-", "_")).mkdir(parents=True)
    (source / name.replace("-", "_") / "__init__.py").write_text("")
    (source / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\nversion = "{version}"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(folder / "wheels"), str(source)], check=True, capture_output=True, timeout=300)


def script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/env_lock.py", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A new virtual environment (as `python -m venv` makes it) and a folder of three local wheels."""
    root = tmp_path_factory.mktemp("env-lock")
    subprocess.run([sys.executable, "-m", "venv", str(root / "v")], check=True, timeout=300)
    for name, version in (("lab-lock-probe", "1.0"), ("lab-lock-probe", "2.0"), ("lab-lock-extra", "1.0")):
        wheel(root, name, version)
    return root


@pytest.mark.slow  # a virtual environment, three wheels built and pip run five times (about 40 s)
def test_sync_makes_an_environment_exactly_its_lock_and_check_says_so(venv):
    python = str(venv / "v" / "bin" / "python")
    lock = venv / "lock.txt"
    lock.write_text("# made by hand for the test\nlab-lock-probe==1.0\n    # via nothing\n")
    missing = script("check", str(lock), "--python", python)
    assert missing.returncode == 1 and "lab-lock-probe is not installed (lab-lock-probe==1.0 is locked)" in missing.stderr
    options = ["--no-index", "--find-links", str(venv / "wheels")]
    subprocess.run([python, "-m", "pip", "install", "-q", *options, "lab-lock-extra==1.0"], check=True, timeout=300)
    synced = script("sync", str(lock), "--python", python, *options)
    assert synced.returncode == 0, synced.stderr[-2000:]
    # what the venv came with beside pip (setuptools on 3.11) and what was added by hand both go
    assert "removing what" in synced.stderr and "lab-lock-extra" in synced.stderr
    assert script("check", str(lock), "--python", python).returncode == 0
    lock.write_text("lab-lock-probe==2.0\n")  # a new lock: the reused environment follows it
    assert "lab-lock-probe 1.0 is installed, lab-lock-probe==2.0 is locked" in script(
        "check", str(lock), "--python", python).stderr
    again = script("sync", str(lock), "--python", python, *options)
    assert again.returncode == 0, again.stderr[-2000:]
    assert script("sync", str(lock), "--python", python).stderr.strip().endswith(f"is {lock} already")


def test_bad_calls_say_what_is_wrong(tmp_path):
    assert script("check").returncode == 2
    done = script("check", str(tmp_path / "nope.txt"))
    assert done.returncode == 2 and "no lock file" in done.stderr
    done = script("check", "requirements.txt", "--python", str(tmp_path / "no-python"))
    assert done.returncode == 1 and done.stderr.startswith("env_lock: ") and "Traceback" not in done.stderr
