"""A test that drives real processes gets one rerun, and its first failure is printed even when the rerun
passes; a test of the lab's own code gets none (tests/markers.py, tests/reruns.py). Run as the suite runs:
a pytest process with the suite's collection hook and plugin, on two xdist workers."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.paths import REPO

CONFTEST = '''
import pytest
from tests.markers import allow_reruns, mark_items
pytest_plugins = ["tests.reruns"]

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_items(items)
    allow_reruns(config, items)
'''

TESTS = '''
import pytest
from pathlib import Path

def attempt(name):
    """1 at the first attempt of test `name`, 2 at its rerun (counted in a file: a rerun may be another process)."""
    mark = Path(__file__).with_name(name)
    count = int(mark.read_text()) + 1 if mark.exists() else 1
    mark.write_text(str(count))
    return count

@pytest.mark.slow
def test_a_server_once_unlucky():
    print("what the lab held when it failed")
    print("\\n".join(f"thread {i}" for i in range(300)))  # a long diagnosis: its head and its end are shown
    print("the last thread")
    assert attempt("server") > 1, "the page never showed the answer"

def test_a_scorer_once_unlucky():
    assert attempt("scorer") > 1, "a pure function failed once"
'''


@pytest.mark.slow  # about 6 s on two cores: the full run, not the fast loop
def test_real_process_tests_rerun_once_and_their_first_failure_is_printed(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_cases.py").write_text(textwrap.dedent(TESTS))
    run = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path), "-q", "-p", "no:cacheprovider", "-n", "2",
                          "--rootdir", str(tmp_path), "-c", "/dev/null"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out  # the scorer's failure fails the run
    assert "1 failed, 1 passed" in out and "1 rerun" in out, out
    assert "FAILED" in out and "test_a_scorer_once_unlucky" in out
    first = out.split("failures followed by a rerun")[1].split("short test summary info")[0]
    assert "test_a_server_once_unlucky" in first and "the page never showed the answer" in first
    assert "what the lab held when it failed" in first  # the test's own diagnosis comes with it
    assert "the last thread" in first and "thread 0\n" in first and "thread 150\n" not in first
    assert "test_a_scorer_once_unlucky" not in first
