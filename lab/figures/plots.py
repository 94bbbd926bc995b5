"""Plotly figures from query results: each function takes a DataFrame (lab.store.queries) and returns a Figure."""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab.store import queries
from lab.store.db import Store
from lab.figures.equiv import equiv_vs_f1_figure
from lab.store.short_labels import short_labels
from lab.analysis.run_matrix import Hold
from lab.figures.style import (
    empty_figure, family_color, finish, hover_data, scatter_by_family, style, training_symbol,
    unique_labels,
)


# -- the plots ------------------------------------------------------------------------------------
def leaderboard_figure(df: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Score bars, best on top, coloured by family; starred/approximate scores hatched '/', partial runs 'x'."""
    n_pub = int((df.get("source") == "published").sum()) if len(df) else 0
    title = title or f"TB2-lite corrected leaderboard: {n_pub} published" + (
        f" + {len(df) - n_pub} runs" if len(df) > n_pub else ""
    )
    if df.empty:
        return empty_figure(title)
    data = df.sort_values("score", ascending=True, kind="stable").assign(_label=lambda d: unique_labels(d))
    data = data.reset_index(drop=True)  # positions: the hover rows of every trace are taken from one table
    hover, template = hover_data(data, ["score", "precision", "recall", "valid_json_pct", "sec_per_step", "source",
                                        "rank", "coverage"])
    fig = go.Figure()
    for family, part in data.groupby(data["family"].fillna("unknown"), sort=True):
        custom = hover[part.index.to_numpy()]
        marked = part["score_marked"].fillna(False).astype(bool) if "score_marked" in part else pd.Series(False, index=part.index)
        partial = part["partial"].fillna(False).astype(bool) if "partial" in part else pd.Series(False, index=part.index)
        fig.add_trace(go.Bar(
            x=part["score"], y=part["_label"], orientation="h", name=family, text=part["_label"],
            textposition="none", customdata=custom, hovertemplate=template,
            marker=dict(color=family_color(family), pattern_shape=["/" if m else "x" if p else "" for m, p in zip(marked, partial)],
                        line=dict(width=[2 if s == "run" else 0 for s in part["source"]], color="#111")),
        ))
    fig.update_yaxes(categoryorder="array", categoryarray=data["_label"].tolist(), title=None)
    fig.update_xaxes(title="score (100 × command F1)")
    return finish(fig, title, height=max(style()["height"], style()["bar_row_px"] * len(data) + 120), barmode="overlay")


def score_vs_params_figure(df: pd.DataFrame, title: str = "Score vs parameters") -> go.Figure:
    """Log-x scatter, total parameters and active parameters (MoE) side by side."""
    if df.empty:
        return empty_figure(title)
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("total parameters (B)", "active parameters (B; dense = total)"))
    hover = ["params_b", "active_params_b", "score", "training", "source"]
    scatter_by_family(fig, df, "params_b", "score", row=1, col=1, hover_cols=hover)
    scatter_by_family(fig, df, "active_params_b", "score", row=1, col=2, show_legend=False, hover_cols=hover)
    fig.update_xaxes(type="log", title="billions of parameters (log)")
    fig.update_yaxes(title="score", row=1, col=1)
    return finish(fig, title)


def precision_recall_figure(df: pd.DataFrame, title: str = "Command precision vs recall") -> go.Figure:
    """Scatter with iso-F1 guide curves."""
    if df.empty:
        return empty_figure(title)
    fig = go.Figure()
    for f1 in (0.2, 0.4, 0.6, 0.8):
        ps = [f1 / (2 - f1) + i * (1 - f1 / (2 - f1)) / 60 for i in range(61)]
        rs = [f1 * p / (2 * p - f1) for p in ps]
        fig.add_trace(go.Scatter(x=ps, y=rs, mode="lines", name=f"F1 = {f1}", showlegend=False, hoverinfo="skip",
                                 line=dict(color="#bbb", dash="dot", width=1), meta="iso-f1"))
    scatter_by_family(fig, df, "precision", "recall", hover_cols=["precision", "recall", "avg_command_f1", "source"])
    fig.update_xaxes(title="avg command precision", range=[0, 1])
    fig.update_yaxes(title="avg command recall", range=[0, 1])
    return finish(fig, title)


def json_vs_f1_figure(df: pd.DataFrame, title: str = "Valid JSON vs command F1") -> go.Figure:
    if df.empty:
        return empty_figure(title)
    fig = go.Figure()
    scatter_by_family(fig, df, "valid_json_pct", "avg_command_f1", hover_cols=["valid_json_pct", "avg_command_f1", "source"])
    fig.update_xaxes(title="valid JSON (%)", range=[0, 101])
    fig.update_yaxes(title="avg command F1")
    return finish(fig, title)


def pareto_front(df: pd.DataFrame, x: str = "sec_per_step", y: str = "score") -> pd.DataFrame:
    """Rows no other row beats on both: nothing faster (smaller x) scores as high. Sorted by x."""
    data = df.dropna(subset=[x, y]).sort_values([x, y], ascending=[True, False], kind="stable")
    keep, best = [], float("-inf")
    for idx, value in zip(data.index, data[y]):
        if value > best:
            keep.append(idx)
            best = value
    return data.loc[keep]


def speed_vs_score_figure(df: pd.DataFrame, title: str = "Seconds per step vs score") -> go.Figure:
    """Log-x scatter with the Pareto front (the fastest model for each score level) drawn as a step line."""
    if df.empty:
        return empty_figure(title)
    fig = go.Figure()
    scatter_by_family(fig, df, "sec_per_step", "score", hover_cols=["sec_per_step", "score", "source"])
    front = pareto_front(df)
    fig.add_trace(go.Scatter(
        x=front["sec_per_step"], y=front["score"], mode="lines+markers", name="Pareto front (fastest for score)",
        text=unique_labels(front), line=dict(shape="hv", color="#111", width=2, dash="dash"),
        marker=dict(size=14, symbol="circle-open", color="#111"), meta="pareto",
        hovertemplate="<b>%{text}</b><br>%{x} s/step<br>score %{y}<extra>Pareto</extra>",
    ))
    fig.update_xaxes(type="log", title="seconds per step (batched, log)")
    fig.update_yaxes(title="score")
    return finish(fig, title)


def bucket_figure(df: pd.DataFrame, title: str = "Command F1 by replay position (early / mid / late)") -> go.Figure:
    """Grouped bars: one trace per run / published checkpoint, x = bucket."""
    if df.empty:
        return empty_figure(title, "no run with per-step data selected")
    order = style()["bucket_order"]
    fig = go.Figure()
    labels = short_labels(df["name"].astype(str))  # distinct legend entries; the full name on hover
    for name, part in df.groupby("name", sort=False):
        part = part.set_index("bucket").reindex(order)
        fig.add_trace(go.Bar(
            x=order, y=part["avg_command_f1"], name=labels[str(name)], meta=str(name),
            customdata=part[["steps"]].astype(object).where(part[["steps"]].notna(), "—").to_numpy(),
            hovertemplate="%{x}: F1 %{y}<br>steps %{customdata[0]}<extra>%{meta}</extra>",
        ))
    fig.update_xaxes(title="bucket (step_idx ≤1 / 2–4 / ≥5)", categoryorder="array", categoryarray=order)
    fig.update_yaxes(title="avg command F1", range=[0, 1])
    return finish(fig, title, barmode="group")


def source_group_figure(df: pd.DataFrame, title: str = "Command F1 by source group") -> go.Figure:
    """Heatmap run × source group; published checkpoints list only their top/bottom 3 groups."""
    if df.empty:
        return empty_figure(title, "no run with per-step data selected")
    grid = df.pivot_table(index="name", columns="source_group", values="avg_command_f1", aggfunc="first", sort=True)
    labels = short_labels(grid.index.astype(str))  # distinct row labels; the full name on hover
    fig = go.Figure(go.Heatmap(
        z=grid.to_numpy(), x=grid.columns.tolist(), y=[labels[str(n)] for n in grid.index], zmin=0, zmax=1,
        colorscale="Viridis", colorbar=dict(title="F1"), texttemplate="%{z:.2f}",
        customdata=[[str(n)] * len(grid.columns) for n in grid.index],
        hovertemplate="%{customdata}<br>%{x}: F1 %{z}<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed")
    return finish(fig, title, height=max(style()["height"], 28 * len(grid) + 160))


def checkpoint_series_figure(df: pd.DataFrame, title: str = "Score by epoch / checkpoint") -> go.Figure:
    """One line per series (same name up to its epoch / checkpoint number); epochs and steps on separate axes."""
    if df.empty:
        return empty_figure(title, "no model with epochs or checkpoints matches")
    kinds = [k for k in ("epoch", "checkpoint step") if k in set(df["x_kind"])]
    fig = make_subplots(rows=1, cols=len(kinds), subplot_titles=kinds, shared_yaxes=True)
    labels = short_labels(df["series"].astype(str))  # distinct legend entries; each point's full name on hover
    for col, kind in enumerate(kinds, start=1):
        for series, part in df[df["x_kind"] == kind].groupby("series", sort=True):
            part = part.sort_values("x")
            fig.add_trace(go.Scatter(
                x=part["x"], y=part["score"], mode="lines+markers", name=labels[str(series)], meta=str(series),
                text=part["name"],
                marker=dict(color=family_color(part["family"].iloc[0]), symbol=training_symbol(part["training_method"].iloc[0]), size=9),
                hovertemplate="<b>%{text}</b><br>" + kind + " %{x}: score %{y}<extra></extra>",
            ), row=1, col=col)
        fig.update_xaxes(title=kind, row=1, col=col)
    fig.update_yaxes(title="score", row=1, col=1)
    return finish(fig, title)


def tb2lite_vs_tblite_figure(df: pd.DataFrame, title: str = "TB2-lite vs TB Lite / TB 2.1 (separate benchmarks)") -> go.Figure:
    """Side by side, one panel and one y axis per benchmark: the scales are never mixed."""
    if df.empty:
        return empty_figure(title, "no base model appears in both benchmarks")
    s = style()
    benches = [b for b in s["benchmark_order"] if b in set(df["benchmark"])]
    fig = make_subplots(rows=1, cols=len(benches), shared_yaxes=False, subplot_titles=benches, horizontal_spacing=0.08)
    for col, bench in enumerate(benches, start=1):
        part = df[df["benchmark"] == bench].sort_values("score", ascending=False, kind="stable")
        spread = part["spread"]
        fig.add_trace(go.Bar(
            x=[str(n).split("/")[-1] for n in part["name"]], y=part["score"], name=bench, showlegend=False,
            text=part["name"], textposition="none",
            error_y=dict(type="data", array=spread.fillna(0).tolist(), visible=bool(spread.notna().any())),
            hovertemplate="%{text}<br>" + bench + ": %{y}<extra></extra>",
        ), row=1, col=col)
        fig.update_yaxes(title=s["benchmark_axis_titles"].get(bench, bench), row=1, col=col, rangemode="tozero")
        fig.update_xaxes(tickangle=-35, row=1, col=col)
    bases = ", ".join(sorted(set(df["base_model"].dropna())))
    note = f"base model {bases} · different benchmarks and scales: compare within a panel only"
    fig = finish(fig, f"{title}<br><sup>{note}</sup>", height=580)
    fig.update_layout(margin=dict(t=100))
    return fig


# -- registries ------------------------------------------------------------------------------------
# plot name -> (query function, figure function): `figure_for(store, name, **query_params)`
PLOT_SPECS: dict[str, tuple[Callable[..., pd.DataFrame], Callable[[pd.DataFrame], go.Figure]]] = {
    "leaderboard": (queries.leaderboard, leaderboard_figure),
    "score_vs_params": (queries.score_vs_params, score_vs_params_figure),
    "precision_recall": (queries.precision_recall, precision_recall_figure),
    "json_vs_f1": (queries.json_vs_f1, json_vs_f1_figure),
    "speed_vs_score": (queries.speed_vs_score, speed_vs_score_figure),
    "by_bucket": (queries.by_bucket, bucket_figure),
    "by_source_group": (queries.by_source_group, source_group_figure),
    "checkpoint_series": (queries.checkpoint_series, checkpoint_series_figure),
    "tb2lite_vs_tblite": (queries.tb2lite_vs_tblite, tb2lite_vs_tblite_figure),
    "equiv_vs_f1": (queries.equiv_vs_f1, equiv_vs_f1_figure),
}


def name_filtered(df: pd.DataFrame, text: str = "") -> pd.DataFrame:
    """Rows whose name contains `text` (case-insensitive; the Results tab's filter, for plots too)."""
    text = (text or "").strip()
    if not text or "name" not in df:
        return df
    return df[df["name"].astype(str).str.contains(text, case=False, regex=False)]


def figure_for(store: Store, name: str, name_filter: str = "", *, hold: Hold = nullcontext, **params: Any) -> go.Figure:
    """Run a plot's query with `params` (under `hold`, the store's lock), keep the rows whose name contains
    `name_filter`, draw it (outside the lock)."""
    query, draw = PLOT_SPECS[name]
    with hold():
        frame = query(store, **params)
    return draw(name_filtered(frame, name_filter))


def _plot(name: str, scoped: bool = False, **fixed: Any) -> Callable[..., go.Figure]:
    """The UI's plot function of PLOT_SPECS[name]: (store, first56_only, name_filter, hold=, admit=)."""
    def plot(store: Store, first56_only: bool = False, name_filter: str = "", *, hold: Hold = nullcontext,
             admit: Any = nullcontext) -> go.Figure:
        scope = {"first56_only": first56_only, "include_runs": not first56_only} if scoped else {}
        return figure_for(store, name, name_filter, hold=hold, **scope, **fixed)
    return plot


# plot name -> function(store, first56_only, name_filter, hold=, admit=) -> Figure, for the UI's plot picker; each
# reads under `hold` and draws outside it
PLOTS: dict[str, Callable[..., go.Figure]] = {
    "leaderboard": _plot("leaderboard", scoped=True),
    "score_vs_params": _plot("score_vs_params", scoped=True),
    "precision_recall": _plot("precision_recall", scoped=True),
    "json_vs_f1": _plot("json_vs_f1", scoped=True),
    "speed_vs_score": _plot("speed_vs_score", scoped=True),
    "by_bucket": _plot("by_bucket"),
    "by_source_group": _plot("by_source_group"),
    "tb2lite_vs_tblite": _plot("tb2lite_vs_tblite"),
    "equiv_vs_f1": _plot("equiv_vs_f1"),
}

from lab.figures.series import series_plot_with_intervals  # noqa: E402 - registered last: the store's runs only

# one series plot: the store's series with intervals and P(best), else the leaderboard's checkpoint rows
PLOTS["checkpoint_series"] = series_plot_with_intervals
