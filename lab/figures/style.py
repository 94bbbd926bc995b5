"""What every lab figure shares: the style file, colour per family, marker per training method, labels,
hover text, the empty figure and the family scatter."""
from __future__ import annotations

from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import yaml

from lab.store.short_labels import short_labels

STYLE_PATH = Path(__file__).with_name("plot_style.yaml")


@lru_cache(maxsize=1)
def style() -> dict:
    return yaml.safe_load(STYLE_PATH.read_text(encoding="utf-8"))


def family_color(family: Any) -> str:
    """Stable colour per model family."""
    s = style()
    if not isinstance(family, str) or not family:
        return s["unknown_family"]
    if family in s["palette"]:
        return s["palette"][family]
    return s["extra"][sum(map(ord, family)) % len(s["extra"])]


def training_symbol(method: Any) -> str:
    """Stable marker symbol per training method."""
    s = style()
    if isinstance(method, str) and method in s["symbols"]:
        return s["symbols"][method]
    return s["extra_symbols"][sum(map(ord, str(method))) % len(s["extra_symbols"])]


def finish(fig: go.Figure, title: str, height: int | None = None, **layout: Any) -> go.Figure:
    s = style()
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left"),
        template=s["template"],
        font=dict(family=s["font_family"], size=12),
        height=height or s["height"],
        margin=dict(l=10, r=10, t=60, b=10),
        legend=dict(title=None),
        **layout,
    )
    return fig


def empty_figure(title: str, message: str = "no data for this selection") -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return finish(fig, title)


def unique_labels(df: pd.DataFrame, name_col: str = "name") -> list[str]:
    """Names, with a short run id added where two rows would share one."""
    names = df[name_col].astype(str).tolist()
    counts = Counter(names)
    run_ids = df["run_id"].tolist() if "run_id" in df else [None] * len(names)
    return [f"{name} [{run_id[:6]}]" if counts[name] > 1 and isinstance(run_id, str) else name
            for name, run_id in zip(names, run_ids)]


def short_unique_labels(df: pd.DataFrame, name_col: str = "name") -> list[str]:
    """`unique_labels` shortened for axes and legends, still distinct (lab.store.short_labels);
    show the full `unique_labels` on hover."""
    full = unique_labels(df, name_col)
    labels = short_labels(full)
    return [labels[n] for n in full]


def hover_data(df: pd.DataFrame, cols: list[str]) -> tuple[Any, str]:
    present = [c for c in cols if c in df]
    template = "<b>%{text}</b><br>" + "<br>".join(f"{c}: %{{customdata[{i}]}}" for i, c in enumerate(present))
    return df[present].astype(object).where(df[present].notna(), "—").to_numpy(), template + "<extra></extra>"


def scatter_by_family(
    fig: go.Figure, df: pd.DataFrame, x: str, y: str, *, row: int | None = None, col: int | None = None,
    show_legend: bool = True, hover_cols: list[str] | None = None,
) -> None:
    """One trace per family × training method: colour = family, marker symbol = training method."""
    data = df.assign(_family=df["family"].fillna("unknown"), _method=df["training_method"].fillna("unknown"))
    data = data.reset_index(drop=True)  # positions: the hover rows of every trace are taken from one table
    custom, template = hover_data(data, (hover_cols or [x, y, "source"]) + ["coverage"])
    for (family, method), part in data.groupby(["_family", "_method"], sort=True):
        trace = go.Scatter(
            x=part[x], y=part[y], mode="markers", name=f"{family} · {method}",
            legendgroup=f"{family} · {method}", showlegend=show_legend,
            text=unique_labels(part), customdata=custom[part.index.to_numpy()], hovertemplate=template,
            marker=dict(color=family_color(family), symbol=training_symbol(method), size=10,
                        line=dict(width=1, color="#333")),
        )
        if row is None:
            fig.add_trace(trace)
        else:
            fig.add_trace(trace, row=row, col=col)
