"""SPEC parsing, the registry, presets validation and the vLLM argument translation (no vLLM)."""
from __future__ import annotations


import pytest

from lab.engines import Sampling, create_engine, engine_kinds, engine_options, load_presets, resolve_spec
from lab.engines.openai_engine import api_root, completion_body
from lab.engines.spec import split_spec
from lab.errors import EngineLoadError, EngineSpecError
from tests.paths import REPO as ROOT

PRESETS = load_presets()


def test_split_spec_keeps_openai_hash_and_reads_options():
    parsed = split_spec("openai:http://127.0.0.1:8000/v1#org/Model-1B?concurrency=8&check")
    assert (parsed.kind, parsed.target) == ("openai", "http://127.0.0.1:8000/v1#org/Model-1B")
    assert parsed.options == {"concurrency": "8", "check": "true"}


@pytest.mark.parametrize(
    "spec, kind, name, model",
    [
        ("reference", "reference", "reference", "reference"),
        ("stored:/data/runs/Qwen3.5-2B.json", "stored", "Qwen3.5-2B", "/data/runs/Qwen3.5-2B.json"),
        ("transformers:/models/tiny-lm/", "transformers", "tiny-lm", "/models/tiny-lm/"),
        ("vllm:org/Some-Model-7B", "vllm", "Some-Model-7B", "org/Some-Model-7B"),
        ("openai:http://h:8000#org/M-2B", "openai", "M-2B", "org/M-2B"),
        ("qwen35-2b-sft", "vllm", "Qwen3.5-2B SFT", "LLM-OS-Models/Qwen3.5-2B-Terminal-SFT-2Epoch-FullFT-SameCount"),
        ("transformers:gemma4-e4b-sft", "transformers", "Gemma-4-E4B SFT", "LLM-OS-Models/gemma-4-E4B-it-Terminal-SFT-Native-Liquid-2Epoch"),
    ],
)
def test_create_engine_kinds_names_and_models(spec, kind, name, model):
    engine = create_engine(spec, presets=PRESETS)
    assert (engine.kind, engine.name, engine.model_id, engine.spec) == (kind, name, model, spec)
    assert engine.tokenizer is None  # nothing is loaded before load()


def test_preset_settings_reach_the_engine():
    grpo = create_engine("qwen35-08b-grpo", presets=PRESETS)
    assert grpo.contract == "bash-block"
    assert grpo.lora == "lew96123/qwen3.5-0.8b-terminal-agent-grpo-rl-checkpoint-100"
    assert (grpo.default_sampling.temperature, grpo.default_sampling.top_p, grpo.default_sampling.max_tokens) == (0.7, 0.95, 256)
    gemma = create_engine("gemma4-e4b-sft", presets=PRESETS)
    assert gemma.prompt_options == {"thinking_mode": "off", "strip_thinking_history": "on", "gemma4_empty_thought_channel": "auto"}
    assert gemma.contract == "tb2lite-json"
    # options after '?' and keyword overrides win over the preset
    tuned = create_engine("vllm:qwen35-2b-sft?gpu_memory_utilization=0.45&max_tokens=64", presets=PRESETS, contract="bash-block")
    assert tuned.settings["gpu_memory_utilization"] == 0.45 and tuned.settings["max_model_len"] == 49152
    assert tuned.default_sampling.max_tokens == 64 and tuned.contract == "bash-block"


