"""One checkpoint series, point by point, against its first point: the score and the reference NLL over
all steps, each bucket (early / mid / late) and a slice of steps (a saved Triage slice, e.g. the steps
trained on vs held out), each checkpoint's difference from the first with a 95 % interval simultaneous over
the series (lab.store.paired), and the best checkpoint's lead over the runner-up with its interval.

The plot shows the score with the reference NLL on its own, labelled axis, the differences from the first
point with their intervals under it, and says so where the reference NLL is not recorded. A checkpoint
without a score is a gap, never a 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Iterable

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab.errors import LabError
from lab.store.db import Store
from lab.store.interval_hint import hint_for
from lab.store.paired import (
    AgainstBaseline, RunComparison, compare_against_loaded, compare_loaded, delta_text, load_run, metric_spec,
)
from lab.store.series import named_rows, series_frame, series_plot

BUCKETS = ("early", "mid", "late")
ALL_STEPS = "all steps"
METRICS = ("score", "ref_nll")
NO_NLL = ("reference NLL not recorded for this series: score the reference with each checkpoint "
          "(python -m lab score-reference --engine SPEC …) to see it here")


@dataclass(frozen=True)
class Part:
    """A part of the steps (all, a bucket, a slice) and each checkpoint's figures and differences on it."""

    name: str
    step_keys: list[str] | None                 # None: all steps
    figures: dict[str, list[float | None]]      # metric -> per checkpoint, over its own steps in the part
    deltas: dict[str, list[AgainstBaseline]]    # metric -> per checkpoint after the first


@dataclass(frozen=True)
class SeriesStats:
    series: str
    x_kind: str
    points: pd.DataFrame                        # run_id, name, x, score, ref_nll, steps (by x)
    parts: list[Part]
    lead: RunComparison | None = None           # the best checkpoint against the runner-up (score)
    lead_note: str = ""
    notes: list[str] = field(default_factory=list)


def series_points(store: Store, series: str) -> pd.DataFrame:
    """The runs of one series by position (LabError for a series the store does not have)."""
    frame = series_frame(store)
    part = frame[frame["series"] == series].sort_values(["x", "name"], kind="stable").reset_index(drop=True)
    if part.empty:
        known = sorted(set(frame["series"]))
        raise LabError(f"no checkpoint series '{series}' in the store" + (f"; known: {', '.join(known[:20])}" if known else
                                                                         "; place runs in one first"))
    return part


def _figure(run, metric: str, keys: pd.Index | None) -> float | None:
    spec = metric_spec(metric)
    steps = run.steps if keys is None else run.steps[run.steps.index.isin(keys)]
    cols = [spec.column] + ([spec.weight] if spec.weight else [])
    have = steps[cols].dropna()
    if spec.weight:
        have = have[have[spec.weight] > 0]
    if have.empty:
        return None
    weight = have[spec.weight].sum() if spec.weight else len(have)
    return float(spec.scale * have[spec.column].sum() / weight)


def _part(name: str, runs: list, keys: list[str] | None, resamples: int | None, seed: int | None) -> Part:
    index = None if keys is None else pd.Index(keys)
    figures = {m: [_figure(r, m, index) for r in runs] for m in METRICS}
    deltas = {m: compare_against_loaded(runs[0], runs[1:], m, keys, resamples=resamples, seed=seed) for m in METRICS}
    return Part(name, keys, figures, deltas)


def series_stats(store: Store, series: str, slice_keys: Iterable[str] | None = None, slice_name: str = "",
                 *, resamples: int | None = None, seed: int | None = None) -> SeriesStats:
    """The series' points, parts (all steps, buckets, the slice when given) and the lead of its best."""
    points = series_points(store, series)
    runs = [load_run(store, r) for r in points["run_id"]]
    first = runs[0]
    parts = [_part(ALL_STEPS, runs, None, resamples, seed)]
    for bucket in BUCKETS:
        keys = list(first.steps.index[first.steps["bucket"] == bucket])
        if keys:
            parts.append(_part(bucket, runs, keys, resamples, seed))
    notes = []
    if slice_keys is not None:
        keys = sorted(set(slice_keys))
        if keys:
            parts.append(_part(f"slice: {slice_name or 'slice'}", runs, keys, resamples, seed))
        else:
            notes.append(f"slice {slice_name!r} has no step of these runs")
    lead, lead_note = None, ""
    scored = points.dropna(subset=["score"]).sort_values("score", ascending=False, kind="stable")
    if len(scored) >= 2:
        best, runner = scored.iloc[0], scored.iloc[1]
        by_id = {r.run_id: r for r in runs}
        lead = compare_loaded(by_id[runner["run_id"]], by_id[best["run_id"]], ["score"], resamples=resamples, seed=seed)
        lead_note = "pairwise, picked after seeing the scores"
    if points["ref_nll"].isna().all():
        notes.append(NO_NLL)
    notes += series_notes(parts[0])
    return SeriesStats(series, str(points["x_kind"].iloc[0]), points, parts, lead, lead_note, notes)


def series_notes(whole: Part) -> list[str]:
    """What would give the series' intervals where its checkpoints have none (too few common steps), and the
    settings any checkpoint differs from the first point in (lab.resultfiles.run_settings)."""
    found = whole.deltas["score"]
    hint = next((h for h in (hint_for(f.difference) for f in found) if h), "")
    differ = [f"{f.name}: {f.settings.short()}" for f in found if f.settings is not None and f.settings.differ]
    notes = [hint] if hint else []
    if differ:
        notes.append("settings that differ from the first point (⚠ changes answers): " + " · ".join(differ))
    return notes


