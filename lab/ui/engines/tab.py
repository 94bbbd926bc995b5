"""The Engines tab: add an engine by SPEC or preset, watch its status, unload it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import gradio as gr

from lab.errors import LabError
from lab.jsontext import one_line
from lab.workspace import EngineEntry, LabContext
from lab.ui.shell.model_text import model_facts_text
from lab.ui.shell.handles import CompareHandle
from lab.ui.shell.html_text import esc
from lab.ui.shell.notice import render_notice
from lab.ui.shell.preset_html import preset_changes_html, preset_warning_html
from lab.ui.shell.links import wire_tab_link

SPEC_HELP = (
    "Engine SPEC: <code>reference</code>, <code>stored:PATH</code>, <code>transformers:MODEL_OR_PATH</code>, "
    "<code>vllm:MODEL_OR_PRESET</code> (a <code>vllm serve</code> the lab starts), "
    "<code>transformers-serve:MODEL_OR_PATH</code>, <code>openai:BASE_URL#MODEL</code>, or a preset name; options after "
    "<code>?</code>, e.g. <code>transformers:/models/tiny?device=cpu&amp;name=tiny</code>; <code>?preset=KEY</code> runs "
    "a checkpoint with a preset's settings (<code>vllm:/ckpts/checkpoint-300?preset=qwen35-2b-sft</code>). Several SPECs separated "
    "by spaces are added together (vLLM engines then split the GPU's memory)."
)


def preset_choices() -> list[tuple[str, str]]:
    """(label, key) for every preset of assets/models.yaml."""
    from lab.engines.presets import load_presets

    try:
        presets = load_presets()
    except LabError:
        return []
    return [(f"{p.display_name} ({key})", key) for key, p in presets.items()]


def _server_cells(server: dict | None) -> tuple[str, str, str]:
    """(port, pid, GPU memory) cells of a managed server's row; dashes for other engines."""
    if not server:
        return "–", "–", "–"
    running = server.get("state") in ("starting", "ready")
    port = str(server.get("port")) if running and server.get("port") else "–"
    pid = str(server.get("pid")) if running and server.get("pid") else "–"
    memory = server.get("gpu_memory_gb")
    return port, pid, (f"{memory:.2f} GB" if memory is not None else "none")


def _memory_cell(e: EngineEntry) -> str:
    """Memory an engine holds, or the RAM budget of a CPU vLLM server's KV cache (no NVML reading there)."""
    if e.memory_gb is not None:
        return f"{e.memory_gb:.1f} GB"
    kv = (e.server or {}).get("kv_cache_gb")
    return f"KV cache {kv:.2f} GiB of RAM (budget)" if kv is not None else "–"


def render_engine_table(entries: list[EngineEntry]) -> str:
    """Status of every engine: state (with the failure reason and a server's log lines), kind,
    a managed server's port, PID and GPU memory, device, memory."""
    if not entries:
        return '<div class="lab-empty">No engines loaded.</div>'
    rows = []
    for e in entries:
        server = e.server or {}
        shown = server.get("state") if server and e.state == "loading" else e.state
        state = f'<span class="lab-state-{esc(shown)}" data-state="{esc(shown)}">{esc(shown)}</span>'
        if e.error:
            state += f'<div class="lab-error-text">{esc(e.error)}</div>'
        elif server.get("tail") and e.state != "ready":
            state += f'<div class="lab-error-text lab-log-tail">{esc(chr(10).join(server["tail"][-8:]))}</div>'
        memory = _memory_cell(e)
        port, pid, gpu = _server_cells(e.server)
        preset = f"<div class='lab-col-preset' data-preset=\"{esc(e.preset)}\">preset {esc(e.preset)}</div>" if e.preset else ""
        preset += preset_warning_html(e.preset_warning) + preset_changes_html(e.preset, e.preset_changes)
        device = e.device or server.get("device") or "–"
        rows.append(
            f"<tr data-engine=\"{esc(e.name)}\"><td><b>{esc(e.name)}</b><div class='lab-col-spec'>{esc(e.spec)}</div>{preset}</td>"
            f"<td>{esc(e.kind)}</td><td data-model>{_model_cell(e)}</td><td>{state}</td><td data-port>{port}</td>"
            f"<td data-pid>{pid}</td><td>{gpu}</td>"
            f"<td>{esc(device)}</td><td>{memory}</td><td>{esc(e.notes)}</td></tr>"
        )
    head = ("<tr><th>engine</th><th>kind</th><th>model</th><th>status</th><th>port</th><th>PID</th><th>GPU memory</th>"
            "<th>device</th><th>memory</th><th>notes</th></tr>")
    return f'<table class="lab-engines">{head}{"".join(rows)}</table>'


def _model_cell(e: EngineEntry) -> str:
    """The Engines table's model cell: architecture, context, dtype, preset, and a server's flags folded."""
    text = model_facts_text(e)
    cell = f'<div class="lab-model-facts">{esc(text)}</div>' if text else ('–' if e.state == "ready" else "")
    if e.flags:
        cell += (f'<details class="lab-flags"><summary>server flags ({len(e.flags)})</summary>'
                 f'<code>{esc(" ".join(e.flags))}</code></details>')
    return cell


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


