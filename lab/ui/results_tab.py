"""The Results tab: the leaderboard (filter, sort, 56/116) and the store's plots; a run row opens Compare."""
from __future__ import annotations

import importlib
from typing import Any, Callable

import gradio as gr
import pandas as pd

from lab.errors import LabError
from lab.ui.context import LabContext
from lab.ui.render_html import render_notice, esc

SCOPES = {"56 (2026-05-08 snapshot)": True, "all 116 + lab runs": False}
COLUMNS = ["rank", "name", "source", "score", "avg_command_f1", "precision", "recall", "first_cmd_exact_pct",
           "valid_json_pct", "sec_per_step", "template_status", "family", "training_method", "params_b", "run_id"]
SORTS = ["score", "rank", "name", "precision", "recall", "first_cmd_exact_pct", "valid_json_pct", "sec_per_step"]
MAX_ROWS = 500


def leaderboard_frame(ctx: LabContext, first56: bool, text: str = "", sort: str = "score") -> pd.DataFrame:
    """The leaderboard rows (published + lab runs), filtered by a name substring, sorted."""
    from lab.store import queries

    with ctx._store_lock:
        df = queries.leaderboard(ctx.store, first56_only=first56, include_runs=not first56, order=sort)
    if text:
        df = df[df["name"].astype(str).str.contains(text, case=False, regex=False)]
    cols = [c for c in COLUMNS if c in df.columns]
    return df[cols].head(MAX_ROWS).reset_index(drop=True)


def plot_registry() -> dict[str, Callable[[Any, bool], Any]]:
    """Plot name -> function(store, first56) from lab.store.plots (empty when it is absent)."""
    try:
        plots = importlib.import_module("lab.store.plots")
    except ImportError as exc:
        if exc.name and "lab.store.plots".startswith(exc.name):
            return {}
        raise
    registry = getattr(plots, "PLOTS", None)
    return dict(registry) if isinstance(registry, dict) else {}


def build_results_tab(ctx: LabContext, open_in_compare) -> None:
    """Lay out the Results tab and wire its events."""
    with gr.Tab("Results", id="results"):
        if ctx.store is None:
            gr.HTML(render_notice("Results database unavailable", esc(ctx.store_error or "not opened"), "error"))
            return
        with gr.Row(equal_height=True):
            scope = gr.Radio(list(SCOPES), value=list(SCOPES)[1], label="leaderboard", scale=2)
            text = gr.Textbox(label="filter by name", placeholder="e.g. Qwen3.5, LFM, checkpoint", scale=2)
            sort = gr.Dropdown(SORTS, value="score", label="sort by", scale=1)
        table = gr.Dataframe(leaderboard_frame(ctx, False), interactive=False, wrap=False, max_height=520,
                             show_search="none", elem_id="lab-leaderboard", label="click a lab run's row to open it in Compare")
        plots = plot_registry()
        if plots:
            with gr.Row(equal_height=True):
                which = gr.Dropdown(list(plots), value=next(iter(plots)), label="plot", scale=3)
            plot = gr.Plot(elem_id="lab-results-plot")

            def draw(name: str, scope_label: str):
                try:
                    with ctx._store_lock:
                        return plots[name](ctx.store, SCOPES.get(scope_label, False))
                except LabError as exc:
                    gr.Warning(str(exc))
                    return None

            which.change(draw, [which, scope], plot, api_visibility="private")
            scope.change(draw, [which, scope], plot, api_visibility="private")
        else:
            gr.HTML('<div class="lab-muted">plots appear here once lab/store/plots.py provides PLOTS</div>')

    def refresh(scope_label: str, filter_text: str, sort_key: str):
        try:
            return leaderboard_frame(ctx, SCOPES.get(scope_label, False), filter_text or "", sort_key or "score")
        except LabError as exc:
            gr.Warning(str(exc))
            return gr.update()

    def on_select(df: pd.DataFrame, evt: gr.SelectData):
        row = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        run_id = df.iloc[row]["run_id"] if "run_id" in df.columns and row < len(df) else None
        if run_id is None or pd.isna(run_id) or not str(run_id):
            gr.Info("This is a published leaderboard row without per-step answers; pick a lab run to open it.")
            return tuple(gr.update() for _ in open_in_compare.outputs)
        return open_in_compare([str(run_id)], None)

    for comp in (scope, sort):
        comp.change(refresh, [scope, text, sort], table, api_visibility="private")
    text.submit(refresh, [scope, text, sort], table, api_visibility="private")
    table.select(on_select, table, open_in_compare.outputs, api_visibility="private")
