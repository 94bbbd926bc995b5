"""Every engine knows its model's context without being told, and Sample N really samples.

A tiny model whose config has only 4096 positions: in-process `transformers:` and a real managed
`transformers serve` read that context from config.json and refuse the excerpt's longest steps by
name before generating. At temperature 1.0 both sample (a real `transformers serve` used to fall
back to the model's generation_config.json, `do_sample: false`, and answered greedily every time);
vLLM's own sampling is tested with a real `vllm serve` in test_vllm_cpu.py."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import pytest

from lab.data.replay import load_replay
from lab.engines import create_engine
from lab.engines.base import Request, Sampling
from tests.paths import EXCERPT, REPO

ROOT = REPO
POSITIONS = 4096
pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def longest_prompt(engine) -> tuple[str, str, int]:
    """(step key, rendered prompt, tokens) of the excerpt's longest step for this engine."""
    from lab.prompts.engine_prompt import render_for_engine

    replay = load_replay(str(EXCERPT))
    rendered = [(step.key, render_for_engine(engine, step)) for step in replay.steps]
    key, prompt = max(rendered, key=lambda kv: kv[1].n_tokens or 0)
    return key, prompt.text, prompt.n_tokens


def test_replay_refuses_steps_past_the_configs_positions_by_name_before_generating(short_context_model_dir, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LAB_CACHE_DIR": str(tmp_path)}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--out", str(tmp_path / "runs"),
         "--engine", f"transformers:{short_context_model_dir}?device=cpu&max_tokens=8&name=short"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    message = done.stderr.strip().splitlines()[-1]
    assert f"exceed max_model_len {POSITIONS}" in message and "task-" in message and "Traceback" not in done.stderr
    assert " 1/" not in done.stderr  # no step was generated
    assert not list((tmp_path / "runs").glob("short*.json"))
    assert time.monotonic() - start < 200


def test_in_process_transformers_reads_its_context_and_samples(short_context_model_dir):
    engine = create_engine(f"transformers:{short_context_model_dir}?device=cpu&max_tokens=12")
    engine.load()
    try:
        assert engine.max_model_len == POSITIONS and engine.context_source == "max_position_embeddings"
        assert engine.overlong_prompt == "reject"
        key, prompt, n = longest_prompt(engine)
        assert n + 12 > POSITIONS
        [refused] = engine.generate([Request(step=None, prompt=prompt)], Sampling(temperature=0, max_tokens=12))
        assert refused.error.startswith("prompt too long") and f"context of {POSITIONS:,} tokens" in refused.error
        samples = {engine.generate([Request(step=None, prompt="ls -la")],
                                   Sampling(temperature=1.0, max_tokens=12, seed=seed))[0].text for seed in range(4)}
        assert len(samples) > 1
    finally:
        engine.close()


@pytest.mark.slow  # starts a managed `transformers serve`
def test_transformers_serve_reads_its_context_refuses_long_prompts_and_samples(short_context_model_dir, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setenv("LAB_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    engine = create_engine(f"transformers-serve:{short_context_model_dir}?device=cpu&max_tokens=12&name=served")
    engine.load()
    try:
        assert engine.max_model_len == POSITIONS and engine.overlong_prompt == "reject"
        assert engine.engine_settings()["max_model_len"] == POSITIONS  # the result file records it too
        key, prompt, n = longest_prompt(engine)
        started = time.monotonic()
        [refused] = engine.generate([Request(step=None, prompt=prompt)], Sampling(temperature=0, max_tokens=12))
        assert refused.error.startswith("prompt too long") and "(max_position_embeddings)" in refused.error
        assert time.monotonic() - started < 5  # refused by the lab, not generated for minutes
        hot = Sampling(temperature=1.0, top_p=1.0, max_tokens=12)
        answers = [engine.generate([Request(step=None, prompt="ls -la")], dataclasses.replace(hot, seed=seed))[0]
                   for seed in range(4)]
        assert all(a.error is None for a in answers)
        assert len({a.text for a in answers}) > 1, [a.text for a in answers]
        greedy = [engine.generate([Request(step=None, prompt="ls -la")], Sampling(temperature=0, max_tokens=12))[0].text
                  for _ in range(2)]
        assert greedy[0] == greedy[1]
    finally:
        engine.close()
