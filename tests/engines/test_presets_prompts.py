"""The prompt each preset really gets (issue 24, SPEC §3): its prompt options and contract on the
family's own chat format, with tokenizers that carry chat templates written in each family's
published format (tests/data/chat_templates/, built by tests/engines/helpers_presets.py).

Step task-000/1 of the excerpt has an assistant turn that opens with a <think> block, so the
thinking rules show: stripped (Gemma-4 preset), dropped by Qwen's own template for turns before the
last user message, kept (LFM2's template has no thinking rules).
"""
from __future__ import annotations

import pytest

from lab.engines import create_engine
from lab.prompts.engine_prompt import render_for_engine
from tests.engines.helpers_presets import build_tokenizer
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.fixture(scope="module")
def step():
    from lab.data.replay import load_replay

    found = load_replay(EXCERPT).steps[1]
    assert found.messages[1]["role"] == "assistant" and found.messages[1]["content"].startswith("<think>")
    return found


@pytest.fixture(scope="module")
def tokenizers():
    return {family: build_tokenizer(family) for family in ("qwen35", "lfm2", "gemma4")}


def rendered(spec: str, tokenizer, step):
    engine = create_engine(spec)
    engine.tokenizer = tokenizer
    return render_for_engine(engine, step)


def test_qwen35_sft_preset_uses_the_template_default_and_thinking_switches(tokenizers, step, tmp_path):
    qwen = tokenizers["qwen35"]
    auto = rendered(f"vllm:{tmp_path}?preset=qwen35-2b-sft", qwen, step)
    # thinking_mode auto, not Gemma-4: no kwarg, so the template's default (thinking on) applies
    assert auto.status == "chat_template" and auto.chat_template_kwargs == {}
    assert auto.text.endswith("<|im_start|>assistant\n<think>\n")
    # the template drops the reasoning of an assistant turn before the last user message; nothing stripped by the lab
    assert auto.stripped_thinking_blocks == 0 and "<think>" not in auto.text[:-len("<think>\n")]
    off = rendered(f"vllm:{tmp_path}?preset=qwen35-2b-sft&thinking_mode=off", qwen, step)
    assert off.chat_template_kwargs == {"enable_thinking": False}
    assert off.text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    on = rendered(f"vllm:{tmp_path}?preset=qwen35-2b-sft&thinking_mode=on&strip_thinking_history=on", qwen, step)
    assert on.chat_template_kwargs == {"enable_thinking": True} and on.stripped_thinking_blocks == 1
    ids = qwen(auto.text, add_special_tokens=False).input_ids
    assert ids.count(qwen.convert_tokens_to_ids("<|im_start|>")) == len(step.messages) + 1  # one token per turn


@pytest.mark.parametrize("preset", ["qwen35-08b-grpo", "qwen35-9b-cli-gym"])
def test_bash_block_presets_send_their_contract_prompt(tokenizers, step, tmp_path, preset):
    prompt = rendered(f"vllm:{tmp_path}?preset={preset}", tokenizers["qwen35"], step)
    assert prompt.status == "contract_prompt"  # the contract's own text, no chat template
    assert prompt.text.startswith("### System:") and prompt.text.endswith("### Output:") and "<|im_start|>" not in prompt.text


def test_gemma4_preset_gets_the_patched_turn_without_thinking(tokenizers, step, tmp_path):
    gemma = tokenizers["gemma4"]
    prompt = rendered(f"vllm:{tmp_path / 'checkpoint-100'}?preset=gemma4-e4b-sft", gemma, step)
    assert prompt.status == "gemma4_patched" and prompt.chat_template_kwargs == {"enable_thinking": False}
    assert prompt.text.startswith("<bos><|turn>user\n") and "<|think|>" not in prompt.text
    assert prompt.text.endswith("<turn|>\n<|turn>model\n")  # E4B: no empty thought channel (26B/31B only)
    assert prompt.stripped_thinking_blocks == 1 and "<think>" not in prompt.text
    assert prompt.text.count("<|turn>model\n") == 2  # the assistant turn is `model`, then the generation prompt
    ids = gemma(prompt.text).input_ids  # the tokenizer adds <bos> as the real one does: the harness sends two
    assert ids[:2] == [gemma.bos_token_id] * 2
    channel = rendered(f"vllm:{tmp_path}?preset=gemma4-e4b-sft&gemma4_empty_thought_channel=on", gemma, step)
    assert channel.text.endswith("<|turn>model\n<|channel>thought\n<channel|>")
    # the template the tokenizer carries (used when the patched turn is off) writes the same turns
    own = rendered(f"vllm:{tmp_path}?preset=gemma4-e4b-sft&strip_thinking_history=off", gemma, step)
    assert own.status == "chat_template" and own.text.startswith("<bos><|turn>user\n")


def test_lfm2_preset_uses_its_chatml_template_and_keeps_thinking(tokenizers, step, tmp_path):
    lfm = tokenizers["lfm2"]
    prompt = rendered(f"vllm:{tmp_path}?preset=lfm25-8b-a1b-sft", lfm, step)
    assert prompt.status == "chat_template" and prompt.chat_template_kwargs == {}
    assert prompt.text.startswith("<|startoftext|><|im_start|>user\n") and prompt.text.endswith("<|im_start|>assistant\n")
    assert prompt.stripped_thinking_blocks == 0 and "<|im_start|>assistant\n<think>" in prompt.text
    assert lfm(prompt.text).input_ids[0] == lfm.bos_token_id  # one <|startoftext|>: the template's
    assert lfm(prompt.text).input_ids[1] != lfm.bos_token_id


@pytest.mark.slow
def test_transformers_engine_applies_an_adapter_made_on_the_multimodal_class(tmp_path):
    """`transformers:QWEN35?lora=ADAPTER`: the adapter names `model.language_model.layers.N` (made on
    `Qwen3_5ForConditionalGeneration`), which `AutoModelForCausalLM`'s `Qwen3_5ForCausalLM` lacks; the engine
    then builds the checkpoint's own class, and the adapter changes the logits (it used to fail to load)."""
    import torch

    from tests.engines.helpers_presets import save_qwen35, save_qwen35_lora

    folder = save_qwen35(tmp_path / "qwen35", positions=2048)
    adapter = save_qwen35_lora(folder, tmp_path / "adapter")
    with_lora = create_engine(f"transformers:{folder}?preset=qwen35-08b-grpo&lora={adapter}&device=cpu")
    plain = create_engine(f"transformers:{folder}?preset=qwen35-2b-sft&device=cpu")
    with_lora.load()
    plain.load()
    assert type(with_lora.model.get_base_model()).__name__ == "Qwen3_5ForConditionalGeneration"
    ids = torch.tensor([plain.tokenizer("ls -la /app").input_ids])
    with torch.inference_mode():
        adapted, base = with_lora.model(input_ids=ids).logits[0, -1], plain.model(input_ids=ids).logits[0, -1]
        with with_lora.model.disable_adapter():
            assert torch.allclose(with_lora.model(input_ids=ids).logits[0, -1], base, atol=1e-4)
    assert not torch.allclose(adapted, base, atol=1e-3)
