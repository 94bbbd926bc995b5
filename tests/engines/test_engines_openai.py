"""The openai engine against a real `transformers serve` on 127.0.0.1 serving the tiny model.

`transformers serve MODEL` pins the model (FORCE_MODEL), offers /v1/completions with streaming,
refuses fields it does not know with 422, and answers /v1/models with 500 when there is no
Hugging Face cache. The tiny model has random weights, so only protocol-level facts are checked."""
from __future__ import annotations

import pytest

from tests.helpers_servers import free_port, transformers_serve
from lab.data.step import Step
from lab.engines import Request, Sampling, create_engine
from lab.engines.client.fields import refused_fields, sampling_fields
from lab.engines.client.probe import model_entry_length
from lab.errors import EngineLoadError

STEP = Step("task-000", 0, 0, 2, False, "src/code", "code", (), "USER:\nlist files", '{"commands": []}')
REFUSED_BY_TRANSFORMERS_SERVE = ["min_p", "repetition_penalty", "return_token_ids", "top_k"]


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


def chat_prompt(engine, text: str) -> str:
    return engine.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                add_generation_prompt=True)


def test_load_finds_server_tokenizer_and_what_it_refuses(engine, tiny_model_dir):
    assert engine.base_url.endswith("/v1") and engine.tokenizer is not None
    assert engine.name == tiny_model_dir.name and engine.concurrency == 2
    info = engine.describe()
    assert info.kind == "openai" and info.device.startswith("remote http://127.0.0.1:")
    # learnt once, at load, from the server's 422 "Unexpected fields in the request: {...}"
    assert engine.refused() == REFUSED_BY_TRANSFORMERS_SERVE
    assert "Unexpected fields" in engine.replicas.replicas[0].refused["top_k"]
    assert "server refuses min_p, repetition_penalty, return_token_ids, top_k (not sent)" in info.notes
    assert engine.max_model_len is None  # transformers serve does not report one
    assert engine.overlong_prompt == "reject"


def test_streamed_completions_carry_per_request_timings(engine):
    prompts = [chat_prompt(engine, t) for t in ("list the files", "cd /app", 'echo "{}"')]
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
        assert isinstance(completion.text, str) and completion.text
        assert 0 < completion.ttft_s <= completion.latency_s


def test_result_settings_record_what_was_sent(engine):
    [completion] = engine.generate([Request(STEP, "hi")], Sampling(max_tokens=3, seed=7))
    assert completion.error is None, completion.error
    settings = engine.engine_settings()
    assert settings["sampling_sent"] == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 3, "seed": 7}
    assert settings["sampling_not_sent"] == ["min_p", "repetition_penalty", "top_k"]
    assert settings["top_k"] is None and settings["repetition_penalty"] is None and settings["token_ids"] is False


def test_full_sampling_is_what_the_lab_asks_for():
    fields = sampling_fields(Sampling(max_tokens=8, seed=3, stop=["\n\n"]))
    assert fields == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 8, "repetition_penalty": 1.0, "top_k": -1,
                      "min_p": 0.0, "seed": 3, "stop": ["\n\n"]}
    said = "Unexpected fields in the request: {'min_p', 'return_token_ids', 'repetition_penalty', 'top_k'}"
    assert refused_fields(said, set(fields) | {"return_token_ids"}) == {"min_p", "return_token_ids",
                                                                        "repetition_penalty", "top_k"}
    # a value the server finds wrong is not an unknown field
    assert refused_fields("top_k must be -1 or >= 1, got 0", {"top_k"}) == set()
    # vLLM's /v1/models entry shape
    assert model_entry_length({"id": "m", "owned_by": "vllm", "max_model_len": 49152}) == 49152
    assert model_entry_length({"id": "m"}) is None


def test_a_refused_field_at_a_real_value_is_an_error_not_a_silent_drift(engine):
    [completion] = engine.generate([Request(STEP, "hi")], Sampling(max_tokens=2, repetition_penalty=1.2))
    assert completion.text == ""
    assert "does not accept repetition_penalty (422: Unexpected fields" in completion.error
    assert "cannot apply repetition_penalty=1.2" in completion.error


def test_base_url_without_or_with_v1_both_work_and_fields_are_learnt_on_the_fly(server, tiny_model_dir):
    engine = create_engine(f"openai:{server}/v1/#{tiny_model_dir}?check=false")
    engine.load()  # no probe: the first request meets the 422 and is sent again without those fields
    [completion] = engine.generate([Request(STEP, "hello")], Sampling(max_tokens=2))
    engine.close()
    assert completion.error is None and completion.completion_tokens <= 2
    assert engine.refused() == REFUSED_BY_TRANSFORMERS_SERVE


def test_wrong_model_name_is_a_clear_error(server):
    with pytest.raises(EngineLoadError, match="server rejected the request \\(400\\).*org/not-served"):
        create_engine(f"openai:{server}#org/not-served").load()
    engine = create_engine(f"openai:{server}#org/not-served?check=false&retries=0")
    engine.load()
    assert engine.tokenizer is None  # not a folder and not in the local cache: renderer falls back
    [completion] = engine.generate([Request(STEP, "hello")], Sampling(max_tokens=2))
    engine.close()
    assert completion.text == "" and "server rejected the request (400)" in completion.error
    assert "org/not-served" in completion.error and "\n" not in completion.error


def test_dead_port_fails_load_and_generation(tiny_model_dir):
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineLoadError, match="unreachable.*start the server"):
        create_engine(f"openai:{dead}#{tiny_model_dir}").load()
    engine = create_engine(f"openai:{dead}#{tiny_model_dir}?check=false&retries=1")
    engine.load()
    engine.backoff_s = 0.01
    [completion] = engine.generate([Request(STEP, "hello")], Sampling(max_tokens=2))
    engine.close()
    assert "unreachable" in completion.error and "after 2 attempts" in completion.error
