"""One openai engine over two real `transformers serve` replicas of the tiny model: requests are
spread over both, and when one replica is killed (SIGKILL, mid-run) its requests finish on the other."""
from __future__ import annotations

import os
import signal

import pytest

from tests.helpers_servers import free_port, transformers_serve_process
from lab.data.step import Step
from lab.engines import Request, Sampling, create_engine

STEP = Step("task-000", 0, 0, 2, False, "src/code", "code", (), "USER:\nlist files", '{"commands": []}')
PROMPTS = ["list the files", "cd /app", "echo hello", "ls -la", "cat README.md", "pwd", "grep -i yaml", "exit"]


def completions_served(log_path) -> int:
    """How many /v1/completions requests a server's access log shows."""
    return log_path.read_text(errors="replace").count('"POST /v1/completions HTTP/1.1" 200')


@pytest.fixture()
def two_replicas(tiny_model_dir, tmp_path):
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    with transformers_serve_process(tiny_model_dir, logs[0]) as (url_a, proc_a):
        with transformers_serve_process(tiny_model_dir, logs[1]) as (url_b, proc_b):
            yield [url_a, url_b], [proc_a, proc_b], logs


def test_requests_spread_over_replicas_and_survive_a_killed_one(two_replicas, tiny_model_dir):
    urls, procs, logs = two_replicas
    engine = create_engine(f"openai:{urls[0]},{urls[1]}#{tiny_model_dir}?concurrency=4&retries=3")
    engine.load()
    try:
        assert engine.describe().device.endswith("(+1 replica)")
        assert engine.engine_settings()["endpoints"] == [f"{u}/v1" for u in urls]
        before = [completions_served(log) for log in logs]
        out = engine.generate([Request(STEP, p) for p in PROMPTS], Sampling(max_tokens=6))
        assert all(c.error is None for c in out), [c.error for c in out]
        after = [completions_served(log) for log in logs]
        assert after[0] > before[0] and after[1] > before[1]  # least-outstanding: both replicas served
        assert sum(after) - sum(before) == len(PROMPTS)

        # kill replica B while a run is under way: its requests move to A, none is lost
        killed = []

        def kill_b_once(index, completion):
            if not killed:
                os.killpg(procs[1].pid, signal.SIGKILL)
                killed.append(index)

        engine.backoff_s = 0.05
        out = engine.generate([Request(STEP, p) for p in PROMPTS * 2], Sampling(max_tokens=30), on_done=kill_b_once)
        assert killed and procs[1].wait(timeout=10) == -signal.SIGKILL
        assert [c.error for c in out] == [None] * len(out)
        assert all(c.completion_tokens and c.ttft_s is not None and c.latency_s > 0 for c in out)

        # later requests go to A only; B is reported as failing
        out = engine.generate([Request(STEP, p) for p in PROMPTS[:3]], Sampling(max_tokens=4))
        assert [c.error for c in out] == [None] * 3
        assert f"failing: {urls[1]}/v1" in engine.describe().notes
    finally:
        engine.close()


def test_a_replica_down_at_load_is_skipped_and_all_down_is_an_error(tiny_model_dir, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    with transformers_serve_process(tiny_model_dir, tmp_path / "a.log") as (url, _proc):
        engine = create_engine(f"openai:{dead},{url}#{tiny_model_dir}?retries=2")
        engine.load()
        try:
            assert f"failing: {dead}/v1" in engine.describe().notes
            out = engine.generate([Request(STEP, p) for p in PROMPTS[:4]], Sampling(max_tokens=3))
            assert [c.error for c in out] == [None] * 4
        finally:
            engine.close()
    from lab.errors import EngineLoadError

    other = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineLoadError, match="endpoints failed: endpoint .* unreachable"):
        create_engine(f"openai:{dead},{other}#{tiny_model_dir}").load()
