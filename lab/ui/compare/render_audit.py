"""HTML of a column's prompt audit: the one-line verdict and the panel's body (template, tokens, budget,
what vLLM or the engine does with a prompt that does not fit, where a cut would fall)."""
from __future__ import annotations

from lab.ui.shell.html_text import esc
from lab.ui.shell.preset_html import preset_changes_html, preset_warning_html
from lab.ui.compare.step_view import AUDIT_DISPLAY_ONLY, AUDIT_ERROR, AUDIT_PENDING, AUDIT_VERBATIM, AuditView


def _chip(text: str, kind: str) -> str:
    return f'<span class="lab-chip lab-chip-{kind}">{esc(text)}</span>'


def audit_summary(audit: AuditView) -> str:
    """The one-line verdict shown on the collapsed audit panel."""
    if audit.state == AUDIT_PENDING:
        return "prompt audit"
    if audit.state == AUDIT_DISPLAY_ONLY:
        return f"prompt audit · {_chip('display-only', 'muted')}"
    if audit.state == AUDIT_ERROR:
        return f"prompt audit · {_chip('audit failed', 'bad')}"
    chips = [_chip(audit.status or "unknown", "warn" if audit.error else "ok")]
    if audit.preset_warning:
        chips.append(_chip("preset of another family", "warn"))
    if audit.state == AUDIT_VERBATIM:
        chips.append(_chip("sent verbatim", "muted"))
    elif audit.matches_own is True and not audit.doubled_bos:
        chips.append(_chip("= own template", "ok"))
    elif audit.matches_own is True:
        chips.append(_chip("= own template, BOS twice", "warn"))
    elif audit.matches_own is False:
        chips.append(_chip("≠ own template", "warn"))
    if audit.fits is True:
        chips.append(_chip("fits", "ok"))
    elif audit.refused:
        chips.append(_chip("refused: prompt too long", "bad"))
    elif audit.fits is False and audit.overlong == "shorten" and audit.allowed_tokens is not None:
        chips.append(_chip(f"answered with ≤ {audit.allowed_tokens:,} of {audit.max_tokens:,} new tokens", "warn"))
    elif audit.fits is False and audit.rejects:
        chips.append(_chip("refused: prompt too long", "bad"))
    elif audit.fits is False:  # an engine that truncates
        chips.append(_chip(f"cut {audit.cut_tokens or 0:,} tokens" if audit.cut_tokens else "does not fit", "bad"))
    return "prompt audit · " + " ".join(chips)


def _tokens(n: int | None) -> str:
    return "unknown (no tokenizer)" if n is None else f"{n:,} tokens"


def _fit_html(audit: AuditView) -> str:
    """Whether the prompt fits the engine's budget, and what the engine does when it does not."""
    if audit.fits is None:
        fit = '<span class="lab-muted">unknown (no tokenizer to count with)</span>'
    elif audit.fits:
        fit = f'<span class="lab-ok">fits</span> · {audit.budget - (audit.n_tokens or 0):,} tokens to spare'
    else:
        fit = f'<span class="lab-bad">does not fit</span> · over by {(audit.n_tokens or 0) - audit.budget:,} tokens'
        if audit.overlong == "shorten" and not audit.refused:
            fit += (f" · vLLM <b>answers</b> it with max_tokens cut to what is left of the context: at most "
                    f"<b>{audit.allowed_tokens or 0:,}</b> of {audit.max_tokens:,} new tokens (finish reason "
                    "<code>length</code> when it runs out)")
        elif audit.overlong == "shorten":
            fit += (" · longer than the whole context by itself: vLLM <b>refuses</b> it (HTTP 400, its message "
                    "is shown in the column); it never truncates")
        elif audit.rejects:
            fit += (" · <b>refused</b> before generation (the prompt is never truncated): the step gets an error "
                    "naming it instead of an answer")
    return fit


def _cut_html(audit: AuditView) -> str:
    """Where a truncation would cut the prompt, and what would be lost ("" when nothing would be)."""
    cut = ""
    if audit.cut_char is not None:
        where = "end" if audit.cut_side == "right" else "start"
        never = "" if audit.overlong == "truncate" else " (this engine never truncates: this is what would have to go)"
        cut = (
            f'<div class="lab-audit-cut"><div class="lab-subhead">truncation would cut at token '
            f"{audit.cut_token:,} · char {audit.cut_char:,} ({audit.cut_side} side): the {where} of the prompt is "
            f"lost — {audit.cut_tokens:,} tokens, {audit.cut_chars:,} chars, {audit.cut_lines:,} lines{never}</div>"
            f'<pre class="lab-pre lab-audit-lost">{esc(chr(10).join(audit.cut_preview))}</pre></div>'
        )
    return cut


