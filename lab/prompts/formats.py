"""Model-specific prompt formats (SPEC §3): ChatML, Gemma-4 turn, DeepSeek-V4.

The literal tokens live in assets/templates/formats.yaml; each renderer assembles them.
"""
from __future__ import annotations

from typing import Callable

from lab.prompts.options import ResolvedOptions
from lab.prompts.templates import load_template_data

Renderer = Callable[[list[dict], ResolvedOptions], str]


def _spec(name: str) -> dict:
    return load_template_data("formats")[name]


def render_chatml(messages: list[dict], options: ResolvedOptions) -> str:
    """`<|im_start|>role\\ncontent<|im_end|>\\n` per message (tool→user), then the assistant opener."""
    spec = _spec("chatml")
    parts = [
        spec["message"].format(role=spec["roles"].get(m["role"], m["role"]), content=m["content"]) for m in messages
    ]
    return "".join(parts) + spec["generation"]


def render_gemma4(messages: list[dict], options: ResolvedOptions) -> str:
    """Newest Gemma-4 turn format: `<bos>`, optional thinking system turn, stripped turns, model opener."""
    spec = _spec("gemma4")
    thinking = options.enable_thinking is True
    parts = [spec["bos"]]
    if thinking:
        parts.append(spec["thinking_system"])
    for m in messages:
        parts.append(spec["message"].format(role=spec["roles"].get(m["role"], m["role"]), content=m["content"].strip()))
    parts.append(spec["generation"])
    if not thinking and options.gemma4_empty_thought_channel:
        parts.append(spec["empty_thought_channel"])
    return "".join(parts)


def render_deepseek_v4(messages: list[dict], options: ResolvedOptions) -> str:
    """DeepSeek-V4: BOS, raw system text, `<｜User｜>`/`<｜Assistant｜>` turns, thinking marker."""
    spec = _spec("deepseek_v4")
    parts = [spec["bos"]]
    for m in messages:
        role = m["role"]
        if role == "system":
            parts.append(spec["system"].format(content=m["content"].strip()))
        elif role == "assistant":
            parts.append(spec["assistant"].format(content=m["content"]))
        else:
            parts.append(spec["user"].format(content=m["content"]))
    parts.append(spec["generation"])
    parts.append(spec["thinking_on"] if options.enable_thinking is True else spec["thinking_off"])
    return "".join(parts)


FORMAT_RENDERERS: dict[str, Renderer] = {
    "chatml": render_chatml,
    "gemma4": render_gemma4,
    "deepseek_v4": render_deepseek_v4,
}


def fallback_rules() -> list[dict]:
    """The identity → fallback status rules, first match wins."""
    return list(load_template_data("formats")["fallbacks"])


def status_renderers() -> dict[str, Renderer]:
    """Renderer per template status name (`gemma4_patched` and every model-specific fallback)."""
    registry = {"gemma4_patched": FORMAT_RENDERERS["gemma4"]}
    for rule in fallback_rules():
        registry[rule["status"]] = FORMAT_RENDERERS[rule["format"]]
    return registry


def fallback_status(identity: str) -> str:
    """The fallback status for an identity: the first matching rule, else `raw_fallback`."""
    for rule in fallback_rules():
        if any(s in identity for s in rule["when_identity_contains"]):
            return rule["status"]
    return "raw_fallback"