def add_engine_action(ctx: LabContext, text: str | None, what: str = "SPEC",
                      warm: Callable[[], object] | None = None) -> EngineAction:
    """Add the engine `text` names (a SPEC or a preset key); never raises for user mistakes. `warm`
    (Compare's warmer) precomputes the new instant engines' columns when a replay is loaded."""
    text = (text or "").strip()
    if not text:
        hint = "Pick a preset first." if what == "preset" else "Type an engine SPEC first, e.g. 'reference' or 'stored:PATH'."
        return EngineAction(False, hint)
    specs = text.split()
    try:
        names = ctx.add_engines(specs) if len(specs) > 1 else [ctx.add_engine(text)]
    except LabError as exc:
        return EngineAction(False, ctx.shown_text(f"Cannot add '{one_line(text, 200)}': {exc}"))
    if ctx.replay is not None and warm is not None:
        warm()
    listed = ", ".join(f"'{n}'" for n in names)
    return EngineAction(True, f"Adding engine {listed}; it loads in the background (status below).")


def unload_engine_action(ctx: LabContext, name: str | None) -> EngineAction:
    """Unload (close and forget) the engine `name`."""
    if not name:
        return EngineAction(False, "Pick an engine to unload.")
    try:
        ctx.remove_engine(name)
    except LabError as exc:
        return EngineAction(False, ctx.shown_text(str(exc)))
    return EngineAction(True, f"Unloaded '{name}'.")


def restart_engine_action(ctx: LabContext, name: str | None) -> EngineAction:
    """Restart the server of the managed engine `name` (in the background)."""
    if not name:
        return EngineAction(False, "Pick an engine to restart.")
    try:
        ctx.restart_engine(name)
    except LabError as exc:
        return EngineAction(False, ctx.shown_text(str(exc)))  # a server's message may name its paths
    return EngineAction(True, f"Restarting '{name}'; it answers again when its state is ready.")


def engine_status(ctx: LabContext) -> tuple[str, list[str], bool]:
    """(status table HTML, engine names, whether any engine is still loading)."""
    entries = ctx.engine_entries()
    watch = any(e.state == "loading" or e.server for e in entries)  # managed servers can crash at any time
    return render_engine_table(entries), [e.name for e in entries], watch


def build_engines_tab(ctx: LabContext, compare: CompareHandle) -> None:
    """Lay out the Engines tab and wire its events."""
    models_allowed = bool(ctx.settings.allow_engine_loading)
    with gr.Tab("Engines", id="engines") as tab:
        wire_tab_link(tab, "engines", "lab-engines-link")  # its "copy link" box, followed by the address bar
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
            # allow_custom_value: a pick the page still holds for an engine unloaded meanwhile (a timer tick
            # queued behind the Unload) reaches the handlers, which answer in one line; never Gradio's error
            which = gr.Dropdown([e.name for e in ctx.engine_entries()], value=None, label="engine", scale=4,
                                elem_id="lab-unload-which", allow_custom_value=True)
            restart = gr.Button("Restart", scale=1, elem_id="lab-restart")
            unload = gr.Button("Unload", variant="stop", scale=1, elem_id="lab-unload")
            refresh = gr.Button("Refresh status", scale=1)
        timer = gr.Timer(1.0, active=False)
        shown = gr.State([e.name for e in ctx.engine_entries()])  # the picker's choices in this page

    def status(keep: str | None = None):
        html, names, loading = engine_status(ctx)
        return html, gr.update(choices=names, value=keep if keep in names else None), gr.Timer(active=loading), names

    def tick(keep: str | None, choices: list[str]):
        """The timer's refresh: the table always, the dropdown only when the engines changed, so a
        pick the user is making is never reset under them."""
        html, names, loading = engine_status(ctx)
        pick = gr.skip() if names == choices else gr.update(choices=names, value=keep if keep in names else None)
        return html, pick, gr.Timer(active=loading), names

    def report(action: EngineAction, keep: str | None = None):
        (gr.Info if action.ok else gr.Warning)(action.message)
        return status(keep)

    outs = [table, which, timer, shown]
    add.click(lambda text: report(add_engine_action(ctx, text, warm=compare.warm)), spec, outs, api_name="add_engine")
    spec.submit(lambda text: report(add_engine_action(ctx, text, warm=compare.warm)), spec, outs, api_visibility="private")
    add_preset.click(lambda key: report(add_engine_action(ctx, key, "preset", compare.warm)), preset, outs,
                     api_visibility="private")
    unload.click(lambda name: report(unload_engine_action(ctx, name)), which, outs, api_name="unload_engine")
    restart.click(lambda name: report(restart_engine_action(ctx, name), name), which, outs, api_name="restart_engine")
    refresh.click(status, which, outs, api_visibility="private")
    tab.select(status, which, outs, api_visibility="private", show_progress="hidden")
    timer.tick(tick, [which, shown], outs, api_visibility="private", show_progress="hidden")
