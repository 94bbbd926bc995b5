"""The Compare tab: one step, its context, one column per engine, the diff, heatmap and F1 gap.
This module lays the tab out and wires its events to the handlers of lab.ui.compare.handlers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from lab.data.sources import LOCAL_REPLAY_HINT
from lab.settings import PROJECT_ROOT
from lab.ui.compare.answers import warm_instant_engines
from lab.ui.compare.handlers import (
    CompareTab, audit_reply, download_replay, draw_heat, follow_step, generate_step, move_step, page_loaded,
    pick_baseline, refresh_step, show_step_fast, show_task_fast, step_choices, step_outputs, task_choices,
)  # fmt: skip
from lab.ui.compare.link_row import build_link_row
from lab.ui.compare.run_picker import build_run_picker, wire_run_picker
from lab.ui.compare.samples_panel import build_samples_panel
from lab.ui.compare.whatif_view import build_whatif_view
from lab.ui.shell.html_text import esc
from lab.ui.shell.notice import render_notice
from lab.ui.shell.wiring import bind
from lab.workspace import LabContext

# Page script (keyboard shortcuts, lazy prompt-audit requests) and the audit-answer handler.
UI_ASSETS = PROJECT_ROOT / "assets" / "ui"
SHORTCUTS_JS = "<script>\n" + (UI_ASSETS / "compare.js").read_text(encoding="utf-8") + "</script>\n"
# Fills the audit panel the server answered for (JSON [engine, step, state, summary html, body html]).
FILL_AUDIT_JS = (UI_ASSETS / "fill_audit.js").read_text(encoding="utf-8")

PUBLIC_NO_REPLAY = ("<p>The owner of this Space has not configured the replay file, so Compare has no steps to show; "
                    "you can still browse Results, Triage and the published runs.</p>")


def no_replay_panel(ctx: LabContext) -> str:
    """What Compare shows when no replay data is configured: to a visitor of a public deployment one line
    (the replay is the owner's to configure; no control offered that would be refused), to the owner how
    to configure it."""
    if ctx.settings.public:
        return render_notice("No replay data configured", PUBLIC_NO_REPLAY, "warn")
    url = ctx.settings.replay_url
    problem = f"<p class='lab-muted'>{ctx.replay_error_html}</p>" if ctx.replay_error_html else ""
    return render_notice(
        f"No replay data configured: {LOCAL_REPLAY_HINT}",
        f"{problem}<p>Compare needs the TB2-lite replay steps. Start the lab with "
        "<code>python app.py --replay PATH/replay_full.jsonl</code>, set <code>LAB_REPLAY=PATH</code>, or "
        "download the public replay file (4.7 MB) into the cache with the button below; the lab uses it "
        f"from then on.</p><p class='lab-muted'>source: <code>{esc(url)}</code></p>",
        "warn",
    )


# ---- the layout and its wiring ---------------------------------------------------------------------------
@dataclass
class CompareLayout:
    """The Compare tab's components its events use (beyond CompareTab's)."""

    notice: gr.HTML
    download: gr.Button
    prev: gr.Button
    next: gr.Button
    generate: gr.Button
    columns_html: gr.HTML
    f1_html: gr.HTML
    baseline: gr.Dropdown  # the run-level block's baseline, one of the stored columns
    run_block: gr.HTML
    heat_plot: gr.Plot
    whatif: Any
    audit_request: gr.Textbox
    audit_go: gr.Button
    audit_answer: gr.Textbox
    picker: Any


def build_compare_tab(ctx: LabContext) -> CompareTab:
    """Lay out the Compare tab and wire its events."""
    with gr.Tab("Compare", id="compare") as tab:
        notice = gr.HTML(no_replay_panel(ctx) if ctx.replay is None else "", visible=ctx.replay is None)
        # not offered to a visitor of a public deployment (it would be refused: the replay is the owner's)
        download = gr.Button("Download the public replay file", visible=ctx.replay is None and not ctx.settings.public,
                             variant="primary", elem_id="lab-download-replay")
        with gr.Row(equal_height=True, elem_classes=["lab-nav"]):
            first = ctx.replay.steps[0] if ctx.replay and ctx.replay.steps else None
            task = gr.Dropdown(task_choices(ctx), value=first.task_id if first else None, label="task", scale=3,
                               elem_id="lab-task", allow_custom_value=True)
            step = gr.Dropdown(step_choices(ctx, first.task_id) if first else [], value=first.key if first else None,
                               label="step", scale=2, elem_id="lab-step", allow_custom_value=True)
            prev = gr.Button("◀ prev (k)", elem_id="lab-prev", scale=0, min_width=110)
            nxt = gr.Button("next (j) ▶", elem_id="lab-next", scale=0, min_width=110)
            generate = gr.Button("Generate on all engines", variant="primary", elem_id="lab-generate", scale=1)
            show_all = gr.Checkbox(False, label="show all (no clipping)", scale=1, elem_id="lab-show-all")
        link, link_note = build_link_row()
        picker = build_run_picker(ctx)
        context_html = gr.HTML(elem_id="lab-context")
        gr.Markdown("### Engines", elem_classes=["lab-h"])
        columns_html = gr.HTML(elem_id="lab-columns")
        build_samples_panel(ctx, step)  # N answers per engine: F1 strip, collapsed answers (lab.ui.compare.samples_panel)
        with gr.Row():
            with gr.Column(scale=1, min_width=280):
                gr.Markdown("### Command F1 by engine", elem_classes=["lab-h"])
                baseline = gr.Dropdown([], label="baseline of the run-level block (a stored column)", visible=False,
                                       elem_id="lab-run-baseline")
                run_block = gr.HTML(elem_id="lab-run-block")  # whole runs compared, above the step's F1s
                f1_html = gr.HTML(elem_id="lab-f1")
            with gr.Column(scale=2):
                heat_engine = gr.Dropdown([], label="heatmap engine", elem_id="lab-heat-engine",
                                          allow_custom_value=True)
                heat_plot = gr.Plot(label="similarity heatmap", elem_id="lab-heatmap")
        whatif = build_whatif_view(ctx, step, show_all)
        # the prompt audit panels ask for their content through these (see SHORTCUTS_JS)
        audit_request = gr.Textbox(visible="hidden", elem_id="lab-audit-request")
        audit_go = gr.Button(visible="hidden", elem_id="lab-audit-go")
        audit_answer_box = gr.Textbox(visible="hidden", elem_id="lab-audit-answer")

    outputs = [task, step, context_html, columns_html, f1_html, heat_engine, heat_plot, baseline, run_block]
    view = CompareTab(tab, task, step, show_all, heat_engine, outputs, warm=lambda: warm_instant_engines(ctx),
                      link=link, link_note=link_note)
    layout = CompareLayout(notice, download, prev, nxt, generate, columns_html, f1_html, baseline, run_block, heat_plot,
                           whatif, audit_request, audit_go, audit_answer_box, picker)
    wire_compare_tab(ctx, view, layout)
    return view


def wire_compare_tab(ctx: LabContext, view: CompareTab, ui: CompareLayout) -> None:
    """Wire the Compare tab's events to the handlers of lab.ui.compare.handlers."""
    wire_run_picker(ctx, ui.picker, view.switch_outputs,
                    lambda key, request: view.updates(step_outputs(ctx, key, baseline=view.baseline_of(request))),
                    view.step, view.tab)
    ui.baseline.input(bind(pick_baseline, ctx, view), ui.baseline, [ui.baseline, ui.run_block],
                      show_progress="minimal", api_visibility="private")
    outputs, inputs = view.switch_outputs, [view.step, view.show_all, view.heat_engine]
    # A Generate still streaming must not paint its step over the one the user moved to: every move
    # cancels it (its engines' answers still land in the cache and show when that step is opened again).
    # "multiple": a press while an earlier Generate still streams (a slow engine) is not dropped: it reads the
    # engines' states then and starts those ready since, awaiting the answers the first one started.
    generating = ui.generate.click(
        bind(generate_step, ctx, view), inputs,
        [ui.columns_html, ui.f1_html, view.heat_engine, ui.heat_plot, ui.notice],
        show_progress="minimal", api_name="generate", trigger_mode="multiple",
    )
    fast = {"outputs": outputs, "show_progress": "hidden", "cancels": [generating]}
    switches = [
        view.task.input(bind(show_task_fast, ctx, view), [view.task, view.show_all, view.heat_engine],
                        api_visibility="private", **fast),
        view.step.input(bind(show_step_fast, ctx, view), inputs, api_name="show_step", **fast),
        # "multiple": a second press while the first is pending is queued, not dropped (see CompareTab.moves)
        ui.prev.click(bind(move_step, ctx, view, -1), inputs, api_name="prev_step", trigger_mode="multiple", **fast),
        ui.next.click(bind(move_step, ctx, view, +1), inputs, api_name="next_step", trigger_mode="multiple", **fast),
    ]
    refresh = bind(refresh_step, ctx, view)
    view.show_all.change(refresh, inputs, outputs, show_progress="hidden", api_visibility="private")
    heat = bind(draw_heat, ctx)
    for switched in switches:  # the heatmap follows each fast switch once its columns are painted;
        # "always_last": a switch that ends while the previous heatmap is still drawing is drawn after it
        switched.then(heat, [view.step, view.heat_engine], ui.heat_plot, show_progress="hidden",
                      api_visibility="private", trigger_mode="always_last")
    view.heat_engine.input(heat, [view.step, view.heat_engine], ui.heat_plot, show_progress="hidden",
                           api_visibility="private")
    # answers being generated for the step shown (another page's Generate, one from before a reload) show as
    # in progress and then as answered: after a switch, when the tab is shown, when the page loads
    follow = {"fn": bind(follow_step, ctx, view), "inputs": [view.step, view.show_all],
              "outputs": [ui.columns_html, ui.f1_html], "show_progress": "hidden", "api_visibility": "private"}
    for switched in switches:
        switched.then(trigger_mode="always_last", **follow)
    view.tab.select(refresh, inputs, outputs, show_progress="hidden", api_visibility="private").then(**follow)
    gr.on(triggers=None, **follow)
    ui.whatif.ran.then(refresh, inputs, outputs, show_progress="hidden", api_visibility="private")  # its originals
    view.replay_loaded = ui.download.click(bind(download_replay, ctx, view), None, [ui.notice, ui.download, *outputs],
                                           api_visibility="private")
    gr.on(triggers=None, fn=bind(page_loaded, ctx), outputs=[ui.notice, ui.download, view.task],
          api_visibility="private", show_progress="hidden")
    ui.audit_go.click(bind(audit_reply, ctx), ui.audit_request, ui.audit_answer, show_progress="hidden",
                      api_name="prompt_audit", trigger_mode="multiple").then(
        None, ui.audit_answer, None, js=FILL_AUDIT_JS, show_progress="hidden", api_visibility="private")
