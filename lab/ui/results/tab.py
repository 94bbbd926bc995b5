"""The Results tab: the leaderboard (filter, sort, 56/116) and the store's plots; a run row opens Compare."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable, Sequence

import gradio as gr
import pandas as pd

from lab.errors import LabError
from lab.workspace import LabContext
from lab.ui.results.link import build_link_parts, build_series_pick, series_figure, wire_results_link
from lab.ui.shell.equiv_status import STATE_TEXT, mark_equiv_cells, pending_note
from lab.ui.shell.html_text import esc
from lab.ui.shell.notice import render_notice
from lab.ui.shell.wiring import bind, statistics_events

SCOPES = {"56 (2026-05-08 snapshot)": True, "all 116 + lab runs": False}
COLUMNS = ["rank", "name", "source", "score", "per-step rank (95 %)", "Δ score vs baseline [95 %]", "vs baseline",
           "detectable Δ (80 %)", "P(best)", "regret (points)", "settings vs baseline",
           "coverage", "steps", "avg_command_f1", "ref_nll_per_token", "precision",
           "recall", "first_cmd_exact_pct", "valid_json_pct", "sec_per_step", "template_status", "family",
           "training_method", "params_b", "equiv_score", "spelling_gap", "run_id"]  # equiv_*: lab runs only, not the published score
NOT_RECORDED = "not recorded"  # the reference NLL of a run whose model has no score-reference run (never 0)
EQUIV_COLUMNS = ("equiv_score", "spelling_gap")
EQUIV_POLL_SEC = 2.0  # while runs wait for their equiv columns, the table looks again this often
SORTS = ["score", "rank", "name", "precision", "recall", "first_cmd_exact_pct", "valid_json_pct", "sec_per_step",
         "spelling_gap", "ref_nll_per_token"]
MAX_ROWS = 500


def leaderboard_frame(ctx: LabContext, first56: bool, text: str = "", sort: str = "score",
                      baseline: str | None = None) -> pd.DataFrame:
    """The leaderboard rows (published + lab runs), filtered by a name substring, sorted.
    Missing values show as blanks; `run_id` is set on lab runs only."""
    return leaderboard_view(ctx, first56, text, sort, baseline)[0]


def leaderboard_view(ctx: LabContext, first56: bool, text: str = "", sort: str = "score",
                     baseline: str | None = None) -> tuple[pd.DataFrame, str]:
    """The leaderboard frame with each row's per-step rank range (and, against a baseline, its Δ score
    and verdict; lab.analysis.leaderboard), and the line saying what those intervals are."""
    from lab.analysis.leaderboard import check_baseline, leaderboard_rows, with_comparisons

    if ctx.store is None:
        raise LabError(ctx.store_error or "the results database is not open")
    df, runs = leaderboard_rows(ctx.store, first56, sort or "score", ctx.store_session)
    with ctx.store_session() as store:
        baseline = check_baseline(store, baseline)
    df, note = with_comparisons(ctx.store, df, baseline, hold=ctx.store_session, admit=ctx.stats_admission, runs=runs)
    if text:
        df = df[df["name"].astype(str).str.contains(text.strip(), case=False, regex=False)]
    df = df.head(MAX_ROWS).reset_index(drop=True)
    states = df["equiv_state"] if "equiv_state" in df.columns else pd.Series([None] * len(df), dtype=object)
    shown = df[[c for c in COLUMNS if c in df.columns]]
    cells = shown.astype(object).where(shown.notna(), "")
    if "ref_nll_per_token" in cells.columns:
        nll = shown["ref_nll_per_token"]
        cells["ref_nll_per_token"] = [NOT_RECORDED if pd.isna(v) else round(float(v), 4) for v in nll]
    return mark_equiv_cells(cells, EQUIV_COLUMNS, states), note


def stats_note_html(note: str) -> str:
    """The line under the table saying what its ranks and intervals are."""
    return f'<div class="lab-muted" id="lab-lb-stats-note">{esc(note)}</div>' if note else ""


def baseline_options(ctx: LabContext) -> list[tuple[str, str]]:
    """The baseline picker's runs (every stored run with per-step answers)."""
    from lab.analysis.leaderboard import baseline_choices

    if ctx.store is None:
        return []
    with ctx.store_session() as store:
        return baseline_choices(store)


def count_html(df: pd.DataFrame, first56: bool) -> str:
    """"N rows" over the table (with how many are lab runs, and how many wait for their equiv columns)."""
    runs = int((df["source"] == "run").sum()) if "source" in df.columns else 0
    scope = "first-56 snapshot" if first56 else "116 published + lab runs"
    extra = f" · {runs} lab run{'s' if runs != 1 else ''} (click one to open it in Compare)" if runs else ""
    rows = f"{len(df)} row{'' if len(df) == 1 else 's'}"
    pending = pending_note(equiv_pending_rows(df), "; this table updates when done")
    return (f'<div class="lab-muted" id="lab-lb-count"><b data-rows="{len(df)}">{rows}</b> · {scope}{extra}'
            f'{" · " + pending if pending else ""}</div>')


