"""HTML for the Compare view: step context, engine columns, unit diffs, parsed actions.

Model output and replay text are untrusted: every piece of text goes through `esc` (html.escape).
Long texts are clipped unless `full=True` (the "show all" switch) so a step never ships megabytes.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from lab.data import StepContext
from lab.prompts.contracts import initial_screen
from lab.scoring.action import ParsedAction
from lab.ui.compare.confidence import mark_partings, render_confidence
from lab.store.short_labels import short_labels
from lab.ui.compare.equiv_view import equiv_badge, render_equiv_metric
from lab.ui.shell.html_text import esc, fmt, pre, pre_middle, sim_style
from lab.ui.compare.reference_nll import render_reference_nll
from lab.ui.compare.render_audit import render_audit_panel
from lab.ui.compare.step_view import (
    ABSENT,
    CRASHED,
    ERROR,
    FAILED,
    LOADING,
    PENDING,
    RUNNING,
    AuditView,
    EngineView,
    F1Gap,
    StepView,
    UnitMatch,
)

PROMPT_HEAD, PROMPT_TAIL = 1500, 4000
RAW_LIMIT = 6000
TURN_LIMIT = 2500
SCREEN_LIMIT = 8000
TASK_LIMIT = 6000
UNIT_LIMIT = 400

STATE_LABELS = {
    PENDING: "not generated yet — press Generate",
    RUNNING: "generating…",
    LOADING: "engine loading…",
    FAILED: "engine failed to load",
    ERROR: "generation failed",
    ABSENT: "not in this run",
    CRASHED: "engine server crashed",
}


def render_units(units: Sequence[str], cls: str = "lab-units", full: bool = False) -> str:
    """An ordered list of command units (long lists clipped)."""
    if not units:
        return '<div class="lab-muted">no command units</div>'
    limit = None if full else UNIT_LIMIT
    items = "".join(f"<li><code>{esc(u)}</code></li>" for u in units[:limit])
    more = len(units) - len(units[:limit])
    extra = f'<div class="lab-clipped">… {more} more units</div>' if more > 0 else ""
    return f'<ol class="{cls}" start="0">{items}</ol>{extra}'


def render_parsed(parsed: ParsedAction | None) -> str:
    """The parsed action: validity (or why parsing failed), fields, task_complete, fallback."""
    if parsed is None:
        return ""
    if parsed.valid_json:
        status = '<span class="lab-ok">valid JSON</span>'
    else:
        status = f'<span class="lab-bad">invalid JSON</span> <span class="lab-muted">{esc(parsed.failure or "")}</span>'
    if parsed.units_from_fallback:
        status += ' <span class="lab-warn">units from "keystrokes" fallback</span>'
    rows = [
        ("contract", esc(parsed.contract)),
        ("analysis", esc(parsed.analysis) if parsed.analysis else '<span class="lab-muted">—</span>'),
        ("plan", esc(parsed.plan) if parsed.plan else '<span class="lab-muted">—</span>'),
        ("commands", str(len(parsed.commands or []))),
        ("task_complete", esc(parsed.task_complete)),
    ]
    body = "".join(f'<tr><th>{k}</th><td><div class="lab-cell">{v}</div></td></tr>' for k, v in rows)
    return f'<div class="lab-parse-status">{status}</div><table class="lab-kv">{body}</table>'


def render_metrics(metrics: dict[str, float] | None, extra: str = "") -> str:
    """First exact, P, R, F1 as a compact strip (`extra`: more cells after F1, e.g. the reference NLL)."""
    if not metrics:
        return ""
    parts = [
        ("first exact", fmt(metrics.get("first_cmd_exact"), 1)),
        ("P", fmt(metrics.get("command_precision"))),
        ("R", fmt(metrics.get("command_recall"))),
        ("F1", fmt(metrics.get("command_f1"))),
    ]
    cells = "".join(
        f'<div class="lab-metric" data-metric="{esc(k)}"><span>{esc(k)}</span><b>{esc(v)}</b></div>' for k, v in parts
    )
    return f'<div class="lab-metrics">{cells}{extra}</div>'


def _rate(live) -> str:
    """` · 2.9 tok/s` of a column still generating (its tokens over its seconds so far), once it has tokens."""
    if not live.tokens or live.elapsed_s <= 0:
        return ""
    return f" · {live.tokens / live.elapsed_s:.1f} tok/s"


def seconds(value: float | None) -> str:
    """A duration in seconds, with more digits below 0.1 s ('–' when unknown)."""
    if value is None:
        return "–"
    return f"{value:.3f} s" if value < 0.1 else f"{value:.2f} s"


def render_timings(view: EngineView) -> str:
    """Latency of this answer, and TTFT, completion tokens and tokens/s when the engine reported them."""
    parts = [("latency", seconds(view.latency_s))]
    if view.ttft_s is not None:
        parts.append(("TTFT", seconds(view.ttft_s)))
    if view.completion_tokens is not None:
        parts.append(("tokens", f"{view.completion_tokens:,}"))
    if view.tokens_per_s is not None:
        parts.append(("tok/s", f"{view.tokens_per_s:,.1f}"))
    cells = "".join(
        f'<div class="lab-timing" data-timing="{esc(k)}"><span>{esc(k)}</span><b>{esc(v)}</b></div>' for k, v in parts
    )
    return f'<div class="lab-timings">{cells}</div>'


def render_diff(ref_rows: Sequence[UnitMatch], pred_rows: Sequence[UnitMatch], full: bool = False) -> str:
    """Each reference unit next to its best predicted unit and token F1; unmatched units marked."""
    limit = None if full else UNIT_LIMIT
    rows = []
    for row in ref_rows[:limit]:
        if row.matched:
            pred = (f'<span class="lab-idx">#{row.other_index}</span> <code>{esc(row.other_unit)}</code>'
                    f'{equiv_badge(row.equiv)}')
            rows.append(
                f'<tr style="{sim_style(row.f1)}"><td><code>{esc(row.unit)}</code></td>'
                f'<td>{pred}</td><td class="lab-f1">{row.f1:.2f}</td></tr>'
            )
        else:
            rows.append(
                f'<tr class="lab-unmatched"><td><code>{esc(row.unit)}</code></td>'
                f'<td><span class="lab-miss">missed</span></td><td class="lab-f1">0.00</td></tr>'
            )
    more = len(ref_rows) - len(ref_rows[:limit])
    if more > 0:
        rows.append(f'<tr><td colspan="3" class="lab-clipped">… {more} more reference units</td></tr>')
    extra = [r for r in pred_rows if not r.matched]
    extra_html = ""
    if extra:
        items = "".join(
            f'<li><span class="lab-idx">#{r.index}</span> <code>{esc(r.unit)}</code></li>' for r in extra[:limit]
        )
        extra_html = (
            f'<div class="lab-extra"><div class="lab-subhead">predicted units matching no reference unit '
            f"({len(extra)})</div><ul>{items}</ul></div>"
        )
    head = "<tr><th>reference unit</th><th>best predicted unit</th><th>F1</th></tr>"
    return f'<table class="lab-diff">{head}{"".join(rows)}</table>{extra_html}'


def render_prompt_block(view: EngineView, full: bool = False) -> str:
    """The rendered prompt exactly as sent, collapsed, with template status and token count."""
    status = esc(view.prompt_status or "unknown")
    tokens = (f'<span title="with the special tokens the engine adds: the count the whole lab shows">'
              f"{view.prompt_tokens:,} tokens as sent</span>" if view.prompt_tokens is not None else "tokens: n/a")
    warn = f'<div class="lab-warn">template error: {esc(view.prompt_error)}</div>' if view.prompt_error else ""
    head, tail = (None, None) if full else (PROMPT_HEAD, PROMPT_TAIL)
    body = pre_middle(view.prompt_text, head, tail, "lab-pre lab-prompt")
    return (
        f'<details class="lab-details"><summary>prompt · <span class="lab-tag">{status}</span> · {tokens} · '
        f"{len(view.prompt_text):,} chars</summary>{warn}{body}</details>"
    )


def render_column(view: EngineView, full: bool = False, badges_html: str = "", audit: AuditView | None = None,
                  step_key: str = "") -> str:
    """One engine's column: header (with the step's tags/notes badges of a stored run), metrics and
    timings, prompt, prompt audit, raw output, parsed action, units, diff. `badges_html` must
    already be safe HTML."""
    audit_html = render_audit_panel(audit, view.name, step_key)
    badges = f'<div class="lab-col-tags" data-tags="1">{badges_html}</div>' if badges_html else ""
    head = (
        f'<div class="lab-col-head"><div class="lab-col-name">{esc(view.name)}</div>'
        f'<div class="lab-col-spec" title="{esc(view.spec)}">{esc(view.spec)}</div>{badges}</div>'
    )
    if view.state != "ready":
        label = STATE_LABELS.get(view.state, view.state)
        cls = "lab-error-box" if view.state in (ERROR, FAILED, CRASHED) else "lab-state-box"
        detail = f'<div class="lab-error-text">{esc(view.error)}</div>' if view.error else ""
        if view.state == RUNNING and view.live is not None:
            detail += (f'<div class="lab-live" data-elapsed="{view.live.elapsed_s:.1f}" data-tokens="{view.live.tokens}">'
                       f'{view.live.elapsed_s:.0f} s · {view.live.tokens:,} tokens so far{_rate(view.live)}</div>')
        prompt = render_prompt_block(view, full) if view.prompt_text else ""
        return (
            f'<div class="lab-col" data-engine="{esc(view.spec)}" data-state="{esc(view.state)}">{head}'
            f'<div class="{cls}"><b>{esc(label)}</b>{detail}</div>{prompt}{audit_html}</div>'
        )
    timing = []
    if view.finish_reason:
        timing.append(f"finish: {esc(view.finish_reason)}")
    if view.stored:
        timing.append("stored answer")
    raw_title = f'raw output · {len(view.raw_output):,} chars{" · " + " · ".join(timing) if timing else ""}'
    n_ref = len(view.ref_rows)
    matched = sum(1 for r in view.ref_rows if r.matched)
    return (
        f'<div class="lab-col" data-engine="{esc(view.spec)}" data-state="ready">{head}'
        f"{render_metrics(view.metrics, render_reference_nll(view.ref_nll))}{render_equiv_metric(view.equiv)}{render_timings(view)}"
        f"{render_prompt_block(view, full)}{audit_html}"
        f'<details class="lab-details" open><summary>{raw_title}</summary>'
        f'{pre(view.raw_output, None if full else RAW_LIMIT, "lab-pre lab-raw")}</details>'
        f'<details class="lab-details lab-conf-box"><summary>answer by token confidence</summary>'
        f"{render_confidence(view)}</details>"
        f'<details class="lab-details"><summary>parsed action</summary>{render_parsed(view.parsed)}</details>'
        f'<details class="lab-details"><summary>command units ({len(view.pred_units)})</summary>'
        f"{render_units(view.pred_units, full=full)}</details>"
        f'<details class="lab-details" open><summary>diff vs reference · {matched}/{n_ref} reference units '
        f"matched</summary>{render_diff(view.ref_rows, view.pred_rows, full)}</details>"
        f"</div>"
    )


def render_columns(engines: Sequence[EngineView], full: bool = False, badges: Mapping[str, str] | None = None,
                   audits: Mapping[str, AuditView] | None = None, step_key: str = "") -> str:
    """All engine columns side by side (horizontal scroll past four); `badges`: engine name ->
    tags/notes badges HTML of the step shown (stored runs only); `audits`: engine name -> its
    prompt audit for step `step_key` (engines left out get no audit panel)."""
    if not engines:
        return (
            '<div class="lab-empty">No engines yet. Add one in the <b>Engines</b> tab '
            "(e.g. <code>reference</code> or <code>stored:results/runs/x.json</code>), or open a run from "
            "<b>Results</b>.</div>"
        )
    badges, audits = badges or {}, audits or {}
    mark_partings(engines)
    cols = "".join(render_column(e, full, badges.get(e.name, ""), audits.get(e.name), step_key) for e in engines)
    return f'<div class="lab-columns" style="--lab-ncols:{len(engines)}">{cols}</div>'


def render_f1_gap(gap: F1Gap) -> str:
    """The engines' F1s as bars next to each answer's latency, the best/worst pair with the
    largest gap highlighted."""
    if not gap.scores:
        return '<div class="lab-muted">no scored engine for this step yet</div>'
    rows = ['<div class="lab-bar-row lab-bar-head"><span class="lab-bar-name">engine</span><span>command F1</span>'
            "<span></span><span>latency</span></div>"]
    labels = short_labels(name for name, _ in gap.scores)  # distinct; the full name on hover
    for name, f1 in gap.scores:
        mark = " lab-best" if name == gap.best and gap.worst else (" lab-worst" if name == gap.worst else "")
        rows.append(
            f'<div class="lab-bar-row{mark}" data-engine="{esc(name)}">'
            f'<span class="lab-bar-name" title="{esc(name)}">{esc(labels[name])}</span>'
            f'<span class="lab-bar"><span style="width:{f1 * 100:.1f}%;{sim_style(f1)}"></span></span>'
            f'<span class="lab-bar-val">{f1:.4f}</span>'
            f'<span class="lab-bar-lat" data-latency="{esc(name)}">{seconds(gap.latency.get(name))}</span></div>'
        )
    note = ""
    if gap.tie:
        note = (f'<div class="lab-gap" data-tie="1">no gap: the {len(gap.scores)} engines tie at '
                f"<b>{gap.scores[0][1]:.4f}</b></div>")
    elif gap.worst is not None:
        note = (
            f'<div class="lab-gap">largest gap <b>{gap.gap:.4f}</b>: <span title="{esc(gap.best)}">'
            f'{esc(labels[gap.best])}</span> vs <span title="{esc(gap.worst)}">{esc(labels[gap.worst])}</span></div>'
        )
    return f'<div class="lab-bars">{"".join(rows)}</div>{note}'


def render_turn(role: str, content: str, full: bool) -> str:
    """One earlier turn (assistant reply or terminal output)."""
    role = esc(role)
    return (
        f'<div class="lab-turn lab-role-{role}"><div class="lab-role">{role}</div>'
        f'{pre(content, None if full else TURN_LIMIT)}</div>'
    )


def render_context(view: StepView, full: bool = False) -> str:
    """The step's context: header, task, earlier turns (collapsed), terminal screen, reference."""
    step = view.step
    ctx: StepContext = view.context
    badges = "".join(
        f'<span class="lab-badge">{esc(k)}: <b>{esc(v)}</b></span>'
        for k, v in (
            ("task", step.task_id),
            # step_idx counts every assistant turn walked, scored or not (SPEC §1), hence the gaps
            ("step", f"{step.step_idx} (turn {step.step_idx + 1} of {step.total_steps})"),
            ("bucket", step.bucket),
            ("group", step.source_group),
        )
    )
    earlier = "".join(render_turn(role, content, full) for role, content in ctx.turns)
    earlier_html = (
        f'<details class="lab-details"><summary>earlier turns ({len(ctx.turns)})</summary>{earlier}</details>'
        if ctx.turns
        else '<div class="lab-muted">first step: no earlier turns</div>'
    )
    # at the first step the screen is the initial terminal state inside the task message
    screen_text, where = (ctx.screen, "terminal screen the model saw") if ctx.screen else (
        initial_screen(ctx.task), "terminal screen the model saw (initial state, inside the task message)")
    screen = (
        f'<div class="lab-subhead">{where}</div>'
        f'{pre(screen_text, None if full else SCREEN_LIMIT, "lab-pre lab-screen")}'
        if screen_text
        else ""
    )
    ref_units = list(view.ref_parsed.command_units) if view.ref_parsed else []
    ref_html = (
        f'<div class="lab-ref"><div class="lab-subhead">reference reply · {len(ref_units)} command units</div>'
        f"{render_units(ref_units, 'lab-units lab-ref-units', full)}"
        f'<details class="lab-details"><summary>reference raw text</summary>'
        f'{pre(view.ref_raw, None if full else RAW_LIMIT)}</details></div>'
    )
    system = (
        f'<details class="lab-details"><summary>system message</summary>{pre(ctx.system, None if full else TASK_LIMIT)}</details>'
        if ctx.system
        else ""
    )
    return (
        f'<div class="lab-context"><div class="lab-badges">{badges}</div>{system}'
        f'<details class="lab-details"><summary>task ({len(ctx.task):,} chars)</summary>'
        f'{pre(ctx.task, None if full else TASK_LIMIT)}</details>'
        f'{earlier_html}<div class="lab-context-grid"><div>{screen}</div>{ref_html}</div></div>'
    )
