"""The prompt audit panel of an engine column: what the engine's template makes of the step, computed on request."""
from __future__ import annotations

import json

from lab.data.step import Step
from lab.engines.common import EngineBase
from lab.engines.context import context_length, prompt_budget, prompt_fits
from lab.prompts.audit import TemplateAudit, audit_template, truncation_point
from lab.prompts.contracts import get_contract
from lab.prompts.engine_prompt import engine_adds_special_tokens, prompt_options_of, render_for_engine
from lab.ui.shell.model_text import model_facts_text
from lab.workspace import EngineEntry, LabContext
from lab.ui.compare.render_audit import audit_summary, render_audit_body
from lab.ui.compare.step_view import AUDIT_DISPLAY_ONLY, AUDIT_ERROR, AUDIT_PENDING, AuditView, audit_view_from


def compute_audit(engine: EngineBase, step: Step) -> AuditView:
    """The template audit of `engine`'s prompt for `step` (lab.prompts.audit), shaped for the UI;
    a raw-prompt contract is audited as sent verbatim (token count and budget only)."""
    contract = get_contract(engine.contract)
    tokenizer = engine.tokenizer
    max_model_len = context_length(engine, assumed=True)
    max_tokens = int(engine.default_sampling.max_tokens)
    overlong = engine.overlong_prompt  # servers reject or shorten, they never cut
    if contract.raw_prompt:
        rendered = render_for_engine(engine, step)
        budget = prompt_budget(max_model_len, max_tokens)
        cut = truncation_point(tokenizer, rendered.text, budget, getattr(tokenizer, "truncation_side", None)
                               or "right") if tokenizer is not None else None
        fits = None if rendered.n_tokens is None else prompt_fits(rendered.n_tokens, max_tokens, max_model_len)
        audit = TemplateAudit(rendered, None, None, None, None, None, max_model_len, max_tokens, fits, cut, overlong)
        return audit_view_from(audit, verbatim=True)
    messages, fallback_prompt = contract.build_messages(step)
    audit = audit_template(messages, fallback_prompt, tokenizer, engine.model_id or "",
                           prompt_options_of(engine), max_model_len, max_tokens, overlong=overlong,
                           add_special_tokens=engine_adds_special_tokens(engine))
    return audit_view_from(audit)


def column_audit(ctx: LabContext, entry: EngineEntry, step: Step, compute: bool = False) -> AuditView | None:
    """A column's prompt audit: None before the engine is ready, display-only for engines that
    answer from data, the cached audit, else pending (or computed and cached when `compute`)."""
    if entry.state != "ready" or entry.engine is None:
        return None
    if entry.answers_from_data:
        return AuditView(AUDIT_DISPLAY_ONLY)
    cached = ctx.audits.get((entry.name, step.key))
    if cached is not None or not compute:
        return cached or AuditView(AUDIT_PENDING)
    try:
        audit = compute_audit(entry.engine, step)
    except Exception as exc:  # noqa: BLE001 - shown in the panel; not cached, so reopening retries
        return AuditView(AUDIT_ERROR, error=f"{type(exc).__name__}: {exc}")
    audit.model, audit.preset, audit.flags = model_facts_text(entry), entry.preset, entry.flags
    audit.preset_changes, audit.preset_warning = entry.preset_changes, entry.preset_warning
    ctx.audits.put((entry.name, step.key), audit)
    return audit


def column_audits(ctx: LabContext, entries: list[EngineEntry], step: Step) -> dict[str, AuditView]:
    """Engine name -> its audit panel state for `step` (nothing is computed here)."""
    audits = {e.name: column_audit(ctx, e, step) for e in entries}
    return {name: audit for name, audit in audits.items() if audit is not None}


def audit_answer(ctx: LabContext, request: str) -> str:
    """The audit the browser asked for (JSON [engine name, step key]) as JSON [engine, step, state,
    summary html, body html], computing it on first request; '' for a malformed request."""
    try:
        parsed = json.loads(request or "") if isinstance(request, str) else None
    except (ValueError, TypeError, RecursionError):  # 50,000 `[` nest past Python's limit
        parsed = None
    if not (isinstance(parsed, list) and len(parsed) == 2 and all(isinstance(p, str) for p in parsed)):
        return ""
    name, key = parsed
    step = ctx.replay.by_key.get(key) if ctx.replay else None
    entry = next((e for e in ctx.engine_entries() if e.name == name), None)
    if step is None or entry is None:
        audit = AuditView(AUDIT_ERROR, error=f"engine '{name}' or step '{key}' is no longer available")
    else:
        audit = column_audit(ctx, entry, step, compute=True) or AuditView(
            AUDIT_ERROR, error=f"engine '{name}' is not ready ({entry.state})")
    return json.dumps([name, key, audit.state, audit_summary(audit), render_audit_body(audit)])
