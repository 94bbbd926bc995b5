"""Issue 53: one fit budget (`prompt_budget`: max_model_len − new tokens) for a generated answer and for a scored
reference, its boundaries pinned: a prompt exactly at the limit fits, one token more does not, counted as the
engine sends it (with the BOS its tokenizer adds, or without when it adds none); a reference through a server
leaves room for the one token its request generates, one through a forward pass does not need to."""
from __future__ import annotations

import pytest

from lab.engines import create_engine
from lab.engines.base import Sampling
from lab.engines.context import (SERVER_MIN_NEW_TOKENS, overlong_error, prompt_budget, prompt_fits,
                                 reference_fit_error)
from lab.engines.reference_likelihood import tokenize_pair
from lab.prompts.audit import context_verdict
from lab.prompts.render import sent_tokens
from tests.prompts.helpers_bos import build_bos_tokenizer

PROMPT = "cd /app && ls -la\nwhoami\n"
REFERENCE = '{"analysis": "look", "plan": "list", "commands": [{"keystrokes": "ls\\n"}]}'
MAX_TOKENS = 8


@pytest.fixture(scope="module")
def tokenizer():
    """A real tokenizer that adds BOS to every text it encodes (as Llama's and Gemma's do)."""
    return build_bos_tokenizer()


def test_the_budget_is_the_context_less_the_new_tokens_and_a_prompt_at_it_fits():
    assert prompt_budget(1000, 100) == 900 and prompt_budget(1000, 0) == 1000
    assert prompt_fits(900, 100, 1000) and overlong_error(900, 100, 1000, None) is None
    refusal = overlong_error(901, 100, 1000, "config")
    assert not prompt_fits(901, 100, 1000) and refusal is not None and "901 prompt tokens" in refusal


@pytest.mark.parametrize("adds_bos", [True, False])
def test_a_prompt_is_counted_with_the_bos_the_engine_adds(tokenizer, adds_bos):
    bare = len(tokenizer(PROMPT, add_special_tokens=False).input_ids)
    sent = sent_tokens(tokenizer, PROMPT, adds_bos)
    assert sent is not None and sent.n_tokens == bare + (1 if adds_bos else 0)
    at_limit = sent.n_tokens + MAX_TOKENS  # the context that holds this prompt, as sent, and max_tokens exactly
    assert prompt_fits(sent.n_tokens, MAX_TOKENS, at_limit)
    assert not prompt_fits(sent.n_tokens, MAX_TOKENS, at_limit - 1)  # one token over
    if adds_bos:  # the bare text would fit one token less: counting it so would let a BOS-added prompt overflow
        assert prompt_fits(bare, MAX_TOKENS, at_limit - 1)

    # the transformers engine's own refusal counts what it sends (its tokenizer given, as after a load)
    flag = "" if adds_bos else "?add_special_tokens=false"
    engine = create_engine(f"transformers:/nowhere/model{flag}")
    engine.tokenizer = tokenizer
    engine.max_model_len = at_limit
    assert engine.refusal(PROMPT, Sampling(max_tokens=MAX_TOKENS)) is None
    engine.max_model_len = at_limit - 1
    refusal = engine.refusal(PROMPT, Sampling(max_tokens=MAX_TOKENS))
    assert refusal is not None and f"{sent.n_tokens:,} prompt tokens" in refusal


@pytest.mark.parametrize("adds_bos", [True, False])
def test_a_reference_fits_a_forward_pass_at_the_limit_and_a_server_one_token_below(tokenizer, adds_bos):
    pair = tokenize_pair(tokenizer, PROMPT, REFERENCE, adds_bos)
    bare = len(tokenizer(PROMPT, add_special_tokens=False).input_ids)
    assert len(pair.prompt_ids) == bare + (1 if adds_bos else 0)  # the ids as sent: the BOS is one of them
    total = len(pair.prompt_ids) + len(pair.ref_ids)

    # a forward pass (transformers) scores every position of the context: prompt + reference exactly at it
    assert reference_fit_error(len(pair.prompt_ids), len(pair.ref_ids), total, 0) is None
    over = reference_fit_error(len(pair.prompt_ids), len(pair.ref_ids), total - 1, 0)
    assert over == f"prompt + reference is {total} tokens, past the context of {total - 1}"

    # a server (vLLM's prompt_logprobs request) must generate one token past them: one less fits
    assert SERVER_MIN_NEW_TOKENS == 1
    assert reference_fit_error(len(pair.prompt_ids), len(pair.ref_ids), total + 1, SERVER_MIN_NEW_TOKENS) is None
    refused = reference_fit_error(len(pair.prompt_ids), len(pair.ref_ids), total, SERVER_MIN_NEW_TOKENS)
    assert refused == f"prompt + reference is {total} tokens (+ 1 generated), past the context of {total}"
    assert reference_fit_error(len(pair.prompt_ids), len(pair.ref_ids), None, SERVER_MIN_NEW_TOKENS) is None