def test_published_presets_match_design():
    assert set(PRESETS) == {"qwen35-2b-sft", "lfm25-8b-a1b-sft", "gemma4-e4b-sft", "qwen35-08b-grpo", "qwen35-9b-cli-gym"}
    for preset in PRESETS.values():
        assert preset.kind == "vllm" and not preset.trust_remote_code
        assert preset.engine["dtype"] == "bfloat16" and preset.engine["tensor_parallel_size"] == 1
        assert preset.engine["max_model_len"] == 49152
        assert "gpu_memory_utilization" not in preset.engine  # the pool splits the GPU budget
    assert PRESETS["qwen35-2b-sft"].published["score"] == 39.52
    assert PRESETS["qwen35-2b-sft"].engine["language_model_only"] is True
    assert PRESETS["lfm25-8b-a1b-sft"].engine["language_model_only"] is False
    assert PRESETS["qwen35-9b-cli-gym"].contract == "bash-block"
    assert PRESETS["qwen35-9b-cli-gym"].published["benchmark"] == "tb-lite"
    assert PRESETS["qwen35-2b-sft"].sampling == Sampling(temperature=0.0, top_p=1.0, max_tokens=1024, repetition_penalty=1.0)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("", "empty engine spec"),
        ("no-such-preset", "Presets: gemma4-e4b-sft"),
        ("llama:foo", "unknown engine kind 'llama'"),
        ("stored", "needs a target: stored:PATH"),
        ("openai:http://127.0.0.1:8000", "openai:BASE_URL#MODEL"),
        ("openai:ftp://x#m", "must start with http"),
        ("openai:http://" + "a" * 300 + "/v1#m", "has no valid host and port"),  # was a UnicodeError (IDNA)
        ("openai:http://127.0.0.1:1/v1,http://" + "a" * 300 + ":1/v1#m", "has no valid host and port"),
        ("openai:http://127.0.0.1:99999/v1#m", "has no valid host and port"),
        ("openai:http:///v1#m", "has no valid host and port"),
        ("transformers:/m?colour=blue", "unknown option(s) ['colour']"),
        ("transformers:/m?batch_size=many", "batch_size' must be an integer"),
        ("vllm:/m?language_model_only=maybe", "must be true or false"),
        ("transformers:/m?trust_remote_code=true", "unknown option(s) ['trust_remote_code']"),
        ("vllm:/m?kv_cache_gb=nan", "'kv_cache_gb' must be a finite number"),  # was an unhandled ValueError
        ("vllm:/m?kv_cache_gb=1e400", "'kv_cache_gb' must be a finite number"),  # was an OverflowError
        ("vllm:/m?gpu_memory_utilization=inf", "'gpu_memory_utilization' must be a finite number"),
        ("reference?temperature=nan", "'temperature' must be a finite number"),
        ("openai:http://127.0.0.1:9/v1#m?timeout=inf", "'timeout' must be a finite number"),
        ("transformers:/m?batch_size=" + "9" * 5000, "batch_size' must be an integer"),
    ],
)
def test_bad_specs_say_what_exists(spec, message):
    with pytest.raises(EngineSpecError) as err:
        create_engine(spec, presets=PRESETS)
    assert message in str(err.value)


def test_unknown_spec_lists_kinds():
    with pytest.raises(EngineSpecError) as err:
        resolve_spec("whatever", PRESETS)
    for usage in engine_kinds().values():
        assert usage in str(err.value)
    assert "lora" in engine_options("transformers") and "api_key" in engine_options("openai")


PRESET_YAML = """
defaults:
  sampling: {temperature: 0.0, max_tokens: 512}
  engine: {dtype: bfloat16}
presets:
  good:
    hf_id: org/good
    sampling: {max_tokens: 64}
"""


