"""HTML of the what-if panel: per engine, the original answer beside the marked what-if answer,
and the engine's prompt diff. Pure functions (no Gradio, no scoring: metrics come with the results)."""
from __future__ import annotations

from typing import Sequence

from lab.settings import PROJECT_ROOT
from lab.ui.shell.html_text import esc
from lab.ui.compare.render_html import render_column
from lab.ui.compare.step_view import READY, EngineView, alignment_rows
from lab.whatif.diff import diff_html, patch_html
from lab.whatif.edit import WhatIf
from lab.whatif.run import WhatIfResult

WHATIF_CSS = "<style>" + (PROJECT_ROOT / "assets" / "ui" / "whatif.css").read_text(
    encoding="utf-8") + "</style>"


def whatif_engine_view(result: WhatIfResult) -> EngineView:
    """A what-if answer shaped as an engine column (prompt left out: the diff shows it)."""
    ref_rows, pred_rows = alignment_rows(list(result.pred_units), list(result.ref_units))
    return EngineView(
        spec=result.engine_spec, name=result.engine_name, state=READY if not result.error else "error",
        error=result.error, kind=result.engine_kind, prompt_text=result.edited_prompt,
        prompt_status=result.prompt_status, prompt_tokens=result.prompt_tokens, raw_output=result.raw_output,
        latency_s=result.latency_s,
        pred_units=list(result.pred_units), metrics=dict(result.metrics) or None,
        ref_rows=ref_rows, pred_rows=pred_rows,
    )


def _delta(original: EngineView | None, result: WhatIfResult) -> str:
    if original is None or original.f1 is None or result.f1 is None:
        return ""
    delta = result.f1 - original.f1
    sign = "+" if delta > 0 else ("±" if delta == 0 else "−")
    return (f'<span class="lab-whatif-delta" data-delta="{delta:.4f}">F1 {original.f1:.4f} → {result.f1:.4f} '
            f"({sign}{abs(delta):.4f})</span>")


def render_whatif_engine(original: EngineView | None, result: WhatIfResult, whatif: WhatIf, full: bool = False) -> str:
    """One engine: original column | what-if column (marked), then its prompt diff."""
    fields = ", ".join(whatif.fields)
    note = ""
    if result.answers_from_data:
        note = ('<div class="lab-muted">this engine answers from data (reference / stored run): the edit '
                "cannot change its answer</div>")
    orig_html = (render_column(original, full) if original is not None
                 else '<div class="lab-muted">no original answer yet</div>')
    diff = (diff_html(result.original_prompt, result.edited_prompt) if result.original_prompt or result.edited_prompt
            else patch_html(result.patch))
    return (
        f'<div class="lab-whatif-engine" data-whatif-engine="{esc(result.engine_name)}">'
        f"<h4>{esc(result.engine_name)} {_delta(original, result)}</h4>{note}"
        f'<div class="lab-whatif-pair"><div data-side="original"><span class="lab-whatif-tag lab-whatif-tag-orig">'
        f"original</span>{orig_html}</div>"
        f'<div data-side="whatif" class="lab-whatif-marked" data-whatif="{esc(whatif.edit_id)}">'
        f'<span class="lab-whatif-tag lab-whatif-tag-edit">WHAT-IF · edited {esc(fields)} · not scored in any run'
        f"</span>{render_column(whatif_engine_view(result), full)}</div></div>"
        f'<details class="lab-details" open><summary>prompt diff for {esc(result.engine_name)}</summary>{diff}</details>'
        f"</div>"
    )


def render_whatif_results(whatif: WhatIf, pairs: Sequence[tuple[EngineView | None, WhatIfResult | None, str]],
                          where: str, full: bool = False) -> str:
    """Every engine of a what-if: (original, result or None while running, engine name)."""
    head = (f'<div class="lab-subhead">what-if <code>{esc(whatif.edit_id)}</code> on {esc(whatif.step_key)} · '
            f"edited {esc(', '.join(whatif.fields))}{' · ' + esc(whatif.note) if whatif.note else ''} · {esc(where)}</div>")
    blocks = []
    for original, result, name in pairs:
        if result is None:
            blocks.append(f'<div class="lab-whatif-engine" data-whatif-engine="{esc(name)}" data-state="running">'
                          f"<h4>{esc(name)}</h4><div class='lab-state-box'><b>running the edited step…</b></div></div>")
        else:
            blocks.append(render_whatif_engine(original, result, whatif, full))
    if not blocks:
        blocks.append('<div class="lab-empty">No ready engine: add one in the Engines tab.</div>')
    return f'<div class="lab-whatif">{WHATIF_CSS}{head}{"".join(blocks)}</div>'