def point_label(stats: SeriesStats, i: int) -> str:
    kind = "epoch" if stats.x_kind == "epoch" else "step"
    return f"{kind} {stats.points['x'].iloc[i]}"


def lead_text(stats: SeriesStats) -> str:
    """"step 200 over step 100: +0.8 [−1.1, +2.6], not distinguishable at 95 %" (score)."""
    if stats.lead is None:
        return "fewer than two scored checkpoints: no lead to show"
    diff = stats.lead.get("score")
    ids = list(stats.points["run_id"])
    best = point_label(stats, ids.index(stats.lead.candidate.run_id))
    runner = point_label(stats, ids.index(stats.lead.baseline.run_id))
    if diff is None:
        return f"{best} over {runner}: {stats.lead.notes.get('score', 'not comparable')}"
    verdict = diff.verdict if diff.ci is not None else "no interval"
    return f"{best} over {runner}: {delta_text(diff, 2)}, {verdict}"


def _cell(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def series_table(stats: SeriesStats) -> pd.DataFrame:
    """One row per checkpoint and part: its score and reference NLL, and each one's difference from the
    series' first point with its interval (simultaneous over the series' checkpoints)."""
    rows = []
    for part in stats.parts:
        for i, (run_id, name) in enumerate(zip(stats.points["run_id"], stats.points["name"])):
            row = {"position": point_label(stats, i), "run": name, "steps of": part.name}
            for metric in METRICS:
                spec = metric_spec(metric)
                label = "score" if metric == "score" else "ref NLL/token"
                row[label] = _cell(part.figures[metric][i], spec.digits)
                if i == 0:
                    row[f"Δ {label} vs first"] = "first point"
                else:
                    found = part.deltas[metric][i - 1]
                    row[f"Δ {label} vs first"] = delta_text(found.difference, spec.digits, found.note)
            row["verdict (score)"] = "first point" if i == 0 else (
                part.deltas["score"][i - 1].difference.verdict
                if part.deltas["score"][i - 1].difference is not None else "not comparable")
            found = part.deltas["score"][i - 1] if i else None
            row["settings vs first"] = "first point" if i == 0 else (
                found.settings.short() if found is not None and found.settings is not None else "not recorded")
            row["run_id"] = run_id
            rows.append(row)
    return pd.DataFrame(rows)


def adjustment_note(stats: SeriesStats) -> str:
    """What the intervals are, in one line."""
    k = len(stats.points) - 1
    return (f"Δ = checkpoint − the series' first point ({point_label(stats, 0)}) over their common steps; 95 % "
            f"intervals simultaneous over the {k} later checkpoint{'s' if k != 1 else ''} (max-T), per part and "
            "metric; lower reference NLL = the reference is likelier. Best vs runner-up: " + lead_text(stats)
            + (f" ({stats.lead_note})" if stats.lead_note else ""))


def series_stats_figure(stats: SeriesStats) -> go.Figure:
    """Score (left axis) and reference NLL per token (right axis, dashed) by checkpoint; under it each
    checkpoint's Δ score from the first point with its simultaneous 95 % interval."""
    pts = stats.points
    x = list(pts["x"])
    names = [escape(str(n)) for n in pts["name"]]  # names come from result files: plotly reads text as markup
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12, row_heights=[0.58, 0.42],
                        specs=[[{"secondary_y": True}], [{}]],
                        subplot_titles=("score and reference NLL per token",
                                        "Δ score vs the first checkpoint (95 %, simultaneous)"))
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
    whole = stats.parts[0].deltas["score"]
    dx, dy, up, down, hover = [x[0]], [0.0], [0.0], [0.0], [f"{names[0]}: first point"]
    for i, found in enumerate(whole, start=1):
        diff = found.difference
        if diff is None:
            continue
        dx.append(x[i])
        dy.append(diff.delta)
        up.append((diff.high - diff.delta) if diff.ci else 0.0)
        down.append((diff.delta - diff.low) if diff.ci else 0.0)
        hover.append(f"{names[i]}: {delta_text(diff, 2)} {diff.verdict if diff.ci else ''}")
    fig.add_trace(go.Scatter(x=dx, y=dy, mode="markers", name="Δ score vs first", text=hover, meta="delta",
                             error_y=dict(type="data", symmetric=False, array=up, arrayminus=down, visible=True),
                             hovertemplate="%{text}<extra></extra>"), row=2, col=1)
    fig.add_hline(y=0, line=dict(color="#888", dash="dot"), row=2, col=1)
    fig.update_yaxes(title_text="score", row=1, col=1, secondary_y=False)
    fig.update_yaxes(title_text="Δ score", row=2, col=1)
    fig.update_xaxes(title_text=stats.x_kind, row=2, col=1)
    fig.update_layout(title=dict(text=escape(f"{stats.series}: {lead_text(stats)}"), x=0.01, font=dict(size=14)),
                      height=620, template="plotly_white", legend=dict(orientation="h", y=-0.14),
                      margin=dict(r=90))
    return fig


def series_plot_with_intervals(store: Store, first56_only: bool = False, name_filter: str = "") -> go.Figure:
    """The Results tab's series plot: every series as a line, or, when the name filter leaves one series,
    that series against its first point with its intervals."""
    frame = named_rows(series_frame(store), name_filter)
    if not frame.empty and frame["series"].nunique() == 1:
        return series_stats_figure(series_stats(store, str(frame["series"].iloc[0])))
    return series_plot(store, first56_only, name_filter)
