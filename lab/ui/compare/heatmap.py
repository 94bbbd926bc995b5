"""The predicted × reference similarity heatmap of one step (plotly), kept small for the browser."""
from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from lab.scoring.align import similarity_matrix

MAX_SIDE = 120  # units per axis shown; larger steps are cut (and say so in the title)
LABEL_CHARS = 38


def _label(i: int, unit: str) -> str:
    text = unit if len(unit) <= LABEL_CHARS else unit[: LABEL_CHARS - 1] + "…"
    return f"{i}: {text}"


def heatmap_figure(pred_units: Sequence[str], ref_units: Sequence[str], engine_name: str) -> go.Figure:
    """Token F1 of every (predicted, reference) unit pair: rows predicted, columns reference."""
    pred, ref = list(pred_units)[:MAX_SIDE], list(ref_units)[:MAX_SIDE]
    cut = len(pred_units) > len(pred) or len(ref_units) > len(ref)
    title = f"{engine_name}: predicted × reference token F1"
    if cut:
        title += f" (first {MAX_SIDE} units per axis)"
    fig = go.Figure()
    if not pred or not ref:
        fig.add_annotation(text="no units to compare on one side", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
        fig.update_layout(title=title, height=220, xaxis_visible=False, yaxis_visible=False,
                          margin=dict(l=20, r=20, t=50, b=20))
        return fig
    matrix = [[round(v, 3) for v in row] for row in similarity_matrix(pred, ref)]
    fig.add_trace(
        go.Heatmap(
            z=matrix,
            x=[_label(j, u) for j, u in enumerate(ref)],
            y=[_label(i, u) for i, u in enumerate(pred)],
            zmin=0.0,
            zmax=1.0,
            colorscale="YlGn",
            colorbar=dict(title="F1", thickness=12),
            hovertemplate="pred %{y}<br>ref %{x}<br>F1 %{z:.3f}<extra></extra>",
        )
    )
    side = 14
    fig.update_layout(
        title=dict(text=title, font=dict(size=14)),
        height=min(900, max(260, 120 + side * len(pred))),
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="reference units", showticklabels=len(ref) <= 40, tickfont=dict(size=9)),
        yaxis=dict(title="predicted units", autorange="reversed", showticklabels=len(pred) <= 40,
                   tickfont=dict(size=9)),
    )
    return fig
