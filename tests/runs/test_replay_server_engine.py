"""`python -m lab replay` through a model server (a real `transformers serve` of the tiny model)
against in-process `transformers:` on the same model: per-request TTFT and latency are written,
and at temperature 0 both give the same outputs.

Why the comparison uses `batch_size=1` in-process: the server generates one request at a time
with no padding, while a left-padded batch changes the float32 sums slightly, which can flip a
near-tie of the random-weight tiny model. Token ids: `transformers serve` returns none (it
refuses vLLM's `return_token_ids`), so the server run's `token_ids_preview` is empty.
"""
from __future__ import annotations

import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers_servers import transformers_serve
from tests.paths import REPO

ROOT = REPO
# "transformers-serve": the lab starts and stops the server; "openai": the test starts it and connects.
SERVER_KIND = "transformers-serve"


@contextmanager
def server_engine_spec(model_dir: Path, log: Path):
    """The SPEC of an engine that answers through a `transformers serve` of `model_dir`."""
    if SERVER_KIND == "transformers-serve":
        yield f"transformers-serve:{model_dir}"
        return
    with transformers_serve(model_dir, log) as url:
        yield f"openai:{url}#{model_dir}"


@pytest.fixture(scope="module")
def short_replay(shared_dir, tmp_path_factory) -> Path:
    """Six steps of the excerpt with their texts cut short (the tiny model's vocabulary makes the
    full prompts 2-18 k tokens), in the current `messages` format."""
    rows = [json.loads(line) for line in (shared_dir / "replay_excerpt.jsonl").read_text().splitlines()[:6]]
    path = tmp_path_factory.mktemp("replay") / "short.jsonl"
    with open(path, "w") as out:
        for row in rows:
            prompt = row["prompt"]
            messages = [{"role": "user", "content": prompt[:200] + "\n...\n" + prompt[-300:]}]
            out.write(json.dumps({"task_id": row["task_id"], "sample_idx": row["sample_idx"], "step_idx": row["step_idx"],
                                  "source_group": row["source_group"], "ref_raw": row["ref_raw"],
                                  "messages": messages}) + "\n")
    return path


def run_replay(replay: Path, out: Path, *specs: str) -> None:
    cmd = [sys.executable, "-m", "lab", "replay", "--replay", str(replay), "--out", str(out),
           "--max-tokens", "16", "--temperature", "0"]
    for spec in specs:
        cmd += ["--engine", spec]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr


def test_replay_through_a_server_matches_in_process_transformers(short_replay, tiny_model_dir, tmp_path):
    with server_engine_spec(tiny_model_dir, tmp_path / "serve.log") as spec:
        run_replay(short_replay, tmp_path, spec, f"transformers:{tiny_model_dir}?device=cpu&batch_size=1&name=inproc")
    kind = spec.split(":", 1)[0]  # a default run name tells the engine's kind
    server = json.loads((tmp_path / f"{tiny_model_dir.name}-{kind}.json").read_text())
    local = json.loads((tmp_path / "inproc.json").read_text())
    n = len(server["per_step"])
    assert n == len(local["per_step"]) >= 5
    for s, l in zip(server["per_step"], local["per_step"]):
        assert (s["task_id"], s["step_idx"]) == (l["task_id"], l["step_idx"])
        assert s["error"] is None, s["error"]
        # per request: each step has its own TTFT and latency from the stream
        assert 0 < s["ttft_s"] <= s["latency_s"]
        assert 0 < l["ttft_s"] <= l["latency_s"]
        # temperature 0: the very same generation
        assert s["raw_output"] == l["raw_output"]
        assert s["finish_reason"] == l["finish_reason"]
        assert s["completion_tokens"] == l["completion_tokens"] >= 1
        assert s["prompt_tokens"] == l["prompt_tokens"]
        assert s["token_ids_preview"] == [] and len(l["token_ids_preview"]) == l["completion_tokens"]
    assert len({s["latency_s"] for s in server["per_step"]}) == n  # one figure per request, not per chunk
    sampling = server["sampling"]
    assert sampling["backend"] == SERVER_KIND and sampling["temperature"] == 0.0 and sampling["max_tokens"] == 16
    assert sampling["sampling_sent"] == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 16}
    assert sampling["sampling_not_sent"] == ["min_p", "repetition_penalty", "top_k"]
