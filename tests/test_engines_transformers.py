"""The transformers engine on a tiny random-weight model (and a LoRA adapter for it), on CPU."""
from __future__ import annotations

import pytest

from lab.data.step import Step
from lab.engines import Request, Sampling, create_engine
from lab.engines.transformers_engine import cut_at_stop, trim_generated
from lab.errors import EngineLoadError

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