def equiv_pending_rows(df: pd.DataFrame) -> int:
    """Rows of a leaderboard frame whose equiv columns say "equiv pending"."""
    return int((df["equiv_score"] == STATE_TEXT["pending"]).sum()) if "equiv_score" in df.columns else 0


def plot_registry() -> dict[str, Callable[[Any, bool], Any]]:
    """Plot name -> function(store, first56) from lab.figures.plots (empty when it is absent)."""
    try:
        plots = importlib.import_module("lab.figures.plots")
    except ImportError as exc:
        if exc.name and "lab.figures.plots".startswith(exc.name):
            return {}
        raise
    registry = getattr(plots, "PLOTS", None)
    return dict(registry) if isinstance(registry, dict) else {}


def draw_plot(ctx: LabContext, name: str, first56: bool, name_filter: str = ""):
    """The plotly figure of plot `name`, narrowed like the table by the name filter
    (LabError for an unknown plot or a store problem)."""
    plots = plot_registry()
    if name not in plots:
        raise LabError(f"unknown plot '{name}'; choose one of: {', '.join(plots)}")
    if ctx.store is None:
        raise LabError(ctx.store_error or "the results database is not open")
    return plots[name](ctx.store, first56, name_filter=name_filter or "", hold=ctx.store_session,
                       admit=ctx.stats_admission)


def selected_run_id(df: pd.DataFrame, index: Any, row_value: Sequence[Any] | None) -> str | None:
    """The run id of the clicked leaderboard row (None for a published row without answers)."""
    run_id = None
    if row_value is not None and "run_id" in df.columns and len(row_value) == len(df.columns):
        run_id = row_value[list(df.columns).index("run_id")]
    else:
        row = index[0] if isinstance(index, (list, tuple)) else index
        if "run_id" in df.columns and isinstance(row, int) and 0 <= row < len(df):
            run_id = df.iloc[row]["run_id"]
    if run_id is None or (isinstance(run_id, float) and pd.isna(run_id)) or not str(run_id).strip():
        return None
    return str(run_id)


def broken_files_notice(ctx: LabContext) -> str:
    """A notice listing the result files the store could not import, each with its reason
    (paths relative to the results folder)."""
    root = str(Path(ctx.settings.results_dir).resolve()) + "/"
    items = "".join(
        f"<li><code>{esc(name.replace(root, ''))}</code>: {esc(why.replace(root, '').removeprefix(name.replace(root, '') + ': '))}</li>"
        for name, why in ctx.broken_results
    )
    n = len(ctx.broken_results)
    return render_notice(f"{n} result file{'s' if n != 1 else ''} not imported (fix or remove, then restart)",
                         f"<ul>{items}</ul>", "warn")


def refresh_leaderboard(ctx: LabContext, scope_label: str, filter_text: str, sort_key: str,
                        baseline_id: str | None = None) -> tuple:
    """The leaderboard as scoped, filtered and sorted: table, count, runs pending equiv, the poll timer, note."""
    first56 = SCOPES.get(scope_label, False)
    try:
        df, note = leaderboard_view(ctx, first56, filter_text or "", sort_key or "score", baseline_id)
    except LabError as exc:
        gr.Warning(str(exc))
        return gr.update(), gr.update(), gr.update(), gr.update(), gr.update()
    pending = equiv_pending_rows(df)
    if pending:
        ctx.kick_equiv()  # also fills runs another process left pending
    return df, count_html(df, first56), pending, gr.Timer(active=pending > 0), stats_note_html(note)


def poll_equiv(ctx: LabContext, with_plot: bool, scope_label: str, filter_text: str, sort_key: str,
               baseline_id: str | None, shown: int, plot_name: str | None = None) -> tuple:
    """While runs wait for their equiv columns: redraw only when that number changed."""
    df, html, pending, timer, note = refresh_leaderboard(ctx, scope_label, filter_text, sort_key, baseline_id)
    if pending == shown or not isinstance(pending, int):
        return gr.update(), gr.update(), shown, timer, gr.update(), *([gr.update()] if with_plot else [])
    return df, html, pending, timer, note, *([show_plot(ctx, plot_name, scope_label, filter_text)] if with_plot else [])


