"""Stop takes effect within about a second: a replay through a real `transformers serve` (tiny model,
long answers), reached as an `openai:` server or started by the lab as a managed `transformers-serve:`
engine, is interrupted mid-chunk, the requests in flight are dropped, finished steps stay in the
checkpoint (none recorded as an error), and the engine answers again afterwards."""
from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager

import pytest

from lab.data import load_replay
from lab.engines.base import Request, Sampling
from lab.engines.registry import create_engine
from lab.runs.replay import ReplayConfig, replay
from tests.helpers_servers import transformers_serve
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@contextmanager
def openai_engine(model_dir, tmp_path):
    """An `openai:` engine on a `transformers serve` the test starts."""
    with transformers_serve(model_dir, tmp_path / "serve.log") as url:
        yield create_engine(f"openai:{url}#{model_dir}?concurrency=2&name=slow")


@contextmanager
def managed_engine(model_dir, tmp_path):
    """A `transformers-serve:` engine: the lab starts and stops the server itself (a managed engine)."""
    yield create_engine(f"transformers-serve:{model_dir}?concurrency=2&name=slow&device=cpu")


@pytest.mark.parametrize("served", [openai_engine, managed_engine], ids=["openai", "managed"])
def test_stop_cuts_in_flight_requests(served, tiny_model_dir, tmp_path):
    # early steps: their prompts fit the tiny model's 32,768 positions, which a managed engine checks
    steps = [s for s in load_replay(str(EXCERPT)).steps if s.step_idx < 4]
    with served(tiny_model_dir, tmp_path) as engine:
        engine.load()
        try:
            sampling = Sampling(max_tokens=300)  # seconds per answer on CPU: Stop lands mid-request
            config = ReplayConfig(out_dir=tmp_path, eval_path=str(EXCERPT), run_name="slow", chunk_size=len(steps),
                                  sampling=sampling, allow_raw_fallback=True)
            stop = threading.Event()
            seen: list[int] = []
            stopped_at: list[float] = []

            def progress(done: int, total: int, agg) -> None:
                seen.append(done)
                if done >= 1 and not stop.is_set():
                    stopped_at.append(time.perf_counter())
                    stop.set()

            with pytest.raises(InterruptedError):
                replay(engine, steps, config, progress=progress, stop=stop)
            ended = time.perf_counter()
            assert stopped_at, "no step finished before the test's time limit"
            assert ended - stopped_at[0] < 1.5, f"Stop took {ended - stopped_at[0]:.2f} s"
            rows = [json.loads(line) for line in (tmp_path / "slow.partial.jsonl").read_text().splitlines()[1:]]
            kept = [r for r in rows if isinstance(r, dict) and "task_id" in r.get("row", r)]
            assert 1 <= len(kept) < len(steps)
            assert not any((r.get("row", r)).get("error") for r in kept)  # a dropped request is not an answer

            # the engine is still usable after the cancel: fresh clients answer the next request
            from lab.engines.base import Request
            [answer] = engine.generate([Request(step=steps[0], prompt="hello")], Sampling(max_tokens=4))
            assert answer is not None and not answer.error
        finally:
            engine.close()


def test_stop_cuts_an_in_process_generation(tiny_model_dir, tmp_path):
    """The in-process transformers engine: Stop ends the batch being decoded at its next token; the
    steps finished before stay, the cut ones are not answers, and the engine answers afterwards."""
    steps = load_replay(str(EXCERPT)).steps[:4]
    engine = create_engine(f"transformers:{tiny_model_dir}?device=cpu&batch_size=1&name=inproc")
    engine.load()
    try:
        config = ReplayConfig(out_dir=tmp_path, eval_path=str(EXCERPT), run_name="inproc", chunk_size=len(steps),
                              sampling=Sampling(max_tokens=1000), allow_raw_fallback=True)
        stop = threading.Event()
        stopped_at: list[float] = []

        def progress(done: int, total: int, agg) -> None:
            if done >= 1 and not stop.is_set():
                stopped_at.append(time.perf_counter())
                stop.set()

        started = time.perf_counter()
        with pytest.raises(InterruptedError):
            replay(engine, steps, config, progress=progress, stop=stop)
        ended = time.perf_counter()
        assert stopped_at, "no step finished"
        per_step = (stopped_at[0] - started)  # one whole answer: what an uncut step would still cost
        # the next step's prefill is one forward pass Stop cannot cut (1.6 s once on a loaded CI machine); its
        # 1000 tokens of decoding, most of a step, are what Stop saves
        assert ended - stopped_at[0] < max(1.5, per_step / 2), \
            f"Stop took {ended - stopped_at[0]:.2f} s (a step takes {per_step:.1f} s)"
        rows = [json.loads(line) for line in (tmp_path / "inproc.partial.jsonl").read_text().splitlines()[1:]]
        kept = [r.get("row", r) for r in rows if isinstance(r, dict) and "task_id" in r.get("row", r)]
        assert len(kept) == 1 and not kept[0].get("error")
        assert kept[0]["completion_tokens"] == 1000 or kept[0]["finish_reason"] == "stop"  # the finished one is whole

        [answer] = engine.generate([Request(step=steps[0], prompt="hello")], Sampling(max_tokens=4))
        assert answer is not None and not answer.error and answer.completion_tokens == 4
    finally:
        engine.close()
