"""`python -m lab sweep` refuses, in one line with exit code 2 and before anything connects to Ray,
two engines that would write one result file (issue 26 item 7) and a SPEC of 1,200 `{1..1}` ranges
(item 8, a RecursionError before). Real parts: the CLI as a separate process, the real excerpt."""
from __future__ import annotations

import pytest

from tests.helpers_app import lab_env, run_lab_cli
from tests.paths import EXCERPT, TB2LITE

PUBLISHED = TB2LITE / "published" / "llada21_flash_transformers_sample10_suffix_len256.json"


def sweep(tmp_path, *specs: str):
    out_dir = tmp_path / "out"
    args = ["sweep", *[a for s in specs for a in ("--engine", s)], "--replay", str(EXCERPT), "--limit", "1",
            "--ray", "local", "--out", str(out_dir)]
    return run_lab_cli(args, env=lab_env(RAY_ADDRESS="", LAB_RAY_ADDRESS=""), timeout=300), out_dir


def assert_one_line(out, out_dir, *words: str) -> str:
    text = out.stdout + out.stderr
    assert out.returncode == 2, text[-3000:]
    assert "Traceback" not in text and "Ray cluster" not in text, text[-3000:]  # refused before connecting
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, text[-3000:]
    for word in words:
        assert word in errors[0], errors[0]
    assert not out_dir.exists() or not any(out_dir.iterdir())  # no result file, no checkpoint
    return errors[0]


@pytest.mark.skipif(not PUBLISHED.exists(), reason="../shared/tb2lite/published is missing")
def test_two_engines_with_one_run_name_are_refused(tmp_path):
    out, out_dir = sweep(tmp_path, "reference?name=dup", f"stored:{PUBLISHED}?name=dup")
    assert_one_line(out, out_dir, "dup.json", "reference?name=dup", "give each its own name")
    out, out_dir = sweep(tmp_path, "reference?name=a b", "reference?name=a%b")  # alike once made path-safe
    assert_one_line(out, out_dir, "a-b.json")
    out, out_dir = sweep(tmp_path, "reference", "reference")  # one engine twice: its own name twice
    assert_one_line(out, out_dir, "reference.json")


def test_a_spec_of_1200_ranges_is_one_line(tmp_path):
    out, out_dir = sweep(tmp_path, "reference?name=r" + "{1..1}" * 1200)
    line = assert_one_line(out, out_dir, "1,200", "ranges in one SPEC", "max_ranges")
    assert len(line) < 600, line
