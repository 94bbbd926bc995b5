"""Prompt rendering (SPEC §2–§3): options, thinking stripping, formats, fallbacks, metadata,
context guard and template audit, with tiny tokenizers built here."""
from __future__ import annotations

import pytest

from lab.prompts import (
    ContextLengthError,
    PromptOptions,
    audit_template,
    check_context,
    context_stats,
    render_prompt,
    resolve_options,
    strip_thinking,
    template_metadata,
)
from lab.prompts.render import GEMMA4_TEXT_ONLY_OPTIONS

TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
    "{% if enable_thinking is defined %}[thinking={{ enable_thinking }}]{% endif %}"
)
MESSAGES = [
    {"role": "system", "content": " sys "},
    {"role": "user", "content": "run ls please"},
    {"role": "assistant", "content": "<think>\nplan {x}\n</think>\n\n{\"commands\": []}"},
    {"role": "tool", "content": "file a b c"},
]


def _tokenizer(template: str | None, name: str):
    """A whitespace word-level fast tokenizer; every unknown word is one [UNK] token."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({"[UNK]": 0, "ls": 1, "run": 2}, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", name_or_path=name)
    tokenizer.chat_template = template
    return tokenizer


@pytest.fixture(scope="module")
def templated():
    return _tokenizer(TEMPLATE, "tiny/plain-model")


@pytest.fixture(scope="module")
def bare():
    return _tokenizer(None, "tiny/no-template")


@pytest.mark.parametrize(
    "options, identity, expected",
    [
        (PromptOptions(), "qwen/qwen3.5-2b", (None, False, False, False)),
        (PromptOptions(), "google/gemma-4-e4b-it", (False, True, False, True)),
        (PromptOptions(), "google/gemma-4-26b-it", (False, True, True, True)),
        (PromptOptions(), "org/gemma-4-31b-sft", (False, True, True, True)),
        (PromptOptions("ON", "no", "0"), "google/gemma-4-e4b-it", (True, False, False, False)),
        (PromptOptions("enabled", "yes", "off"), "qwen/qwen3.5-2b", (True, True, False, False)),
        (PromptOptions("Disabled", "auto", "1"), "google/gemma-4-e4b-it", (False, True, True, True)),
        (PromptOptions("maybe", "off", "on"), "google/gemma-4-e4b-it", (False, False, True, True)),
    ],
)
def test_auto_rules(options, identity, expected):
    resolved = resolve_options(options, identity)
    got = (resolved.enable_thinking, resolved.strip_thinking_history, resolved.gemma4_empty_thought_channel,
           resolved.use_gemma4_patched_template)
    assert got == expected
    assert resolved.chat_template_kwargs == ({} if expected[0] is None else {"enable_thinking": expected[0]})


def test_strip_thinking_assistant_only():
    messages = [
        {"role": "user", "content": "  <think>keep</think> user"},
        {"role": "assistant", "content": "<think>a\nb</think>  \n<|channel>thought\nc\n<channel|>\n\n x <think>y</think>z"},
        {"role": "assistant", "content": "   nothing to strip"},
    ]
    out, removed = strip_thinking(messages)
    assert removed == 3
    assert out[0] == messages[0]
    assert out[1]["content"] == "x z"
    assert out[2]["content"] == "nothing to strip"  # left-strip happens even when nothing is removed
    assert messages[1]["content"].startswith("<think>")  # input untouched


def test_chat_template_with_kwargs_and_token_count(templated):
    r = render_prompt(MESSAGES, "RAW", templated, "Qwen/Qwen3.5-2B", PromptOptions(thinking_mode="off"))
    assert r.status == "chat_template" and r.error is None
    assert r.text.endswith("<assistant>[thinking=False]")
    assert "<tool>file a b c</tool>" in r.text and r.chat_template_kwargs == {"enable_thinking": False}
    assert r.n_tokens == len(r.text.split()) == len(templated(r.text, add_special_tokens=False).input_ids)
    auto = render_prompt(MESSAGES, "RAW", templated, "Qwen/Qwen3.5-2B", PromptOptions())
    assert auto.text.endswith("<assistant>") and auto.chat_template_kwargs == {}
    assert auto.stripped_thinking_blocks == 0 and "<think>" in auto.text


def test_gemma4_patched_turn_format(templated):
    r = render_prompt(MESSAGES, "RAW", templated, "google/gemma-4-26b-it", PromptOptions())
    assert r.status == "gemma4_patched" and r.error is None and r.stripped_thinking_blocks == 1
    assert r.text == (
        "<bos><|turn>system\nsys<turn|>\n<|turn>user\nrun ls please<turn|>\n"
        '<|turn>model\n{"commands": []}<turn|>\n<|turn>user\nfile a b c<turn|>\n'
        "<|turn>model\n<|channel>thought\n<channel|>"
    )
    on = render_prompt(MESSAGES, "RAW", None, "google/gemma-4-E4B-it", PromptOptions(thinking_mode="on"))
    assert on.status == "gemma4_patched" and on.n_tokens is None
    assert on.text.startswith("<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>system\nsys<turn|>\n")
    assert on.text.endswith("<|turn>model\n")


def test_fallback_chain(bare):
    plain = PromptOptions(strip_thinking_history="off")
    gemma = render_prompt(MESSAGES, "RAW", bare, "google/gemma-4-E4B-it", plain)
    assert gemma.status == "gemma4_fallback" and gemma.error
    assert gemma.text.endswith("<|turn>model\n") and "<think>" in gemma.text
    ds = render_prompt(MESSAGES, "RAW", bare, "deepseek-ai/DeepSeek-V4-Flash", PromptOptions())
    assert ds.status == "deepseek_v4_fallback"
    assert ds.text == (
        "<｜begin▁of▁sentence｜>sys<｜User｜>run ls please<｜Assistant｜>" + MESSAGES[2]["content"]
        + "<｜end▁of▁sentence｜><｜User｜>file a b c<｜Assistant｜></think>"
    )
    ds_on = render_prompt(MESSAGES, "RAW", None, "x/deepseek_v4", PromptOptions(thinking_mode="on"))
    assert ds_on.text.endswith("<｜Assistant｜><think>") and ds_on.error == "no tokenizer"
    chatml = render_prompt(MESSAGES, "RAW", None, "LiquidAI/LFM2.5-8B-A1B", PromptOptions())
    assert chatml.status == "chatml_fallback" and chatml.error == "no tokenizer"
    assert chatml.text == (
        "<|im_start|>system\n sys <|im_end|>\n<|im_start|>user\nrun ls please<|im_end|>\n"
        f"<|im_start|>assistant\n{MESSAGES[2]['content']}<|im_end|>\n<|im_start|>user\nfile a b c<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    raw = render_prompt(MESSAGES, "RAW PROMPT", bare, "acme/other-model", PromptOptions())
    assert raw.status == "raw_fallback" and raw.text == "RAW PROMPT" and raw.n_tokens == 2
    assert "chat template" in raw.error.lower() or "chat_template" in raw.error.lower()


def test_identity_includes_tokenizer_name(bare):
    named = _tokenizer(None, "/models/qwen3.5-2b-sft")
    assert render_prompt(MESSAGES, "RAW", named, "/ckpt/checkpoint-600", PromptOptions()).status == "chatml_fallback"


def test_template_metadata(templated, bare):
    ok = render_prompt(MESSAGES, "RAW", templated, "m", PromptOptions())
    patched = render_prompt(MESSAGES, "RAW", None, "google/gemma-4-E4B-it", PromptOptions())
    raw_a = render_prompt(MESSAGES, "RAW", bare, "m", PromptOptions())
    raw_b = render_prompt(MESSAGES, "RAW", None, "m", PromptOptions())
    meta = template_metadata([ok, ok], PromptOptions())
    assert meta["template_status"] == "chat_template" and meta["rank_eligible"] is True
    assert meta["template_status_counts"] == {"chat_template": 2} and meta["raw_fallback_errors"] == []
    assert meta["prompt_options"] == {"thinking_mode": "auto", "strip_thinking_history": "auto",
                                      "gemma4_empty_thought_channel": "auto"}
    mixed = template_metadata([ok, patched, patched])
    assert mixed["template_status"] == "model_specific_or_mixed" and mixed["rank_eligible"] is True
    assert mixed["stripped_thinking_blocks"] == 2
    raw = template_metadata([ok, raw_b, raw_a, raw_b])
    assert raw["template_status"] == "mixed_or_raw" and raw["rank_eligible"] is False
    assert raw["raw_fallback_errors"] == sorted({raw_a.error, "no tokenizer"})
    assert raw["template_status_counts"] == {"chat_template": 1, "raw_fallback": 3}
    text_only = template_metadata([patched], GEMMA4_TEXT_ONLY_OPTIONS, gemma4_text_only=True)
    assert text_only["template_status"] == "gemma4_text_only_patched_turn" and text_only["rank_eligible"]


def test_context_stats_percentiles():
    lengths = list(range(100, 0, -1))  # 1..100 unsorted
    stats = context_stats(lengths, 4096, 1024, messages_rows=97)
    assert (stats["min"], stats["max"], stats["p50"], stats["p95"], stats["p99"]) == (1, 100, 51, 95, 99)
    assert stats["row_count"] == 100 and stats["messages_rows"] == 97
    assert (stats["max_model_len"], stats["max_tokens"]) == (4096, 1024)
    small = context_stats([7, 3, 5], 100, 10, 3)
    assert (small["p50"], small["p95"], small["p99"]) == (5, 5, 5)  # s[1], s[int(2.85)-1], s[int(2.97)-1]


def test_check_context_lists_offenders():
    keys = [f"task-{i:03d}/0" for i in range(15)]
    lengths = [3100 if i % 2 == 0 else 100 for i in range(15)]
    assert check_context(keys[1::2], lengths[1::2], 4096, 1024)["max"] == 100
    with pytest.raises(ContextLengthError) as info:
        check_context(keys, lengths, 4096, 1024)
    err = info.value
    assert err.total == 8 and len(err.offenders) == 8 and err.offenders[0] == ("task-000/0", 3100)
    assert "task-014/0 (3100 tokens)" in str(err)
    many = [f"s/{i}" for i in range(12)]
    with pytest.raises(ContextLengthError, match="and 2 more") as info:
        check_context(many, [5000] * 12, 4096, 1024)
    assert len(info.value.offenders) == 10


def test_audit_template(templated, bare):
    msgs = [{"role": "user", "content": "run ls " + " ".join(f"w{i}" for i in range(20))},
            {"role": "tool", "content": "line one\nline two\nlast words"}]
    audit = audit_template(msgs, "RAW", templated, "qwen/x", PromptOptions(), max_model_len=30, max_tokens=10)
    assert audit.rendered.status == "chat_template" and audit.matches_own is True
    assert audit.own_n_tokens == audit.rendered.n_tokens and audit.fits is False
    cut = audit.truncation
    assert cut.budget == 20 and cut.n_tokens == audit.rendered.n_tokens and cut.cut_tokens == cut.n_tokens - 20
    kept = audit.rendered.text[: cut.cut_char]
    assert len(templated(kept, add_special_tokens=False).input_ids) == 20
    assert audit.rendered.text[cut.cut_char :].startswith(cut.cut_preview[0])
    assert cut.cut_preview[-2:] == ["last words</tool>", "<assistant>"] and cut.cut_line_count == 5
    thinking = audit_template(msgs, "RAW", templated, "qwen/x", PromptOptions(thinking_mode="on"), 4096, 1024)
    assert thinking.matches_own is False and thinking.fits is True and thinking.truncation is None
    assert thinking.first_difference == len(thinking.own_text)
    missing = audit_template(msgs, "RAW", bare, "acme/m", PromptOptions(), 4096, 1024)
    assert missing.own_text is None and missing.own_error and missing.rendered.status == "raw_fallback"
