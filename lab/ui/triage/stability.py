"""Triage's "Sampling stability" panel: unstable steps, mean F1 vs stability per run, samples A vs B."""
from __future__ import annotations

import gradio as gr
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from lab.errors import LabError
from lab.runs.samples import load_stability_defaults
from lab.triage.stability import (
    LOSS, TIE, WIN, head_to_head_summary, sampled_runs, samples_head_to_head, stability_by_run, unstable_steps,
    verdict_flips,
)  # fmt: skip
from lab.ui.shell.wiring import bind
from lab.ui.triage.handlers import open_row
from lab.workspace import LabContext

VERDICT_COLOURS = {WIN: "#2e7d32", LOSS: "#c62828", TIE: "#9e9e9e"}


def run_choices(ctx: LabContext) -> list[tuple[str, str]]:
    """(label, run_id) of every run with samples."""
    if ctx.store is None:
        return []
    df = sampled_runs(ctx.store)
    return [(f"{r.display_name} · {r.samples} samples · {r.run_id}", r.run_id) for r in df.itertuples()]


def stability_figure(df: pd.DataFrame):
    """Mean F1 over samples (y) against the mean F1 std across samples (x), one point per run."""
    fig = px.scatter(
        df, x="f1_std_mean", y="mean_f1_over_samples", text="run", size_max=12,
        hover_data={"sample0_f1": True, "pass_at_1": True, "unstable_pct": True, "samples": True, "run": False},
        labels={"f1_std_mean": "instability: F1 std across samples (mean over steps)",
                "mean_f1_over_samples": "mean F1 over samples", "sample0_f1": "greedy/sample-0 F1",
                "unstable_pct": "unstable steps %"},
        title="Mean F1 against stability per run (up and left is better)",
    )
    fig.update_traces(textposition="top center", marker=dict(size=11))
    fig.update_layout(height=380, margin=dict(l=50, r=10, t=40, b=50))
    return fig


def head_to_head_figure(table: pd.DataFrame, a_label: str, b_label: str):
    """Per step: mean sample F1 of A (x) against B (y), coloured by who is better; the diagonal is a tie."""
    fig = px.scatter(table, x="a_mean_f1", y="b_mean_f1", color="samples_say", hover_data=["step_key", "delta"],
                     color_discrete_map=VERDICT_COLOURS, category_orders={"samples_say": [WIN, LOSS, TIE]},
                     labels={"a_mean_f1": f"A: {a_label}", "b_mean_f1": f"B: {b_label}", "samples_say": "samples say"},
                     title="Mean sample F1 per step, A vs B")
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(dash="dot", color="#888"),
                             showlegend=False, hoverinfo="skip"))
    fig.update_layout(height=380, margin=dict(l=50, r=10, t=40, b=50), xaxis_range=[-0.03, 1.03],
                      yaxis_range=[-0.03, 1.03])
    return fig


def show_unstable(ctx: LabContext, ids: list[str] | None, min_spread: float) -> tuple:
    """The unstable steps of the runs `ids` (all sampled runs when none), a line about them, and mean F1 vs
    stability per run."""
    try:
        df = unstable_steps(ctx.store, list(ids or []), float(min_spread))
        per_run = stability_by_run(ctx.store, float(min_spread))
    except LabError as exc:
        gr.Warning(str(exc))
        return gr.update(), gr.update(), gr.update()
    if ids:
        per_run = per_run[per_run["run_id"].isin(list(ids))]
    line = (f"**{len(df)}** unstable steps (F1 spread ≥ {float(min_spread):g})"
            + (" · showing the first 500" if len(df) >= 500 else "") + f" in {per_run.shape[0]} sampled runs")
    return line, df, stability_figure(per_run) if len(per_run) else None


def refresh_runs(ctx: LabContext) -> tuple:
    """The three run pickers of the panel, with the sampled runs in the store now."""
    choices = run_choices(ctx)
    return gr.update(choices=choices), gr.update(choices=choices), gr.update(choices=choices)


