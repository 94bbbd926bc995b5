"""Template audit for the UI: the lab's prompt vs the model's own template, and truncation."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from lab.engines.context import SERVER_MIN_NEW_TOKENS, prompt_budget, prompt_fits
from lab.prompts.options import PromptOptions
from lab.prompts.render import RenderedPrompt, _chat_template, render_prompt, sent_tokens

PREVIEW_LINES = 5


@dataclass
class Truncation:
    """Where cutting the prompt to `budget` tokens would cut (`side` is the side removed)."""

    budget: int
    n_tokens: int
    cut_tokens: int
    side: str
    cut_char: int
    cut_chars: int
    cut_line_count: int
    cut_preview: list[str] = field(default_factory=list)


@dataclass
class TemplateAudit:
    """The rendered prompt, the model's own chat template output, and the context budget."""

    rendered: RenderedPrompt
    own_text: str | None
    own_error: str | None
    own_n_tokens: int | None
    matches_own: bool | None
    first_difference: int | None
    max_model_len: int
    max_tokens: int
    fits: bool | None
    truncation: Truncation | None
    overlong: str = "truncate"  # what the engine does with a prompt over budget: truncate | reject | shorten
    refused: bool | None = None  # the engine (or the lab, for it) refuses this prompt: no answer
    allowed_tokens: int | None = None  # new tokens the engine will generate at most (max_tokens or fewer)
    special_added: int | None = None  # special tokens the engine adds to `rendered.n_tokens`'s text (BOS …)
    doubled_bos: bool = False  # the template starts with BOS and the engine adds another: [bos, bos, …]

    def __post_init__(self) -> None:
        if self.refused is None and self.allowed_tokens is None:
            self.refused, self.allowed_tokens = context_verdict(
                self.rendered.n_tokens, self.max_model_len, self.max_tokens, self.overlong)

    def to_dict(self) -> dict:
        return asdict(self)


def context_verdict(n_tokens: int | None, max_model_len: int, max_tokens: int, overlong: str) -> tuple[bool | None, int | None]:
    """(refused, new tokens allowed) for a prompt of `n_tokens` on an engine whose context is
    `max_model_len`, by what the engine does with an over-long prompt:

    - `shorten` (vLLM): a prompt that leaves no room for one new token (`SERVER_MIN_NEW_TOKENS`: one of the
      context's length or longer) is refused (HTTP 400); one that fits but leaves fewer than `max_tokens` is
      answered with `max_tokens` cut to what is left;
    - `reject` (the lab's guard in front of transformers, in-process or served): refused as soon
      as prompt + `max_tokens` exceeds the context;
    - `truncate`: the prompt is cut to the budget, `max_tokens` kept.
    Unknown length: (None, None)."""
    if n_tokens is None:
        return None, None
    if overlong == "shorten":
        if not prompt_fits(n_tokens, SERVER_MIN_NEW_TOKENS, max_model_len):
            return True, 0
        return False, max(0, min(max_tokens, max_model_len - n_tokens))
    if overlong == "reject" and not prompt_fits(n_tokens, max_tokens, max_model_len):
        return True, 0
    return False, max_tokens


def first_difference(a: str, b: str) -> int | None:
    """Index of the first differing character, None when equal."""
    if a == b:
        return None
    limit = min(len(a), len(b))
    return next((i for i in range(limit) if a[i] != b[i]), limit)


def token_char_offsets(tokenizer, text: str) -> list[int]:
    """Start character of every token (without special tokens)."""
    try:
        encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [start for start, _ in encoding["offset_mapping"]]
    except (NotImplementedError, KeyError, TypeError, ValueError):
        ids = tokenizer(text, add_special_tokens=False).input_ids
        return [len(tokenizer.decode(ids[:i])) for i in range(len(ids))]


def truncation_point(tokenizer, text: str, budget: int, side: str = "right") -> Truncation | None:
    """Where truncating `text` to `budget` tokens would cut; None when it fits."""
    starts = token_char_offsets(tokenizer, text)
    n = len(starts)
    if n <= budget:
        return None
    keep = max(budget, 0)
    if side == "left":
        cut_char = starts[n - keep] if keep else len(text)
        removed = text[:cut_char]
        preview = removed.splitlines()[-PREVIEW_LINES:]
    else:
        cut_char = starts[keep]
        removed = text[cut_char:]
        preview = removed.splitlines()[:PREVIEW_LINES]
    return Truncation(
        budget=budget,
        n_tokens=n,
        cut_tokens=n - keep,
        side=side,
        cut_char=cut_char,
        cut_chars=len(removed),
        cut_line_count=len(removed.splitlines()),
        cut_preview=preview,
    )


def audit_template(
    messages: list[dict],
    fallback_prompt: str,
    tokenizer,
    model_id: str | None,
    options: PromptOptions | None,
    max_model_len: int,
    max_tokens: int,
    tokenizer_path: str | None = None,
    overlong: str = "truncate",
    add_special_tokens: bool = True,
) -> TemplateAudit:
    """Compare the lab's rendering with the tokenizer's own template (no lab options or patches)
    and say where a cut at `max_model_len - max_tokens` tokens would fall (what would have to go; an
    engine that refuses or shortens instead, `overlong` "reject" or "shorten", never cuts: see
    `context_verdict` for what it does). Token counts are as the engine sends the prompt: with the
    special tokens it adds (`add_special_tokens`), a doubled BOS flagged."""
    rendered = render_prompt(messages, fallback_prompt, tokenizer, model_id, options, tokenizer_path, count=False)
    sent = sent_tokens(tokenizer, rendered.text, add_special_tokens)  # the one count: as the engine sends it
    rendered.n_tokens = sent.n_tokens if sent else None
    own_text = own_error = None
    if tokenizer is None:
        own_error = "no tokenizer"
    else:
        try:
            own_text = _chat_template(tokenizer, [dict(m) for m in messages], {})
        except Exception as exc:  # a missing or broken template is what the audit reports
            own_error = str(exc) or type(exc).__name__
    budget = prompt_budget(max_model_len, max_tokens)
    truncation = None
    if tokenizer is not None:  # where a cut to the budget would fall, also for engines that refuse
        side = getattr(tokenizer, "truncation_side", "right") or "right"
        truncation = truncation_point(tokenizer, rendered.text, budget, side)
    return TemplateAudit(
        rendered=rendered,
        own_text=own_text,
        own_error=own_error,
        own_n_tokens=(sent_tokens(tokenizer, own_text, add_special_tokens).n_tokens
                      if own_text is not None and tokenizer is not None else None),
        matches_own=None if own_text is None else own_text == rendered.text,
        first_difference=None if own_text is None else first_difference(rendered.text, own_text),
        max_model_len=max_model_len,
        max_tokens=max_tokens,
        fits=None if rendered.n_tokens is None else prompt_fits(rendered.n_tokens, max_tokens, max_model_len),
        truncation=truncation,
        overlong=overlong,
        special_added=sent.added if sent else None,
        doubled_bos=bool(sent and sent.doubled_bos),
    )
