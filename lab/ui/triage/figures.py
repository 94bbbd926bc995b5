"""Triage's figures of a slice: F1 distribution and failure kinds per run, short run labels."""
from __future__ import annotations

import plotly.express as px
import plotly.graph_objects as go

from lab.store.short_labels import short_labels
from lab.triage import FAILURE_KINDS, SliceSpec
from lab.triage.db import query_df
from lab.workspace import LabContext


def slice_figures(ctx: LabContext, spec: SliceSpec):
    """F1 distribution per run, and failure kinds per run, for the whole slice (aggregated in SQL)."""
    from lab.triage.slices import FROM_CLAUSE, slice_where

    where, params = slice_where(spec)
    hist = query_df(
        ctx.store,
        f"""SELECT r.display_name AS run, floor(least(s.command_f1, 0.9999) * 10) / 10 AS f1_bin, count(*) AS steps
            {FROM_CLAUSE} {where} GROUP BY ALL ORDER BY f1_bin""",
        params,
    )
    kinds = query_df(
        ctx.store,
        f"""SELECT r.display_name AS run, coalesce(f.failure_kind, 'unknown') AS failure_kind, count(*) AS steps
            {FROM_CLAUSE} {where} GROUP BY ALL ORDER BY run""",
        params,
    )
    if hist.empty:
        message = ("no runs in the store yet: run a batch, fetch published runs (Results) or "
                   "python -m lab results import FILE" if not ctx.store.scalar("SELECT count(*) FROM runs")
                   else "no step matches this slice: widen the filters")
        return (empty_figure("F1 of the slice's steps", message), empty_figure("Failure kinds in the slice", message))
    labels = short_names([*hist["run"].astype(str), *kinds["run"].astype(str)])
    for frame in (hist, kinds):  # distinct short labels; the full name on hover
        frame["run name"] = frame["run"].astype(str)
        frame["run"] = frame["run name"].map(labels)
    bins = [f"{b / 10:.1f}–{(b + 1) / 10:.1f}" for b in range(10)]
    hist["f1_bin"] = [bins[min(int(round(v * 10)), 9)] for v in hist["f1_bin"]]
    fig_f1 = px.bar(hist, x="f1_bin", y="steps", color="run", barmode="group", hover_data=["run name"],
                    category_orders={"f1_bin": bins}, labels={"f1_bin": "command F1"},
                    title="F1 of the slice's steps")
    fig_kinds = px.bar(kinds, x="run", y="steps", color="failure_kind", title="Failure kinds in the slice",
                       hover_data=["run name"],
                       category_orders={"failure_kind": list(FAILURE_KINDS)})
    fig_f1.update_xaxes(type="category", categoryarray=bins, range=[-0.5, 9.5])
    for fig in (fig_f1, fig_kinds):  # legend under the plot: it never covers the title
        fig.update_layout(height=380, margin=dict(l=40, r=10, t=50, b=40),
                          legend=dict(orientation="h", yanchor="top", y=-0.25, x=0, title=None))
    fig_kinds.update_xaxes(tickangle=-30, automargin=True, title=None)
    return fig_f1, fig_kinds


def empty_figure(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(title=title, height=320, margin=dict(l=40, r=10, t=50, b=40))
    return fig


def short_names(names: list[str], limit: int = 28) -> dict[str, str]:
    """Run name -> a label of about `limit` characters that no other run's label equals
    (lab.store.short_labels: start … end, or where alike names differ)."""
    return short_labels(names, limit)
