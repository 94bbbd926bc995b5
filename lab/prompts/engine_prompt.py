"""A step's prompt exactly as one engine receives it: its contract, its chat template and thinking options, and
the tokens it sends (with the special tokens it adds)."""
from __future__ import annotations

from lab.data.step import Step
from lab.engines.common import EngineBase
from lab.prompts.contracts import get_contract
from lab.prompts.options import PromptOptions
from lab.prompts.render import RenderedPrompt, render_prompt, sent_tokens

# Template status of a contract prompt sent verbatim (not a fallback: the contract asks for it).
CONTRACT_PROMPT_STATUS = "contract_prompt"


def prompt_options_of(engine: EngineBase) -> PromptOptions:
    """The engine's thinking options (from its preset), as PromptOptions."""
    opts = engine.prompt_options
    if isinstance(opts, PromptOptions):
        return opts
    return PromptOptions(**(opts or {}))


def render_for_engine(engine: EngineBase, step: Step) -> RenderedPrompt:
    """Render a step's prompt exactly as `engine` will receive it (contract + chat template)."""
    contract = get_contract(engine.contract)
    messages, fallback_prompt = contract.build_messages(step)
    tokenizer = engine.tokenizer
    if contract.raw_prompt:
        rendered = RenderedPrompt(fallback_prompt, CONTRACT_PROMPT_STATUS)
    else:
        rendered = render_prompt(messages, fallback_prompt, tokenizer, engine.prompt_identity,
                                 prompt_options_of(engine), count=False)
    # one count everywhere: the tokens as the engine sends them, with the special tokens it adds
    sent = sent_tokens(tokenizer, rendered.text, engine_adds_special_tokens(engine))
    rendered.n_tokens = sent.n_tokens if sent else None
    rendered.token_ids = sent.ids if sent else None
    return rendered


def engine_adds_special_tokens(engine: EngineBase) -> bool:
    """Whether `engine` tokenizes a prompt with the tokenizer's special tokens (vLLM's /v1/completions
    and `transformers serve` do; a transformers engine unless `add_special_tokens=false`)."""
    return bool(engine.add_special_tokens)