def test_vllm_refuses_a_prompt_that_leaves_no_room_for_one_token_and_shortens_the_rest():
    # vLLM: a prompt of the context's length is refused (it must generate at least one token); one token less is
    # answered with max_tokens cut to the one token left
    assert context_verdict(1000, 1000, MAX_TOKENS, "shorten") == (True, 0)
    assert context_verdict(999, 1000, MAX_TOKENS, "shorten") == (False, 1)
    assert context_verdict(1000 - MAX_TOKENS, 1000, MAX_TOKENS, "shorten") == (False, MAX_TOKENS)
    # an engine that rejects: the prompt plus max_tokens, exactly at the context, fits
    assert context_verdict(1000 - MAX_TOKENS, 1000, MAX_TOKENS, "reject") == (False, MAX_TOKENS)
    assert context_verdict(1001 - MAX_TOKENS, 1000, MAX_TOKENS, "reject") == (True, 0)


def test_the_transformers_engine_scores_a_reference_exactly_at_its_context(tiny_model_dir):
    engine = create_engine(f"transformers:{tiny_model_dir}?device=cpu&dtype=float32")
    engine.load()
    try:
        pair = tokenize_pair(engine.tokenizer, PROMPT, REFERENCE, engine.add_special_tokens)
        total = len(pair.prompt_ids) + len(pair.ref_ids)
        engine.max_model_len = total  # every position used, none generated: scored
        scored = engine.score_reference(PROMPT, REFERENCE)
        assert scored.error is None and len(scored.logprobs) == len(pair.ref_ids)
        engine.max_model_len = total - 1
        refused = engine.score_reference(PROMPT, REFERENCE)
        assert refused.error == f"prompt + reference is {total} tokens, past the context of {total - 1}"
    finally:
        engine.close()


def test_the_openai_engine_asks_a_server_for_a_reference_one_token_below_its_context(tiny_model_dir):
    """Through a real HTTP server speaking the completions API: the ids go as they are, with max_tokens 1; at the
    context itself the lab refuses the reference without sending it (vLLM would refuse it: SERVER_MIN_NEW_TOKENS)."""
    from tests.engines.hostile_openai import HostileAnswer, hostile_openai

    def prompt_logprobs(prompt: list[int]):
        return [None] + [{str(t): {"logprob": -0.5, "decoded_token": "x"}} for t in prompt[1:]]

    answer = HostileAnswer(prompt_logprobs=prompt_logprobs)
    with hostile_openai(str(tiny_model_dir), answer) as url:
        engine = create_engine(f"openai:{url}#{tiny_model_dir}?retries=0")
        engine.load()
        try:
            pair = tokenize_pair(engine.tokenizer, PROMPT, REFERENCE)
            total = len(pair.prompt_ids) + len(pair.ref_ids)
            engine.max_model_len = total + SERVER_MIN_NEW_TOKENS  # room for the one token the request generates
            sent = len(answer.bodies)  # (the load's probe)
            scored = engine.score_reference(PROMPT, REFERENCE)
            assert scored.error is None and scored.logprobs == [-0.5] * len(pair.ref_ids)
            [body] = answer.bodies[sent:]
            assert body["prompt"] == pair.prompt_ids + pair.ref_ids and body["max_tokens"] == SERVER_MIN_NEW_TOKENS
            engine.max_model_len = total
            refused = engine.score_reference(PROMPT, REFERENCE)
            assert refused.error == f"prompt + reference is {total} tokens (+ 1 generated), past the context of {total}"
            assert len(answer.bodies) == sent + 1  # never sent
        finally:
            engine.close()
