"""Prompts: option rules, thinking stripping, chat-template rendering with the harness's
fallbacks, the template audit, the context guard and the output contracts (SPEC §2–§3)."""
from lab.prompts.audit import TemplateAudit, Truncation, audit_template
from lab.prompts.contracts import DEFAULT_CONTRACT, Contract, contract_names, get_contract
from lab.prompts.formats import FORMAT_RENDERERS, fallback_status, status_renderers
from lab.prompts.guard import ContextLengthError, check_context, context_stats
from lab.prompts.history import strip_thinking, strip_thinking_text
from lab.prompts.options import PromptOptions, ResolvedOptions, identity_of, resolve_options
from lab.prompts.render import (
    GEMMA4_TEXT_ONLY_OPTIONS,
    RenderedPrompt,
    count_tokens,
    render_prompt,
    resolved_for,
    template_metadata,
)

__all__ = [
    "DEFAULT_CONTRACT",
    "FORMAT_RENDERERS",
    "GEMMA4_TEXT_ONLY_OPTIONS",
    "Contract",
    "ContextLengthError",
    "PromptOptions",
    "RenderedPrompt",
    "ResolvedOptions",
    "TemplateAudit",
    "Truncation",
    "audit_template",
    "check_context",
    "context_stats",
    "contract_names",
    "count_tokens",
    "fallback_status",
    "get_contract",
    "identity_of",
    "render_prompt",
    "resolve_options",
    "resolved_for",
    "status_renderers",
    "strip_thinking",
    "strip_thinking_text",
    "template_metadata",
]
