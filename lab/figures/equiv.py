"""The equiv_f1 figure: each lab run's equiv score (NOT the published score) against its harness
score, and its spelling gap (equiv − harness, points)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab.figures.style import empty_figure, finish, scatter_by_family, short_unique_labels, unique_labels

TITLE = "equiv F1 (not the published score) vs harness F1"
PENDING_TEXT = "equiv pending"
SKIPPED_TEXT = "equiv skipped: too large"
NEEDS_REPLAY_TEXT = "equiv needs the replay"


def waiting_note(df: pd.DataFrame) -> str:
    """"N runs: equiv pending (being filled in the background)" and the failed ones; '' for none."""
    states = df["equiv_state"] if "equiv_state" in df else pd.Series(dtype=object)
    pending, failed = int((states == "pending").sum()), int((states == "failed").sum())
    skipped, blind = int((states == "skipped").sum()), int((states == "needs_replay").sum())
    parts = []
    if pending:
        parts.append(f"{pending} run{'s' if pending != 1 else ''}: {PENDING_TEXT} (being filled in the background; "
                     "this plot shows them once done)")
    if skipped:
        parts.append(f"{skipped} run{'s' if skipped != 1 else ''}: {SKIPPED_TEXT} (a step past the equiv limits)")
    if blind:
        parts.append(f"{blind} run{'s' if blind != 1 else ''}: {NEEDS_REPLAY_TEXT} (a relative cd; set LAB_REPLAY)")
    if failed:
        parts.append(f"{failed} run{'s' if failed != 1 else ''}: equiv could not be computed")
    return " · ".join(parts)


def equiv_vs_f1_figure(df: pd.DataFrame, title: str = TITLE) -> go.Figure:
    """Top: equiv score vs harness score with the y = x line; below: the spelling gap per run.
    Runs whose equiv columns are not filled yet are counted in the title, never drawn as 0."""
    note = waiting_note(df)
    if "equiv_state" in df:
        df = df[df["equiv_state"] == "done"]
    if df.empty:
        return empty_figure(title, note or "no lab runs with equiv scores yet: import or replay a run")
    if note:
        title = f"{title}<br><sup>{note}</sup>"
    # the spelling gap below, not beside: its run names then sit by its own bars, never by the scatter's points
    data = df.sort_values("spelling_gap", ascending=True, kind="stable")
    full = unique_labels(data)
    labels = short_unique_labels(data)  # distinct; the full name on hover
    fig = make_subplots(rows=2, cols=1, row_heights=[0.6, 0.4], vertical_spacing=0.22,
                        subplot_titles=("equiv score vs harness score", "spelling gap (equiv − harness, points)"))
    hover = ["score", "equiv_score", "spelling_gap", "source"]
    scatter_by_family(fig, df, "score", "equiv_score", row=1, col=1, hover_cols=hover)
    low = float(min(df["score"].min(), df["equiv_score"].min()))
    high = float(max(df["score"].max(), df["equiv_score"].max()))
    fig.add_trace(go.Scatter(x=[low, high], y=[low, high], mode="lines", name="equiv = harness",
                             line=dict(dash="dot", color="#888"), hoverinfo="skip"), row=1, col=1)
    gaps = data["spelling_gap"].astype(float)
    fig.add_trace(go.Bar(x=gaps, y=labels, orientation="h", name="spelling gap", customdata=full,
                         marker=dict(color="#7c3aed"), showlegend=False, texttemplate="+%{x:.2f}",
                         textposition="outside", cliponaxis=False,
                         hovertemplate="%{customdata}: +%{x:.2f} points<extra></extra>"), row=2, col=1)
    fig.update_xaxes(title="harness score (100 × command F1, as published)", row=1, col=1)
    fig.update_yaxes(title="equiv score (100 × equiv F1)", row=1, col=1)
    # a gap of 0 (equiv = harness on every step) is a value, shown as "+0.00", never an empty panel
    fig.update_xaxes(title="points", range=[0, max(1.0, float(gaps.max()) * 1.25)], row=2, col=1)
    fig.update_yaxes(categoryorder="array", categoryarray=labels, automargin=True, row=2, col=1)
    fig = finish(fig, title, height=max(640, 420 + 24 * len(data)))
    if note:
        fig.update_layout(margin=dict(t=90))
    return fig
