"""Evaluator-side prompt options and their `auto` rules (SPEC §3)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from lab.prompts.templates import load_template_data


@dataclass(frozen=True)
class PromptOptions:
    """The three CLI strings of the harness: on/off sets, anything else means auto."""

    thinking_mode: str = "auto"
    strip_thinking_history: str = "auto"
    gemma4_empty_thought_channel: str = "auto"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ResolvedOptions:
    """Options after the auto rules; `enable_thinking=None` means pass no kwarg."""

    enable_thinking: bool | None
    strip_thinking_history: bool
    gemma4_empty_thought_channel: bool
    use_gemma4_patched_template: bool
    is_gemma4: bool = False
    chat_template_kwargs: dict = field(default_factory=dict)


def switch_value(value: object) -> bool | None:
    """True for the on-set, False for the off-set, None (auto) for anything else."""
    text = str(value).strip().lower()
    values = load_template_data("formats")["option_values"]
    if text in values["on"]:
        return True
    if text in values["off"]:
        return False
    return None


def identity_of(model_id: str | None, tokenizer=None, tokenizer_path: str | None = None) -> str:
    """Lower-cased concatenation of model id, tokenizer path and `tokenizer.name_or_path`."""
    parts = [model_id or "", tokenizer_path or "", str(getattr(tokenizer, "name_or_path", "") or "")]
    return "".join(parts).lower()


def identity_has(identity: str, marker: str) -> bool:
    """Whether the identity contains any substring listed under `identity.<marker>`."""
    return any(s in identity for s in load_template_data("formats")["identity"][marker])


def resolve_options(options: PromptOptions | None, identity: str) -> ResolvedOptions:
    """Apply SPEC §3's rules to the options for a model identity (already lower-cased)."""
    options = options or PromptOptions()
    gemma4 = identity_has(identity, "gemma4")
    thinking = switch_value(options.thinking_mode)
    enable_thinking = thinking if thinking is not None else (False if gemma4 else None)
    strip = switch_value(options.strip_thinking_history)
    strip = gemma4 if strip is None else strip
    channel = switch_value(options.gemma4_empty_thought_channel)
    if channel is None:
        channel = gemma4 and identity_has(identity, "gemma4_empty_channel")
    kwargs = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    return ResolvedOptions(
        enable_thinking=enable_thinking,
        strip_thinking_history=strip,
        gemma4_empty_thought_channel=channel,
        use_gemma4_patched_template=gemma4 and (strip or channel),
        is_gemma4=gemma4,
        chat_template_kwargs=kwargs,
    )
