"""Issue 56: `python -m lab replay`'s bar shows the tokens generated so far, tokens a second and the time left
while a batch generates, long before its first step finishes (a slow model may take minutes a step)."""
from __future__ import annotations

import re

import pytest

from lab.cli import main
from lab.resultfiles.files import read_result_file
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def test_the_bar_shows_tokens_and_time_left_before_a_step_ends(tiny_model_dir, tmp_path, capfd, monkeypatch):
    import lab.runs.step_bar as step_bar

    monkeypatch.setattr(step_bar, "LIVE_EVERY_S", 0.05)  # every second in use; the tiny model is fast
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spec = f"transformers:{tiny_model_dir}?device=cpu&max_tokens=300&batch_size=2&name=tiny"
    code = main(["replay", "--replay", str(EXCERPT), "--limit", "2", "--out", str(tmp_path), "--engine", spec])
    err = capfd.readouterr().err
    assert code == 0, err
    frames = [f.strip() for f in re.split(r"[\r\n]", err) if f.startswith("tiny:")]
    # before the batch of two ends: 0/2 steps, yet tokens counted and the time left bounded by max_tokens
    early = [f for f in frames if "| 0/2 [" in f and " tok/s" in f]
    assert early, "\n".join(frames[-5:])
    assert re.search(r"\d[\d,]* tok, [\d.,]+ tok/s, <=\S+ left \(est\., 300 tok/step max\)", early[-1]), early[-1]
    last = frames[-1]
    result = read_result_file(tmp_path / "tiny.json")
    tokens = sum(r["completion_tokens"] for r in result["per_step"])
    assert "| 2/2 [" in last and f"{tokens:,} tok, " in last and "left" not in last  # all done: what it took
    assert "<" not in last.split("[", 1)[1].split(",")[0]  # tqdm's own step-count estimate is not shown