def show_plot(ctx: LabContext, name: str, scope_label: str, filter_text: str = "") -> Any:
    """The plot `name` for the leaderboard's scope and filter (None after a warning)."""
    try:
        return draw_plot(ctx, name, SCOPES.get(scope_label, False), filter_text or "")
    except LabError as exc:
        gr.Warning(str(exc))
        return None


def open_run(open_in_compare, df: pd.DataFrame, evt: gr.SelectData, request: gr.Request) -> tuple:
    """Open the clicked lab run in Compare (a published row without answers says so)."""
    run_id = selected_run_id(df, evt.index, evt.row_value)
    if run_id is None:
        gr.Info("This is a published leaderboard row without per-step answers; click a lab run (source 'run').")
        return tuple(gr.update() for _ in open_in_compare.outputs)
    return open_in_compare([run_id], None, request)


def baseline_choices(ctx: LabContext) -> Any:
    """The baseline picker with the runs in the store now."""
    return gr.update(choices=baseline_options(ctx))


def build_results_tab(ctx: LabContext, open_in_compare, published_panel: Callable[[LabContext], None]) -> None:
    """Lay out the Results tab and wire its events; `published_panel` lays out the published runs' panel
    under the leaderboard (the app passes lab.ui.published.panel.build_published_panel)."""
    with gr.Tab("Results", id="results") as tab:
        if ctx.store is None:
            gr.HTML(render_notice("Results database unavailable", esc(ctx.store_error or "not opened"), "error"))
            return
        if ctx.broken_results:
            gr.HTML(broken_files_notice(ctx), elem_id="lab-broken-results")
        link, link_note = build_link_parts()
        with gr.Row(equal_height=True):
            scope = gr.Radio(list(SCOPES), value=list(SCOPES)[1], label="leaderboard", scale=2,
                             elem_id="lab-lb-scope")
            text = gr.Textbox(label="filter by name", placeholder="e.g. Qwen3.5, LFM, checkpoint", scale=2,
                              elem_id="lab-lb-filter")
            sort = gr.Dropdown(SORTS, value="score", label="sort by", scale=1, elem_id="lab-lb-sort")
            baseline = gr.Dropdown(baseline_options(ctx), value=None, label="baseline (Δ score of every row against it)",
                                   scale=3, elem_id="lab-lb-baseline")
        first, first_note = leaderboard_view(ctx, False)
        count = gr.HTML(count_html(first, False), elem_id="lab-lb-count-box")
        shown_pending = gr.State(equiv_pending_rows(first))  # runs shown "equiv pending" in this page
        equiv_timer = gr.Timer(EQUIV_POLL_SEC, active=equiv_pending_rows(first) > 0)
        table = gr.Dataframe(first, interactive=False, wrap=False, max_height=520, show_search="none",
                             elem_id="lab-leaderboard", label="leaderboard (click a lab run's row to open it in Compare)")
        stats_note = gr.HTML(stats_note_html(first_note), elem_id="lab-lb-stats-note-box")
        published_panel(ctx)
        plots = plot_registry()
        which = plot = None
        with gr.Row(equal_height=True):
            if plots:
                which = gr.Dropdown(list(plots), value=next(iter(plots)), label="plot", scale=3, elem_id="lab-plot-pick")
            series = build_series_pick(ctx)
        if plots:
            plot = gr.Plot(elem_id="lab-results-plot", label="plot")
        else:
            gr.HTML('<div class="lab-muted">plots appear here once lab/figures/plots.py provides PLOTS</div>')

    inputs = [scope, text, sort, baseline]
    refresh, draw = bind(refresh_leaderboard, ctx), bind(series_figure, ctx, show_plot)  # a series picked, or the plot
    outputs = [table, count, shown_pending, equiv_timer, stats_note]
    quiet = {"api_visibility": "private", "show_progress": "hidden", **statistics_events()}
    for comp in (scope, sort, baseline):
        comp.change(refresh, inputs, outputs, **quiet)
    text.change(refresh, inputs, outputs, **quiet)
    tab.select(refresh, inputs, outputs, **quiet)
    tab.select(bind(baseline_choices, ctx), None, baseline, api_visibility="private",
               show_progress="hidden")
    equiv_timer.tick(bind(poll_equiv, ctx, bool(plots)), [*inputs, shown_pending, *([which] if plots else [])],
                     [*outputs, *([plot] if plots else [])], **quiet)
    table.select(bind(open_run, open_in_compare), table, open_in_compare.outputs, api_visibility="private")
    wire_results_link(ctx, tab, baseline, series, which, link, link_note, baseline_options)
    if plots:
        which.change(draw, [series, which, scope, text], plot, api_visibility="private", **statistics_events())
        for comp in (series, scope, text):
            comp.change(draw, [series, which, scope, text], plot, **quiet)
        tab.select(draw, [series, which, scope, text], plot, **quiet)