def render_audit_body(audit: AuditView) -> str:
    """The audit panel's content: status, the model's own template, token counts, budget, cut."""
    if audit.state == AUDIT_PENDING:
        return '<div class="lab-muted">computing the audit…</div>'
    if audit.state == AUDIT_DISPLAY_ONLY:
        return (
            '<div class="lab-muted">This engine answers from data (reference or stored answers): its prompt is '
            "rendered for display only and no model received it, so there is no template or budget to audit.</div>"
        )
    if audit.state == AUDIT_ERROR:
        return f'<div class="lab-error-text">{esc(audit.error)}</div>'
    rows = []
    if audit.model or audit.preset or audit.flags:
        model = esc(audit.model or "architecture unknown")
        if audit.preset:
            model += f" · preset <code>{esc(audit.preset)}</code>"
            model += preset_warning_html(audit.preset_warning) + preset_changes_html(audit.preset, audit.preset_changes)
        if audit.flags:
            model += f'<div class="lab-subhead">server flags</div><code class="lab-audit-flags">{esc(" ".join(audit.flags))}</code>'
        rows.append(("model", f'<span data-audit-model="1">{model}</span>'))
    rows.append(("status", _chip(audit.status or "unknown", "warn" if audit.error else "ok")
                 + (f'<div class="lab-warn">template error: {esc(audit.error)}</div>' if audit.error else "")))
    if audit.state == AUDIT_VERBATIM:
        rows.append(("own template", "not used: the contract's prompt is sent verbatim (no chat template)"))
    elif audit.matches_own is None:
        rows.append(("own template", f'<span class="lab-muted">unavailable: {esc(audit.own_error)}</span>'))
    elif audit.matches_own:
        rows.append(("own template", '<span class="lab-ok">identical</span> to the model\'s own chat template '
                                     "(no lab options or patches)"))
    else:
        rows.append((
            "own template",
            f'<span class="lab-warn">differs</span> from the model\'s own chat template at char '
            f"{audit.first_difference:,}"
            f'<div class="lab-subhead">lab prompt there</div><pre class="lab-pre lab-audit-snip">{esc(audit.lab_snippet)}</pre>'
            f'<div class="lab-subhead">own template there</div><pre class="lab-pre lab-audit-snip">{esc(audit.own_snippet)}</pre>',
        ))
    if audit.doubled_bos:
        rows.append(("BOS", '<span class="lab-warn" data-doubled-bos="1">twice</span>: the chat template already '
                            "starts with the BOS token and the engine adds another, so the model sees "
                            "<code>[BOS, BOS, …]</code> (as the harness does with vLLM, SPEC §14). Answers can "
                            "differ from a single BOS; a transformers engine sends one with "
                            "<code>?add_special_tokens=false</code>."))
    added = (f", {audit.special_added:,} of them special tokens the engine adds"
             if audit.special_added else "")
    tokens = (f"as the engine sends it: <b>{esc(_tokens(audit.n_tokens))}</b> ({audit.n_chars:,} chars{added}; "
              "the count the whole lab shows)")
    if audit.state != AUDIT_VERBATIM and audit.own_n_tokens is not None:
        tokens += f" · own template: <b>{audit.own_n_tokens:,} tokens</b>"
    rows.append(("tokens", tokens))
    rows.append(("budget", f"max_model_len {audit.max_model_len:,} − max_tokens {audit.max_tokens:,} = "
                           f"<b>{audit.budget:,}</b> prompt tokens"))
    rows.append(("fits", _fit_html(audit)))
    body = "".join(f'<tr><th>{k}</th><td><div class="lab-cell">{v}</div></td></tr>' for k, v in rows)
    return f'<table class="lab-kv lab-audit-kv">{body}</table>{_cut_html(audit)}'


def render_audit_panel(audit: AuditView | None, engine_name: str, step_key: str) -> str:
    """The collapsible "prompt audit" panel of one column (a pending one is filled when opened)."""
    if audit is None:
        return ""
    return (
        f'<details class="lab-details lab-audit" data-audit="{esc(audit.state)}" data-audit-engine="{esc(engine_name)}" '
        f'data-audit-step="{esc(step_key)}"><summary>{audit_summary(audit)}</summary>'
        f'<div class="lab-audit-body">{render_audit_body(audit)}</div></details>'
    )
