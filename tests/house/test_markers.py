"""pytest markers name what a test needs (pytest.ini registers them; tests/markers.py adds them from the
fixtures and helpers a test uses): collecting a few known files in a fresh process gives each test
the markers it should have, and the fast loop's selection leaves out every one of them."""
from __future__ import annotations

import configparser
import json
import subprocess
import sys

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.slow  # two collections in fresh processes (the lab's UI imported): > 10 s

MARKERS = {"browser", "vllm", "ray", "podman", "slow"}
FAST = "not (browser or vllm or ray or podman or slow)"
# collects the given files (no test runs) and prints {nodeid: [markers]} for the tests the -m expression keeps
PROBE = """
import json, sys, pytest
class Rec:
    def pytest_collection_finish(self, session):
        print(json.dumps({i.nodeid: sorted({m.name for m in i.iter_markers()} & %r) for i in session.items}))
pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[Rec()])
"""
FILES = ["tests/scoring/test_scoring_units.py", "tests/engines/test_engines_servers.py", "tests/sweep/test_sweep_ray.py",
         "tests/browser/test_browser_triage.py", "tests/public/test_public_mode.py", "tests/runs/test_replay_managed.py"]


def collected(*args: str) -> dict[str, list[str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE % (MARKERS,), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    return json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])


def test_the_markers_are_registered():
    ini = configparser.ConfigParser()
    ini.read(REPO / "pytest.ini")
    names = {line.split(":")[0].strip() for line in ini["pytest"]["markers"].splitlines() if line.strip()}
    assert names == MARKERS


@pytest.fixture(scope="module")
def every() -> dict[str, list[str]]:
    return collected(*FILES)


def test_tests_are_marked_by_what_they_use(every):
    marks = every
    by_file = lambda name: {k: v for k, v in marks.items() if k.split("::")[0].endswith(f"/{name}")}  # noqa: E731
    assert marks and all(v == [] for v in by_file("test_scoring_units.py").values())
    # the sweep on Ray: a cluster fixture (ray_cluster), a Popen'd driver, `vllm_exe` for its vLLM test
    sweep = by_file("test_sweep_ray.py")
    assert all({"ray", "slow"} <= set(v) for v in sweep.values())
    assert [k for k, v in sweep.items() if "vllm" in v] == ["tests/sweep/test_sweep_ray.py::test_a_vllm_engine_sweeps_on_a_node_like_replay"]
    assert all({"browser", "slow"} <= set(v) for v in by_file("test_browser_triage.py").values())
    # real app processes (app_process, through a module fixture) are slow; its pure checks are not
    public = by_file("test_public_mode.py")
    assert any(v == ["slow"] for v in public.values()) and any(v == [] for v in public.values())
    # the supervisor's tests start processes (ManagedServer); the vLLM argv checks start nothing
    servers = by_file("test_engines_servers.py")
    assert servers["tests/engines/test_engines_servers.py::test_transformers_serve_lifecycle_ready_crash_restart_stop"] == ["slow"]
    assert servers["tests/engines/test_engines_servers.py::test_gpu_budget_splits_and_refuses"] == []
    # an explicit mark where the server is started by the lab's own CLI
    assert list(by_file("test_replay_managed.py").values()) == [["slow"]]


def test_the_fast_loop_keeps_only_unmarked_tests(every):
    fast = collected("-m", FAST, *FILES)
    assert set(fast) == {k for k, v in every.items() if not v}
    assert any(k.startswith("tests/scoring/test_scoring_units.py::") for k in fast)
    assert not any(k.startswith(("tests/sweep/test_sweep_ray.py::", "tests/browser/test_browser_triage.py::")) for k in fast)
