"""The Engines tab: add an engine by SPEC or preset, watch its status, unload it."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from lab.errors import LabError
from lab.ui.compare_tab import CompareTab, warm_instant_engines
from lab.ui.context import EngineEntry, LabContext
from lab.ui.render_html import esc, render_notice

SPEC_HELP = (
    "Engine SPEC: <code>reference</code>, <code>stored:PATH</code>, <code>transformers:MODEL_OR_PATH</code>, "
    "<code>vllm:MODEL_OR_PRESET</code>, <code>openai:BASE_URL#MODEL</code>, or a preset name; options after "
    "<code>?</code>, e.g. <code>transformers:/models/tiny?device=cpu&amp;name=tiny</code>."
)


def preset_choices() -> list[tuple[str, str]]:
    """(label, key) for every preset of assets/models.yaml."""
    from lab.engines.presets import load_presets

    try:
        presets = load_presets()
    except LabError:
        return []
    return [(f"{p.display_name} ({key})", key) for key, p in presets.items()]


def render_engine_table(entries: list[EngineEntry]) -> str:
    """Status of every engine: state (with the failure reason), kind, device, memory."""
    if not entries:
        return '<div class="lab-empty">No engines loaded.</div>'
    rows = []
    for e in entries:
        state = f'<span class="lab-state-{esc(e.state)}">{esc(e.state)}</span>'
        if e.error:
            state += f'<div class="lab-error-text">{esc(e.error)}</div>'
        memory = f"{e.memory_gb:.1f} GB" if e.memory_gb is not None else "–"
        rows.append(
            f"<tr><td><b>{esc(e.name)}</b><div class='lab-col-spec'>{esc(e.spec)}</div></td><td>{esc(e.kind)}</td>"
            f"<td>{state}</td><td>{esc(e.device or '–')}</td><td>{memory}</td><td>{esc(e.notes)}</td></tr>"
        )
    head = "<tr><th>engine</th><th>kind</th><th>status</th><th>device</th><th>memory</th><th>notes</th></tr>"
    return f'<table class="lab-engines">{head}{"".join(rows)}</table>'


def loading_policy_html(ctx: LabContext) -> str:
    """Why model engines cannot be added here (public deployment), or nothing."""
    if ctx.settings.allow_engine_loading:
        return ""
    return render_notice(
        "Model engines are off on this deployment",
        "This is a public deployment: visitors can add only <code>reference</code> and <code>stored:</code> engines. "
        "The owner can enable model engines with <code>LAB_ALLOW_ENGINES=1</code>; "
        "<code>trust_remote_code</code> is allowed only for presets that need it.",
        "info",
    )


@dataclass
class EngineAction:
    """What an Engines-tab action did: ok or not, and the one-line message for the user."""

    ok: bool
    message: str


def add_engine_action(ctx: LabContext, text: str | None, what: str = "SPEC") -> EngineAction:
    """Add the engine `text` names (a SPEC or a preset key); never raises for user mistakes."""
    text = (text or "").strip()
    if not text:
        hint = "Pick a preset first." if what == "preset" else "Type an engine SPEC first, e.g. 'reference' or 'stored:PATH'."
        return EngineAction(False, hint)
    try:
        name = ctx.add_engine(text)
    except LabError as exc:
        return EngineAction(False, ctx.shown_text(f"Cannot add '{text}': {exc}"))
    if ctx.replay is not None:
        warm_instant_engines(ctx)
    return EngineAction(True, f"Adding engine '{name}'; it loads in the background (status below).")


def unload_engine_action(ctx: LabContext, name: str | None) -> EngineAction:
    """Unload (close and forget) the engine `name`."""
    if not name:
        return EngineAction(False, "Pick an engine to unload.")
    try:
        ctx.remove_engine(name)
    except LabError as exc:
        return EngineAction(False, ctx.shown_text(str(exc)))
    return EngineAction(True, f"Unloaded '{name}'.")


def engine_status(ctx: LabContext) -> tuple[str, list[str], bool]:
    """(status table HTML, engine names, whether any engine is still loading)."""
    entries = ctx.engine_entries()
    return render_engine_table(entries), [e.name for e in entries], any(e.state == "loading" for e in entries)


def build_engines_tab(ctx: LabContext, compare: CompareTab) -> None:
    """Lay out the Engines tab and wire its events."""
    models_allowed = bool(ctx.settings.allow_engine_loading)
    with gr.Tab("Engines", id="engines") as tab:
        policy = loading_policy_html(ctx)
        if policy:
            gr.HTML(policy)
        with gr.Row(equal_height=True):
            spec = gr.Textbox(label="engine SPEC", placeholder="reference · stored:results/runs/x.json · transformers:/path",
                              scale=4, elem_id="lab-spec", info=None)
            add = gr.Button("Add engine", variant="primary", scale=1, elem_id="lab-add-engine")
        gr.HTML(f'<div class="lab-muted">{SPEC_HELP}</div>')
        with gr.Row(equal_height=True):
            preset = gr.Dropdown(preset_choices(), value=None, label="preset (assets/models.yaml)", scale=4,
                                 interactive=models_allowed, elem_id="lab-preset",
                                 info=None if models_allowed else "disabled: model engines are off on this deployment")
            add_preset = gr.Button("Add preset", scale=1, interactive=models_allowed, elem_id="lab-add-preset")
        gr.Markdown("### Engines", elem_classes=["lab-h"])
        table = gr.HTML(render_engine_table(ctx.engine_entries()), elem_id="lab-engine-table")
        with gr.Row(equal_height=True):
            which = gr.Dropdown([e.name for e in ctx.engine_entries()], value=None, label="engine to unload", scale=4,
                                elem_id="lab-unload-which")
            unload = gr.Button("Unload", variant="stop", scale=1, elem_id="lab-unload")
            refresh = gr.Button("Refresh status", scale=1)
        timer = gr.Timer(1.0, active=False)

    def status(keep: str | None = None):
        html, names, loading = engine_status(ctx)
        return html, gr.update(choices=names, value=keep if keep in names else None), gr.Timer(active=loading)

    def report(action: EngineAction, keep: str | None = None):
        (gr.Info if action.ok else gr.Warning)(action.message)
        return status(keep)

    outs = [table, which, timer]
    add.click(lambda text: report(add_engine_action(ctx, text)), spec, outs, api_name="add_engine")
    spec.submit(lambda text: report(add_engine_action(ctx, text)), spec, outs, api_visibility="private")
    add_preset.click(lambda key: report(add_engine_action(ctx, key, "preset")), preset, outs,
                     api_visibility="private")
    unload.click(lambda name: report(unload_engine_action(ctx, name)), which, outs, api_name="unload_engine")
    refresh.click(status, which, outs, api_visibility="private")
    tab.select(status, which, outs, api_visibility="private", show_progress="hidden")
    timer.tick(status, which, outs, api_visibility="private", show_progress="hidden")
