"""Assemble the lab's Gradio app: context (settings, replay, engines, store) → tabs → launch options."""
from __future__ import annotations

import importlib
import logging
from typing import Sequence

import gradio as gr

from lab.data.sources import LOCAL_REPLAY_HINT
from lab.errors import LabError
from lab.settings import PROJECT_ROOT, Settings
from lab.ui.compare.answers import warm_instant_engines
from lab.ui.compare.handlers import CompareTab, step_outputs
from lab.ui.compare.tab import SHORTCUTS_JS, build_compare_tab
from lab.ui.compare.link import load_compare, load_outputs, wire_compare_link
from lab.ui.shell.links import follow_tabs, open_tab
from lab.ui.shell.public import launch_limits, watch_sessions
from lab.ui.shell.session import serve_requests
from lab.ui.shell.wiring import bind
from lab.workspace import LabContext

__all__ = ["build_app", "launch_options", "OpenInCompare"]

CSS_PATH = PROJECT_ROOT / "assets" / "lab.css"
LINKS_JS = "<script>\n" + (PROJECT_ROOT / "assets" / "ui" / "links.js").read_text(encoding="utf-8") + "</script>\n"
log = logging.getLogger(__name__)


class OpenInCompare:
    """Hook for other tabs: open some runs' answers to a step in Compare.

    Use it as an event handler's body: `outputs=open_in_compare.outputs` and return
    `open_in_compare(run_ids, step_key, request)`; the runs are added as `stored:` engine columns and
    the app switches to the Compare tab at that step.
    """

    def __init__(self, ctx: LabContext, compare: CompareTab, tabs: gr.Tabs) -> None:
        self.ctx, self.compare, self.tabs = ctx, compare, tabs
        self.outputs = [tabs, *compare.switch_outputs]

    def __call__(self, run_ids: Sequence[str] | str, step_key: str | None = None,
                 request: gr.Request | None = None) -> tuple:
        """`request`: the handler's, so that a Generate still streaming in Compare for that session
        stops painting its step over the one opened here."""
        if isinstance(run_ids, str):
            run_ids = [run_ids]
        names = []
        for run_id in run_ids:
            try:
                names.append(self.ctx.add_stored_run(run_id))
            except LabError as exc:
                gr.Warning(str(exc))
        if self.ctx.replay is None:
            gr.Warning(f"No replay data loaded: Compare needs one to show steps; {LOCAL_REPLAY_HINT}.")
            return (gr.update(selected="compare"), *(gr.update() for _ in self.compare.switch_outputs))
        out = step_outputs(self.ctx, step_key or first_step_of(self.ctx, names),
                           baseline=self.compare.baseline_of(request))
        self.compare.painted(request, out.step_key)
        return (gr.update(selected="compare"), *self.compare.updates(out))


def first_step_of(ctx: LabContext, names: Sequence[str]) -> str | None:
    """The first replay step (in replay order) that one of the stored engines `names` answered;
    None when none has a step of the loaded replay."""
    answered: set[str] = set()
    for name in names:
        try:
            answered.update(ctx.pool.get(name).rows)
        except LabError:  # removed meanwhile
            continue
    return next((key for key in ctx.step_keys() if key in answered), None)


def _mount_optional(module: str, builder: str, *args) -> bool:
    """Mount a tab whose module may be absent (e.g. triage); False when it is not there."""
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        if exc.name and module.startswith(exc.name):
            return False
        raise
    getattr(mod, builder)(*args)
    return True


