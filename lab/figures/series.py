"""The checkpoint-series plot, one for every surface (Triage's series view, Results' plot): on the
checkpoints' own steps, with intervals and each checkpoint's chance of being the best.

One series (lab.analysis.series_judgement): the score with the reference NLL on its own, labelled axis; under it each
checkpoint's Δ score from the first point with its simultaneous 95 % interval; under that each checkpoint's
P(best). It says so where the reference NLL is not recorded; a checkpoint without a score is a gap, never a 0.
Several series (Results, before a filter leaves one): one line each, every checkpoint with the interval of its
change from its series' first point as a bar and its P(best) on hover. No series of runs yet: the
leaderboard's rows naming a checkpoint, as points (no per-step data, so no interval).
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from html import escape
from typing import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab.store.db import Store
from lab.analysis.run_pairs import delta_text, mde_text, verdict_cell
from lab.store.series import named_rows, series_frame, series_plot
from lab.analysis.series_judgement import NO_NLL, SeriesStats, best_text, lead_text, series_stats
from lab.analysis.cache import Admit, shared
from lab.analysis.run_matrix import Hold

MAX_TICKS = 12


def step_ticks(fig: go.Figure, xs: Sequence[float], **where) -> None:
    """The x axis ticks at the checkpoints' own positions (at most MAX_TICKS of them, evenly picked): never a
    fractional step between two checkpoints."""
    values = sorted({float(x) for x in xs if x is not None and x == x})
    if not values:
        return
    every = math.ceil(len(values) / MAX_TICKS)
    shown = values[::every]
    fig.update_xaxes(tickmode="array", tickvals=shown, ticktext=[f"{int(v)}" if v.is_integer() else f"{v:g}" for v in shown], **where)


def _delta_trace(stats: SeriesStats, names: list[str]) -> go.Scatter:
    x = list(stats.points["x"])
    dx, dy, up, down, hover = [x[0]], [0.0], [0.0], [0.0], [f"{names[0]}: first point"]
    for i, found in enumerate(stats.parts[0].deltas["score"], start=1):
        diff = found.difference
        if diff is None:
            continue
        dx.append(x[i])
        dy.append(diff.delta)
        up.append((diff.high - diff.delta) if diff.ci else 0.0)
        down.append((diff.delta - diff.low) if diff.ci else 0.0)
        seen = f" · detects ≥ {mde_text(diff)}" if mde_text(diff) else ""
        hover.append(f"{names[i]}: {delta_text(diff, 2)} {verdict_cell(diff) if diff.ci else ''}{seen}")
    return go.Scatter(x=dx, y=dy, mode="markers", name="Δ score vs first", text=hover, meta="delta",
                      error_y=dict(type="data", symmetric=False, array=up, arrayminus=down, visible=True),
                      hovertemplate="%{text}<extra></extra>")


def _best_trace(stats: SeriesStats, names: list[str]) -> go.Bar:
    ids = list(stats.points["run_id"])
    found = stats.chances
    p = [None if found is None else found.p_best[found.run_ids.index(r)] for r in ids]
    hover = [f"{names[i]} · {best_text(stats, r) or 'not judged: ' + (found.note if found else '')}"
             for i, r in enumerate(ids)]
    return go.Bar(x=list(stats.points["x"]), y=p, name="P(best)", text=hover, meta="p_best",
                  marker_color="#4f46e5", hovertemplate="%{text}<extra></extra>")


def series_stats_figure(stats: SeriesStats) -> go.Figure:
    """Score and reference NLL; Δ score from the first point with its interval; P(best); by checkpoint."""
    pts = stats.points
    x = list(pts["x"])
    names = [escape(str(n)) for n in pts["name"]]  # names come from result files: plotly reads text as markup
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.09, row_heights=[0.46, 0.32, 0.22],
                        specs=[[{"secondary_y": True}], [{}], [{}]],
                        subplot_titles=("score and reference NLL per token",
                                        "Δ score vs the first checkpoint (95 %, simultaneous)",
                                        "P(best): the chance each checkpoint is the best (task resamples)"))
    score = [None if v is None or v != v else float(v) for v in pts["score"]]
    fig.add_trace(go.Scatter(x=x, y=score, mode="lines+markers", name="score", text=names,
                             customdata=list(pts["run_id"]), connectgaps=False, meta="score",
                             hovertemplate="<b>%{text}</b><br>%{x}: score %{y:.2f}<extra></extra>"),
                  row=1, col=1, secondary_y=False)
    nll = [None if v is None or v != v else float(v) for v in pts["ref_nll"]]
    if any(v is not None for v in nll):
        fig.add_trace(go.Scatter(x=x, y=nll, mode="lines+markers", name="reference NLL/token", line=dict(dash="dash"),
                                 text=names, customdata=list(pts["run_id"]), meta="ref_nll",
                                 hovertemplate="<b>%{text}</b><br>%{x}: reference NLL/token %{y:.4f}<extra></extra>"),
                      row=1, col=1, secondary_y=True)
        fig.update_yaxes(title_text="reference NLL per token (lower: closer)", secondary_y=True, row=1, col=1,
                         showline=True, showgrid=False, color="#b45309")
    else:
        fig.add_annotation(text=NO_NLL, xref="paper", yref="paper", x=0.5, y=1.0, showarrow=False,
                           font=dict(size=11, color="#92400e"), bgcolor="#fffbeb")
    fig.add_trace(_delta_trace(stats, names), row=2, col=1)
    fig.add_hline(y=0, line=dict(color="#888", dash="dot"), row=2, col=1)
    fig.add_trace(_best_trace(stats, names), row=3, col=1)
    fig.update_yaxes(title_text="score", row=1, col=1, secondary_y=False)
    fig.update_yaxes(title_text="Δ score", row=2, col=1)
    fig.update_yaxes(title_text="P(best)", range=[0, 1], row=3, col=1)
    fig.update_xaxes(title_text=stats.x_kind, row=3, col=1)
    for row in (1, 2, 3):
        step_ticks(fig, x, row=row, col=1)
    fig.update_layout(title=dict(text=escape(f"{stats.series}: {lead_text(stats)}"), x=0.01, font=dict(size=13)),
                      height=760, template="plotly_white", legend=dict(orientation="h", y=-0.1), margin=dict(r=90))
    return fig


def _overview(stats: list[SeriesStats]) -> go.Figure:
    """One line per series; each checkpoint's bar: the interval of its change from the series' first point."""
    fig = go.Figure()
    xs: list = []
    for st in stats:
        pts = st.points
        names = [escape(str(n)) for n in pts["name"]]
        base = pts["score"].iloc[0]
        up, down, hover = [0.0], [0.0], [f"{names[0]}: first point · {best_text(st, pts['run_id'].iloc[0])}"]
        for i, found in enumerate(st.parts[0].deltas["score"], start=1):
            diff = found.difference
            ok = diff is not None and diff.ci is not None and base == base
            up.append(diff.high - diff.delta if ok else 0.0)
            down.append(diff.delta - diff.low if ok else 0.0)
            hover.append(f"{names[i]}: Δ vs first {delta_text(diff, 2, found.note)} · "
                         f"{best_text(st, pts['run_id'].iloc[i]) or 'no P(best)'}")
        xs += list(pts["x"])
        fig.add_trace(go.Scatter(x=list(pts["x"]), y=list(pts["score"]), mode="lines+markers", meta=st.series,
                                 name=escape(f"{st.series} ({st.x_kind})"), text=hover, customdata=list(pts["run_id"]),
                                 error_y=dict(type="data", symmetric=False, array=up, arrayminus=down, visible=True,
                                              thickness=1),
                                 hovertemplate="%{text}<br>%{x}: score %{y:.2f}<extra></extra>"))
    step_ticks(fig, xs)
    fig.update_layout(title=dict(text="Score against checkpoint, per series: bars are the 95 % interval of each "
                                      "checkpoint's change from its series' first point (simultaneous); hover for "
                                      "P(best)", x=0.01, font=dict(size=13)),
                      xaxis_title="checkpoint step (or epoch)", yaxis_title="score", height=520,
                      template="plotly_white", legend=dict(orientation="h", y=-0.2))
    return fig


def series_plot_with_intervals(store: Store, first56_only: bool = False, name_filter: str = "", *,
                               hold: Hold = nullcontext, admit: Admit = nullcontext) -> go.Figure:
    """Results' series plot: the one series the name filter leaves, in full; several, one line each with their
    intervals; none yet, the leaderboard's checkpoint rows (first56_only does not apply: these are runs)."""
    with hold():
        frame = named_rows(series_frame(store), name_filter)
    if frame.empty:
        with hold():
            fig = series_plot(store, first56_only, name_filter)
        step_ticks(fig, [x for t in fig.data if t.x is not None for x in t.x])
        return fig
    names = list(dict.fromkeys(frame["series"]))
    stats = [series_stats(store, name, hold=hold, admit=admit) for name in names]
    return shared(store, ("series plot", tuple(names)),  # drawn once for everybody (plotly is slow to build)
                  lambda: series_stats_figure(stats[0]) if len(stats) == 1 else _overview(stats))

