"""The transformers engine on a tiny random-weight model (and a LoRA adapter for it), on CPU."""
from __future__ import annotations

import subprocess
import sys

import pytest

from lab.data.step import Step
from lab.engines import Request, Sampling, create_engine
from lab.engines.transformers_engine import cut_at_stop, step_timings, trim_generated
from lab.errors import EngineLoadError
from tests.paths import REPO

STEP = Step("task-000", 0, 0, 2, False, "src/code", "code", (), "USER:\nlist files", '{"commands": []}')


def chat_prompts(tokenizer, n):
    texts = ["list the files", 'print {"a": [1, 2]}', "cd /app && ls"][:n]
    return [tokenizer.apply_chat_template([{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True) for t in texts]


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    engine = create_engine(f"transformers:{tiny_model_dir}?device=cpu&batch_size=2")
    engine.load()
    yield engine
    engine.close()


def test_loads_with_tokenizer_and_describes_itself(engine, tiny_model_dir):
    assert engine.tokenizer is not None and engine.tokenizer.padding_side == "left"
    assert engine.name == tiny_model_dir.name and engine.model_id == str(tiny_model_dir)
    info = engine.describe()
    assert (info.kind, info.device) == ("transformers", "cpu (float32)") and info.memory_gb > 0
    assert engine.load_time_sec is not None and engine.engine_settings()["dtype"] == "float32"


def test_greedy_batch_generation(engine):
    prompts = chat_prompts(engine.tokenizer, 3)
    done = []
    sampling = Sampling(max_tokens=6)
    out = engine.generate([Request(STEP, p) for p in prompts], sampling, on_done=lambda i, c: done.append(i))
    assert sorted(done) == [0, 1, 2] and len(out) == 3
    for prompt, completion in zip(prompts, out):
        assert completion.error is None
        assert 1 <= len(completion.token_ids) <= sampling.max_tokens == 6
        assert completion.completion_tokens == len(completion.token_ids)
        assert completion.prompt_tokens == len(engine.tokenizer(prompt).input_ids)
        assert completion.finish_reason in {"stop", "length"}
        if completion.finish_reason == "length":
            assert len(completion.token_ids) == 6
        assert completion.latency_s > 0 and 0 <= completion.ttft_s <= completion.latency_s
    # greedy is deterministic and batching/padding does not change the answer
    again = engine.generate([Request(STEP, prompts[2])], sampling)
    assert again[0].token_ids == out[2].token_ids


def test_sampling_with_seed_and_stop_strings(engine):
    prompt = chat_prompts(engine.tokenizer, 1)[0]
    sampling = Sampling(temperature=0.9, top_p=0.9, max_tokens=8, seed=7, repetition_penalty=1.1)
    first = engine.generate([Request(STEP, prompt)], sampling)[0]
    second = engine.generate([Request(STEP, prompt)], sampling)[0]
    assert first.token_ids == second.token_ids and len(first.token_ids) <= 8
    if len(first.text) > 2:  # stop at a piece of the text the model produces for this seed
        stop = first.text[1:3]
        stopped = engine.generate([Request(STEP, prompt)], Sampling(temperature=0.9, top_p=0.9, max_tokens=8, seed=7, repetition_penalty=1.1, stop=[stop]))[0]
        assert stopped.finish_reason == "stop" and stopped.stop_reason == stop and stop not in stopped.text


def test_lora_adapter_changes_the_model(tiny_model_dir, tiny_lora_dir, engine):
    with_lora = create_engine(f"transformers:{tiny_model_dir}?device=cpu&lora={tiny_lora_dir}")
    with_lora.load()
    try:
        assert with_lora.describe().lora == str(tiny_lora_dir) and with_lora.name == tiny_lora_dir.name
        prompt = chat_prompts(engine.tokenizer, 1)[0]
        sampling = Sampling(max_tokens=5)
        adapted = with_lora.generate([Request(STEP, prompt)], sampling)[0]
        plain = engine.generate([Request(STEP, prompt)], sampling)[0]
        assert adapted.error is None and 1 <= len(adapted.token_ids) <= 5
        assert adapted.token_ids != plain.token_ids  # the adapter's non-zero B weights change greedy output
    finally:
        with_lora.close()
    assert with_lora.model is None and not with_lora.loaded


def test_missing_model_and_adapter_fail_clearly(tmp_path, tiny_model_dir):
    with pytest.raises(EngineLoadError, match="does not exist"):
        create_engine(f"transformers:{tmp_path / 'nope'}").load()
    with pytest.raises(EngineLoadError, match="LoRA adapter folder .* does not exist"):
        create_engine(f"transformers:{tiny_model_dir}?lora={tmp_path / 'no-adapter'}").load()
    empty = tmp_path / "empty-model"
    empty.mkdir()
    with pytest.raises(EngineLoadError, match="cannot load tokenizer"):
        create_engine(f"transformers:{empty}?device=cpu").load()


def test_generate_before_load_is_a_clear_error(tiny_model_dir):
    with pytest.raises(EngineLoadError, match="not loaded"):
        create_engine(f"transformers:{tiny_model_dir}").generate([Request(STEP, "x")], Sampling(max_tokens=2))


def test_trim_and_stop_helpers():
    assert trim_generated([5, 6, 2, 3, 3], {2}, 3) == ([5, 6, 2], True)
    assert trim_generated([5, 6, 3, 3], {2}, 3) == ([5, 6], False)
    assert cut_at_stop("ls -la\n```\nmore", ["```", "\n"]) == ("ls -la", "\n")
    assert cut_at_stop("abc", None) == ("abc", None)


def test_timings_are_per_sequence_in_a_batch(engine):
    # stop strings end some sequences early while the batch goes on: each keeps its own latency
    prompts = chat_prompts(engine.tokenizer, 2)
    sampling = Sampling(max_tokens=24, stop=["a", "e", "s"])
    out = engine.generate([Request(STEP, p) for p in prompts], sampling)
    for completion in out:
        assert completion.error is None and 0 < completion.ttft_s <= completion.latency_s
    # the first decoding step is shared, so the batch's sequences share their TTFT
    assert out[0].ttft_s == out[1].ttft_s
    by_tokens = sorted(out, key=lambda c: c.completion_tokens)
    assert by_tokens[0].latency_s <= by_tokens[1].latency_s
    if by_tokens[0].completion_tokens < by_tokens[1].completion_tokens:
        assert by_tokens[0].latency_s < by_tokens[1].latency_s


def test_step_timings_pick_the_sequence_s_own_last_step():
    ends = [10.5, 10.7, 10.9, 11.4]
    assert step_timings(ends, 2, 10.0, 12.0) == (0.5, pytest.approx(0.7))
    assert step_timings(ends, 4, 10.0, 12.0) == (0.5, pytest.approx(1.4))
    assert step_timings(ends, 0, 10.0, 12.0) == (0.5, 2.0)  # nothing kept: the batch's end
    assert step_timings([], 3, 10.0, 12.0) == (None, 2.0)


PARALLEL_LOADS = """
import sys, threading
from lab.engines import create_engine
engines = [create_engine(f"transformers:{sys.argv[1]}?device=cpu&name=e{i}") for i in range(2)]
errors = []
def load(engine):
    try:
        engine.load()
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
threads = [threading.Thread(target=load, args=(e,)) for e in engines]
[t.start() for t in threads]
[t.join() for t in threads]
print("ERRORS", errors, "LOADED", [e.loaded for e in engines])
"""


def test_two_engines_loading_at_the_same_moment_both_load(tiny_model_dir):
    # a fresh process each time: the race was in transformers' first (lazy) import and in
    # from_pretrained's process-wide meta-device state; it failed 3 of 3 times before the lock
    root = REPO
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", PARALLEL_LOADS, str(tiny_model_dir)], cwd=root,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "ERRORS [] LOADED [True, True]" in done.stdout, done.stdout + done.stderr[-2000:]


def test_tokens_are_counted_as_they_come_before_the_batch_ends(engine):
    """Issue 56: a batch moves a replay's step count only when it ends, so the engine counts each row's tokens
    as they are generated; over the batch the count is exactly the answers' completion tokens."""
    import threading
    import time

    progress = engine.live_progress()
    before = progress.produced()
    finished: list[int] = []
    seen: list[tuple[int, int]] = []  # (tokens so far, answers finished) while the batch generates
    out: list = []
    worker = threading.Thread(target=lambda: out.extend(engine.generate(
        [Request(STEP, p) for p in chat_prompts(engine.tokenizer, 2)], Sampling(max_tokens=400),
        on_done=lambda i, c: finished.append(i))))
    worker.start()
    while worker.is_alive():
        seen.append((progress.produced() - before, len(finished)))
        time.sleep(0.005)
    worker.join()
    early = [tokens for tokens, answered in seen if answered == 0 and tokens > 0]
    assert early, "no token was counted before the batch's answers came"
    assert [t for t, _ in seen] == sorted(t for t, _ in seen)  # the count only grows
    assert len(out) == 2 and all(c.error is None for c in out)
    assert progress.produced() - before == sum(c.completion_tokens for c in out)
    assert progress.snapshot() is None  # nothing running any more
