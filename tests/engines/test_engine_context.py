"""The one test of whether a prompt fits a context (`prompt_fits`) and the one resolution of an engine's
context length (`context_length`), on real engines built from SPECs (constructed, not loaded)."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from lab.engines import create_engine
from lab.engines.context import SERVER_MIN_NEW_TOKENS, context_length, overlong_error, prompt_fits
from lab.engines.presets import load_engine_defaults, load_presets
from lab.prompts.audit import context_verdict
from lab.prompts.guard import ContextLengthError, check_context, find_offenders


def test_a_prompt_fits_when_prompt_plus_max_tokens_is_at_most_the_context():
    assert prompt_fits(900, 100, 1000)
    assert not prompt_fits(901, 100, 1000)
    assert prompt_fits(1000, 0, 1000) and not prompt_fits(1001, 0, 1000)


@given(n=st.integers(0, 5000), max_tokens=st.integers(0, 3000), length=st.integers(1, 6000))
def test_the_engines_guard_the_replay_guard_and_the_audit_agree_with_prompt_fits(n, max_tokens, length):
    fits = prompt_fits(n, max_tokens, length)
    assert (overlong_error(n, max_tokens, length, None) is None) == fits  # the engines' refusal
    assert (find_offenders(["k"], [n], length, max_tokens) == []) == fits  # the replay's guard
    assert context_verdict(n, length, max_tokens, "reject")[0] == (not fits)  # the audit, an engine that rejects
    # vLLM: refused when it leaves no room for one new token (lab.engines.context.SERVER_MIN_NEW_TOKENS)
    assert context_verdict(n, length, max_tokens, "shorten")[0] == (not prompt_fits(n, SERVER_MIN_NEW_TOKENS, length))
    if not fits:
        with pytest.raises(ContextLengthError):
            check_context(["k"], [n], length, max_tokens)


def test_context_length_given_then_known_then_settings_then_assumed():
    presets = load_presets()
    key = next(k for k, p in presets.items() if p.kind == "vllm" and p.engine.get("max_model_len"))
    preset_len = int(presets[key].engine["max_model_len"])
    default_len = int(load_engine_defaults()["max_model_len"])

    served = create_engine(f"vllm:{key}?max_model_len=16384", presets=presets)  # not started: its flag
    assert served.max_model_len is None and context_length(served) == 16384
    assert context_length(served, 4096) == 4096  # a run's --max-model-len wins

    asked = create_engine("transformers:/nowhere/model?max_model_len=1000")  # what the engine knows
    assert context_length(asked) == 1000 and context_length(asked, assumed=True) == 1000

    on_preset = create_engine(f"transformers:{key}", presets=presets)  # unknown until loaded
    assert context_length(on_preset) is None
    assert context_length(on_preset, assumed=True) == preset_len  # the audit's assumption: its preset's

    reference = create_engine("reference")
    assert context_length(reference) is None
    assert context_length(reference, assumed=True) == default_len  # else the presets file's default