def build_app(ctx: LabContext, mcp: bool = False) -> gr.Blocks:
    """The lab's Blocks: Compare, Engines, Batch, Results (and Triage when present); with `mcp`, the tools
    Gradio's MCP server offers (lab.ui.mcp), and only those in the API's listing."""
    from lab.ui.batch.tab import build_batch_tab
    from lab.ui.engines.tab import build_engines_tab
    from lab.ui.published.panel import build_published_panel
    from lab.ui.results.tab import build_results_tab
    from lab.ui.shell.choices import short_choice_errors
    from lab.ui.shell.numbers import numbers_refused_in_one_line

    serve_requests(ctx)
    short_choice_errors()  # a value that is no choice is refused in one short line, not echoed with every choice
    numbers_refused_in_one_line()  # `nan` in a number field: one line naming the field, not Gradio's ": failed"
    with gr.Blocks(title="TB2-lite comparison lab", fill_width=True, delete_cache=(600, 1800)) as demo:
        header = gr.HTML(_header(ctx), elem_id="lab-header")
        link_note = gr.HTML(elem_id="lab-link-note")  # what was wrong with the page's link, in one line
        with gr.Tabs(elem_id="lab-tabs") as tabs:
            compare = build_compare_tab(ctx)
            open_in_compare = OpenInCompare(ctx, compare, tabs)
            build_engines_tab(ctx, compare)
            build_batch_tab(ctx)
            build_results_tab(ctx, open_in_compare, build_published_panel)
            _mount_optional("lab.ui.triage.tab", "build_triage_tab", ctx, open_in_compare)
        demo.load(open_tab, None, [tabs, link_note], api_visibility="private", show_progress="hidden")
        follow_tabs(tabs)
        demo.load(bind(load_compare, ctx, compare), None, load_outputs(compare), api_visibility="private")
        wire_compare_link(ctx, compare, compare.link)
        demo.load(lambda: _header(ctx), None, header, api_visibility="private")
        if compare.replay_loaded is not None:
            compare.replay_loaded.then(lambda: _header(ctx), None, header, api_visibility="private")
        if ctx.startup_warnings:
            demo.load(lambda: [gr.Warning(w) for w in ctx.startup_warnings] and None, None, None,
                      api_visibility="private")
        watch_sessions(demo, ctx)
        if mcp:
            from lab.ui.mcp.mount import mount_tools

            mount_tools(ctx)
    if mcp:
        from lab.ui.mcp.mount import tools_only

        tools_only(demo)
    demo.open_in_compare = open_in_compare  # for tests and embedding
    if ctx.replay is not None:
        warm_instant_engines(ctx)
    return demo


def _header(ctx: LabContext) -> str:
    from lab.ui.shell.html_text import esc

    from lab.security.paths import display_path

    replay = (
        f"replay: <code>{esc(display_path(ctx.replay.path, ctx.settings))}</code> · {len(ctx.replay.steps)} steps · "
        f"{len(ctx.replay.tasks)} tasks"
        if ctx.replay
        else "replay: <b>none configured</b> (see Compare)"
    )
    if not ctx.settings.allow_engine_loading:
        mode = "public (model engines off)"
    else:
        mode = "public (model engines enabled by the owner)" if ctx.settings.public else "local"
    return (
        f'<div class="lab-title"><b>TB2-lite comparison lab</b><span class="lab-muted"> · {replay} · '
        f"results: <code>{esc(display_path(ctx.settings.results_dir, ctx.settings))}</code> · {mode}</span></div>"
    )


def launch_options() -> dict:
    """Gradio 6 takes theme, css and head at launch(). Gradio's run history is off: it copied every
    event's inputs and outputs (whole columns of HTML) into the browser's localStorage on each step
    switch, the largest cost of a switch in the browser. On a public deployment uvicorn is told
    which proxies' X-Forwarded-For to believe first (lab.ui.shell.proxies)."""
    from lab.ui.shell.exports import export_routes
    from lab.ui.shell.proxies import apply_proxy_trust

    apply_proxy_trust(Settings())
    css = CSS_PATH.read_text(encoding="utf-8") if CSS_PATH.exists() else None
    limits = launch_limits()
    app_kwargs = {**limits.pop("app_kwargs", {}), "routes": export_routes()}  # exports download from the lab's route
    return {"theme": gr.themes.Soft(), "css": css, "head": SHORTCUTS_JS + LINKS_JS, "run_history": False, **limits,
            "app_kwargs": app_kwargs, **_no_self_check()}


def _no_self_check() -> dict:
    """Skip launch()'s check that the page answers a HEAD within 3 s (Gradio's `_frontend`): on a loaded
    machine the first render takes longer, and the check then ends the app with "When localhost is not
    accessible, a shareable link must be created" (seen with the Space image at load 28). The lab never
    makes share links, so the check has nothing to decide. Left out where launch() has no such parameter."""
    import inspect

    return {"_frontend": False} if "_frontend" in inspect.signature(gr.Blocks.launch).parameters else {}
