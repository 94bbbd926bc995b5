"""The openai engine against a real `transformers serve` on 127.0.0.1 serving the tiny model.

`transformers serve MODEL` pins the model (FORCE_MODEL) and offers /v1/completions. The tiny
model has random weights, so only protocol-level facts are checked."""
from __future__ import annotations

import pytest

from tests.helpers_servers import free_port, transformers_serve
from lab.data.step import Step
from lab.engines import Request, Sampling, create_engine
from lab.errors import EngineLoadError

STEP = Step("task-000", 0, 0, 2, False, "src/code", "code", (), "USER:\nlist files", '{"commands": []}')


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "transformers-serve.log"
    with transformers_serve(tiny_model_dir, log) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def engine(server, tiny_model_dir):
    engine = create_engine(f"openai:{server}#{tiny_model_dir}?concurrency=2&retries=1")
    engine.load()
    yield engine
    engine.close()


def test_load_finds_server_and_tokenizer(engine, tiny_model_dir):
    assert engine.base_url.endswith("/v1") and engine.tokenizer is not None
    assert engine.name == tiny_model_dir.name
    assert engine.describe().kind == "openai" and engine.describe().device.startswith("remote http://127.0.0.1:")


def test_completions_return_protocol_fields(engine):
    prompts = [
        engine.tokenizer.apply_chat_template([{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True)
        for t in ("list the files", "cd /app", 'echo "{}"')
    ]
    seen = []
    out = engine.generate([Request(STEP, p) for p in prompts], Sampling(max_tokens=5), on_done=lambda i, c: seen.append(i))
    assert sorted(seen) == [0, 1, 2]
    for prompt, completion in zip(prompts, out):
        assert completion.error is None, completion.error
        assert completion.finish_reason in {"stop", "length"}
        assert 1 <= completion.completion_tokens <= 5
        if completion.finish_reason == "length":
            assert completion.completion_tokens == 5
        assert completion.prompt_tokens == len(engine.tokenizer(prompt).input_ids)
        assert isinstance(completion.text, str) and completion.latency_s > 0


def test_base_url_without_or_with_v1_both_work(server, tiny_model_dir):
    engine = create_engine(f"openai:{server}/v1/#{tiny_model_dir}?check=false")
    engine.load()
    [completion] = engine.generate([Request(STEP, "hello")], Sampling(max_tokens=2))
    engine.close()
    assert completion.error is None and completion.completion_tokens <= 2


def test_wrong_model_name_is_a_clear_error(server):
    engine = create_engine(f"openai:{server}#org/not-served?retries=0")
    engine.load()
    assert engine.tokenizer is None  # not a folder and not in the local cache: renderer falls back
    [completion] = engine.generate([Request(STEP, "hello")], Sampling(max_tokens=2))
    engine.close()
    assert completion.text == "" and "server rejected the request (400)" in completion.error
    assert "org/not-served" in completion.error


def test_unsupported_sampling_field_is_reported(engine):
    [completion] = engine.generate([Request(STEP, "hi")], Sampling(max_tokens=2, repetition_penalty=1.2))
    assert "(422)" in completion.error and "repetition_penalty" in completion.error


def test_dead_port_fails_load_and_generation(tiny_model_dir):
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineLoadError, match="unreachable"):
        create_engine(f"openai:{dead}#{tiny_model_dir}").load()
    engine = create_engine(f"openai:{dead}#{tiny_model_dir}?check=false&retries=1")
    engine.load()
    engine.backoff_s = 0.01
    [completion] = engine.generate([Request(STEP, "hello")], Sampling(max_tokens=2))
    engine.close()
    assert "unreachable" in completion.error and "after 2 attempts" in completion.error