def compare_samples(ctx: LabContext, a: str | None, b: str | None, min_margin: float | None) -> tuple:
    """Runs A and B step by step on their samples: summary, a line, the figure, the steps."""
    if not a or not b:
        gr.Warning("pick runs A and B (runs with samples)")
        return gr.update(), gr.update(), gr.update(), gr.update()
    try:
        table_df = samples_head_to_head(ctx.store, a, b, float(min_margin or 0))
    except LabError as exc:
        gr.Warning(str(exc))
        return gr.update(), gr.update(), gr.update(), gr.update()
    labels = dict((rid, label) for label, rid in run_choices(ctx))
    note = (f"{len(table_df)} steps both runs sampled · samples and greedy answers disagree on "
            f"**{verdict_flips(table_df)}** of them")
    fig = head_to_head_figure(table_df, labels.get(a, a), labels.get(b, b)) if len(table_df) else None
    return head_to_head_summary(table_df), note, fig, table_df


def open_unstable_row(open_in_compare, df: pd.DataFrame, evt: gr.SelectData, request: gr.Request) -> tuple:
    """Open the clicked unstable step's run in Compare at that step."""
    return open_row(open_in_compare, df, evt, request, lambda rec: [str(rec["run_id"])])


def open_samples_row(open_in_compare, df: pd.DataFrame, a: str | None, b: str | None, evt: gr.SelectData,
                     request: gr.Request) -> tuple:
    """Open the clicked step of A vs B in Compare with both runs."""
    return open_row(open_in_compare, df, evt, request, lambda rec: [r for r in (a, b) if r])


def build_stability_panel(ctx: LabContext, open_in_compare) -> None:
    """Mount the panel (inside the Triage tab) and wire it."""
    defaults = load_stability_defaults()
    try:
        runs = run_choices(ctx)
    except LabError:
        runs = []
    with gr.Accordion("Sampling stability (runs replayed with --samples N)", open=False,
                      elem_id="triage-stability"):
        with gr.Row():
            run_ids = gr.Dropdown(runs, multiselect=True, label="Sampled runs (empty: all)", scale=3,
                                  elem_id="stability-runs")
            spread = gr.Slider(0, 1, value=defaults.unstable_spread, step=0.05,
                               label="Unstable: F1 spread (max − min) across samples ≥", elem_id="stability-spread")
            show_btn = gr.Button("Show unstable steps", variant="primary", elem_id="stability-show")
            refresh = gr.Button("Refresh runs", scale=0)
        summary = gr.Markdown(elem_id="stability-summary")
        table = gr.Dataframe(interactive=False, max_height=360, elem_id="stability-table")
        by_run_plot = gr.Plot(label="Mean F1 vs stability", elem_id="stability-plot")
        gr.Markdown("**Whose samples are better?** Per step, the mean F1 of each run's samples "
                    "(not only the greedy / sample-0 answer).")
        with gr.Row():
            run_a = gr.Dropdown(runs, label="Run A", elem_id="stability-a")
            run_b = gr.Dropdown(runs, label="Run B", elem_id="stability-b")
            margin = gr.Number(0.0, label="Better by more than", minimum=0, maximum=1)
            h2h_btn = gr.Button("Compare samples", elem_id="stability-h2h")
        h2h_summary = gr.Dataframe(interactive=False, elem_id="stability-h2h-summary")
        h2h_note = gr.Markdown()
        h2h_plot = gr.Plot(label="A vs B")
        h2h_table = gr.Dataframe(interactive=False, max_height=360, elem_id="stability-h2h-table")

    show_btn.click(bind(show_unstable, ctx), [run_ids, spread], [summary, table, by_run_plot], api_name="unstable_steps")
    refresh.click(bind(refresh_runs, ctx), None, [run_ids, run_a, run_b], api_visibility="private")
    h2h_btn.click(bind(compare_samples, ctx), [run_a, run_b, margin], [h2h_summary, h2h_note, h2h_plot, h2h_table],
                  api_name="samples_head_to_head")
    table.select(bind(open_unstable_row, open_in_compare), table, open_in_compare.outputs, api_visibility="private")
    h2h_table.select(bind(open_samples_row, open_in_compare), [h2h_table, run_a, run_b], open_in_compare.outputs,
                     api_visibility="private")


__all__ = ["build_stability_panel", "stability_figure", "head_to_head_figure", "run_choices"]