def test_load_presets_merges_defaults(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(PRESET_YAML)
    good = load_presets(path)["good"]
    assert good.sampling.max_tokens == 64 and good.engine == {"dtype": "bfloat16"} and good.kind == "vllm"


@pytest.mark.parametrize(
    "body, message",
    [
        ("presets:\n  bad:\n    kind: vllm\n", "preset 'bad': 'hf_id' is required"),
        ("presets:\n  bad:\n    hf_id: a/b\n    kind: llamacpp\n", "'kind' must be one of"),
        ("presets:\n  bad:\n    hf_id: a/b\n    colour: red\n", "unknown field(s) ['colour']"),
        ("presets:\n  bad:\n    hf_id: a/b\n    sampling: {temp: 1}\n", "unknown sampling field(s) ['temp']"),
        ("presets:\n  bad:\n    hf_id: a/b\n    sampling: {top_p: 0}\n", "0 < top_p <= 1"),
        ("presets:\n  bad:\n    hf_id: a/b\n    engine: {gpu: 1}\n", "unknown engine setting(s) ['gpu']"),
        ("presets:\n  bad:\n    hf_id: a/b\n    prompt_options: {thinking_mode: maybe}\n", "must be on, off or auto"),
        ("presets:\n  bad:\n    hf_id: a/b\n    trust_remote_code: yes please\n", "'trust_remote_code' must be true or false"),
        ("models: []\n", "expected a top-level 'presets:'"),
        ("presets: [\n", "not valid YAML"),
    ],
)
def test_load_presets_errors_name_file_and_key(tmp_path, body, message):
    path = tmp_path / "models.yaml"
    path.write_text(body)
    with pytest.raises(EngineSpecError) as err:
        load_presets(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_vllm_without_its_executable_gives_clear_load_error(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_VLLM", str(tmp_path / "no-vllm-env" / "vllm"))
    monkeypatch.setenv("LAB_LOG_DIR", str(tmp_path / "logs"))
    engine = create_engine(f"vllm:{tmp_path}", presets=PRESETS)
    with pytest.raises(EngineLoadError) as err:
        engine.load()
    message = str(err.value)
    assert f"cannot start '{tmp_path / 'no-vllm-env' / 'vllm'}'" in message
    assert "requirements-vllm.txt" in message and "LAB_VLLM" in message and "Traceback" not in message
    assert "vLLM is not installed here" in message and "\n" not in message  # one line, before any process starts
    assert not (tmp_path / "logs").exists()


def test_vllm_missing_on_a_cpu_machine_names_the_cpu_environment_script(monkeypatch, tmp_path):
    """Issue 41: on a machine without a GPU the message points to scripts/vllm_cpu_env.sh (vLLM's CPU build),
    not only to the GPU section; the script it names exists in the checkout."""
    monkeypatch.setenv("LAB_VLLM", str(tmp_path / "no-vllm-env" / "vllm"))
    monkeypatch.setenv("LAB_VLLM_DEVICE", "cpu")
    engine = create_engine(f"vllm:{tmp_path}", presets=PRESETS)
    with pytest.raises(EngineLoadError) as err:
        engine.load()
    message = str(err.value)
    assert "bash scripts/vllm_cpu_env.sh" in message and "docs/testing.md, vLLM on CPU" in message
    assert "requirements-vllm.txt" in message and "\n" not in message
    assert (ROOT / "scripts" / "vllm_cpu_env.sh").is_file()


def test_vllm_with_no_executable_anywhere_says_so_in_one_line(monkeypatch, tmp_path):
    monkeypatch.delenv("LAB_VLLM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no `vllm` on PATH (the CPU image)
    engine = create_engine(f"vllm:{tmp_path}", presets=PRESETS)
    with pytest.raises(EngineLoadError, match=r"no `vllm` on PATH and LAB_VLLM is not set.*requirements-vllm.txt"):
        engine.load()


def test_openai_url_and_body():
    assert api_root("http://h:8000") == api_root("http://h:8000/v1/") == "http://h:8000/v1"
    body = completion_body("m", "PROMPT", Sampling(max_tokens=8))
    assert body == {"model": "m", "prompt": "PROMPT", "stream": True, "max_tokens": 8, "temperature": 0.0, "top_p": 1.0,
                    "repetition_penalty": 1.0, "top_k": -1, "min_p": 0.0,
                    "stream_options": {"include_usage": True}, "return_token_ids": True}
    body = completion_body("m", "P", Sampling(repetition_penalty=1.1, stop=["\n\n"]), refused={"top_k": "422"})
    assert body["repetition_penalty"] == 1.1 and body["stop"] == ["\n\n"] and "top_k" not in body
