"""Render a step's messages into the exact prompt text a model receives (SPEC §3)."""
from __future__ import annotations

import weakref
from array import array
from collections import Counter
from dataclasses import dataclass, field, fields

from lab.prompts.formats import fallback_status, status_renderers
from lab.prompts.history import strip_thinking
from lab.prompts.options import PromptOptions, ResolvedOptions, identity_of, resolve_options

NO_TOKENIZER = "no tokenizer"
RAW_FALLBACK = "raw_fallback"
CHAT_TEMPLATE = "chat_template"
GEMMA4_TEXT_ONLY_STATUS = "gemma4_text_only_patched_turn"


@dataclass
class RenderedPrompt:
    """One rendered prompt: its text, how it was made (`status`) and why a fallback was used."""

    text: str
    status: str
    error: str | None = None
    n_tokens: int | None = None
    stripped_thinking_blocks: int = 0
    chat_template_kwargs: dict = field(default_factory=dict)
    # the token ids of `text` as the engine sends them (SentTokens.ids), where the lab tokenized it: a
    # managed vLLM server gets these instead of the text (it would tokenize the same text again)
    token_ids: array | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "token_ids"} | {
            "chat_template_kwargs": dict(self.chat_template_kwargs)}


def count_tokens(tokenizer, text: str) -> int | None:
    """Token count without special tokens (the harness's context guard), None without a tokenizer."""
    if tokenizer is None:
        return None
    return len(tokenizer(text, add_special_tokens=False).input_ids)


@dataclass(frozen=True)
class SentTokens:
    """A prompt's token count as the engine sends it (with the special tokens it adds), how many of
    those it adds, and whether the text already starts with the BOS token it adds again."""

    n_tokens: int
    added: int
    doubled_bos: bool
    ids: array = field(default_factory=lambda: array("i"), repr=False, compare=False)  # the ids themselves


def sent_tokens(tokenizer, text: str, add_special_tokens: bool = True) -> SentTokens | None:
    """The one count the lab shows for a prompt: its tokens as the engine tokenizes it (vLLM and the
    transformers engines add the tokenizer's special tokens unless told not to). A chat template that
    starts with `<bos>` on a tokenizer that adds BOS gives `[bos, bos, …]`: `doubled_bos`."""
    if tokenizer is None:
        return None
    ids = list(tokenizer(text, add_special_tokens=add_special_tokens).input_ids)
    added = special_tokens_added(tokenizer) if add_special_tokens else 0
    bos = getattr(tokenizer, "bos_token_id", None)
    doubled = add_special_tokens and bos is not None and len(ids) >= 2 and ids[0] == ids[1] == bos
    return SentTokens(len(ids), added, bool(doubled), array("i", ids))


_ADDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def special_tokens_added(tokenizer) -> int:
    """How many tokens the tokenizer's special-token rule adds to a text (its fixed BOS/EOS): the same for
    every text, so counted once per tokenizer, on a probe, and a prompt is tokenized once, not twice."""
    try:
        return _ADDED[tokenizer]
    except (KeyError, TypeError):
        pass
    probe = "ls -la"
    added = (len(tokenizer(probe, add_special_tokens=True).input_ids)
             - len(tokenizer(probe, add_special_tokens=False).input_ids))
    try:
        _ADDED[tokenizer] = added
    except TypeError:  # a tokenizer that takes no weak reference: counted each time
        pass
    return added


def _error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _chat_template(tokenizer, messages: list[dict], kwargs: dict) -> str:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)
    if not isinstance(text, str):
        raise TypeError(f"apply_chat_template returned {type(text).__name__}, not text")
    return text


def render_prompt(
    messages: list[dict],
    fallback_prompt: str,
    tokenizer=None,
    model_id: str | None = None,
    options: PromptOptions | None = None,
    tokenizer_path: str | None = None,
    count: bool = True,
) -> RenderedPrompt:
    """Render in the harness's order: Gemma-4 patched turn, the tokenizer's chat template,
    then the identity-based fallback chain (Gemma-4 / DeepSeek-V4 / ChatML / raw prompt).

    Without a tokenizer the chat template step fails with the error "no tokenizer".
    """
    identity = identity_of(model_id, tokenizer, tokenizer_path)
    resolved = resolve_options(options, identity)
    messages = [dict(m) for m in messages]
    stripped = 0
    if resolved.strip_thinking_history:
        messages, stripped = strip_thinking(messages)
    renderers = status_renderers()
    error: str | None = None
    if resolved.use_gemma4_patched_template:
        status, text = "gemma4_patched", renderers["gemma4_patched"](messages, resolved)
    else:
        try:
            if tokenizer is None:
                raise LookupError(NO_TOKENIZER)
            status, text = CHAT_TEMPLATE, _chat_template(tokenizer, messages, resolved.chat_template_kwargs)
        except Exception as exc:  # any template failure moves on to the fallback chain
            error = _error_text(exc)
            status = fallback_status(identity)
            text = fallback_prompt if status == RAW_FALLBACK else renderers[status](messages, resolved)
    return RenderedPrompt(
        text=text,
        status=status,
        error=error,
        n_tokens=count_tokens(tokenizer, text) if count else None,
        stripped_thinking_blocks=stripped,
        chat_template_kwargs=dict(resolved.chat_template_kwargs),
    )


def resolved_for(model_id: str | None, tokenizer=None, options: PromptOptions | None = None,
                 tokenizer_path: str | None = None) -> ResolvedOptions:
    """The resolved options a model would get (for engines and the UI)."""
    return resolve_options(options, identity_of(model_id, tokenizer, tokenizer_path))


def template_metadata(rendered: list[RenderedPrompt], options: PromptOptions | None = None,
                      gemma4_text_only: bool = False) -> dict:
    """The run-level `prompt_template` block of a result file (SPEC §3)."""
    options = options or PromptOptions()
    statuses = [r.status for r in rendered]
    counts = Counter(statuses)
    if statuses and all(s == CHAT_TEMPLATE for s in statuses):
        overall = CHAT_TEMPLATE
    elif RAW_FALLBACK in counts:
        overall = "mixed_or_raw"
    else:
        overall = "model_specific_or_mixed"
    errors = sorted({r.error for r in rendered if r.status == RAW_FALLBACK and r.error})[:3]
    kwargs = next((r.chat_template_kwargs for r in rendered), {})
    meta = {
        "template_status_counts": dict(counts),
        "template_status": overall,
        "rank_eligible": RAW_FALLBACK not in counts,
        "raw_fallback_errors": errors,
        "chat_template_kwargs": dict(kwargs),
        "prompt_options": options.to_dict(),
        "stripped_thinking_blocks": sum(r.stripped_thinking_blocks for r in rendered),
    }
    if gemma4_text_only:  # the Gemma-4 text-only evaluator overwrites these two (SPEC §3)
        meta["template_status"], meta["rank_eligible"] = GEMMA4_TEXT_ONLY_STATUS, True
    return meta


GEMMA4_TEXT_ONLY_OPTIONS = PromptOptions(thinking_mode="off", strip_thinking_history="on",
                                         gemma4_empty_thought_channel="off")
