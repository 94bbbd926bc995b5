"""Checkpoint / epoch series of stored runs, and the score-against-checkpoint plot.

A run's series comes from a placement when someone put it in one (lab/store/series_members.py: any run,
the base model included, at a given position), else from the published catalogue when it is a published
run (ECHO RLVR raw, continue, parent run, KoHRM epochs …), else, for runs that have a checkpoint step, from
the series its training run named (the result file's `training.series`, lab.training), else from its name:
the file name with `checkpoint-N` taken out (name_rules.yaml's checkpoint pattern), or, for a file named
just `checkpoint-N`, the folder that holds the checkpoint. The plots and the Triage picker show series of two
runs or more; `series list` shows series of one too.
A run without a score is a gap in the plot, never a 0.

One series never ranks runs made on different numbers of steps against each other (a training run's
checkpoints replayed on a subset of tasks, then the best of them on every step; a run cut short): the runs
covering the most steps keep the series' name, the others form `NAME [N/M steps]` beside it, one line each.
"""
from __future__ import annotations

import re

import pandas as pd
import plotly.graph_objects as go

from lab.store.db import Store
from lab.store.names import load_rules
from lab.store.series_members import placements

TITLE = "Score against checkpoint, per series (published runs and lab runs)"
# a training run's series name as its result files give it: taken only when it is as plain as a run name (a file
# written by hand names no markup, no path and nothing longer into the series list and the plots)
SERIES_NAME = re.compile(r"[A-Za-z0-9._-]{1,120}")
# per run: the reference's NLL per token under the run's model over the run's steps (score-reference runs)
REF_NLL_SQL = ("SELECT run_id, sum(-ref_logprob) / nullif(sum(ref_tokens), 0) AS ref_nll FROM step_reference "
               "GROUP BY run_id")


def _published_table_exists(store: Store) -> bool:
    return bool(store.scalar("SELECT count(*) FROM information_schema.tables WHERE table_name = 'published_runs'"))


def series_frame(store: Store, min_runs: int = 2) -> pd.DataFrame:
    """run_id, name, series, x_kind, x, score, steps of every run in a series of at least `min_runs` runs, by
    series and x."""
    published = _published_table_exists(store)
    join = "LEFT JOIN published_runs p USING (run_id)" if published else ""
    cols = "p.series AS pub_series, p.x_kind AS pub_x_kind, p.x AS pub_x" if published else \
        "NULL AS pub_series, NULL AS pub_x_kind, NULL AS pub_x"
    df = store.query(
        f"SELECT r.run_id, r.display_name || CASE WHEN r.partial THEN ' [partial ' || r.steps || '/' || r.total_steps || ']' "
        f"WHEN r.selected_steps IS NOT NULL THEN ' [' || limited_to(r.selected_steps) || ']' ELSE '' END AS name, "
        f"r.model_short, r.path, r.model_path, r.checkpoint_step, r.score, r.steps, "
        f"r.scoring_version, r.total_steps, json_extract_string(r.meta_json, '$.training.series') AS training_series, "
        f"{cols}, nll.ref_nll FROM runs r {join} LEFT JOIN ({REF_NLL_SQL}) nll USING (run_id)"
    )
    rx = re.compile(r"[-_ ]*\(?" + load_rules().checkpoint.pattern + r"\)?", re.IGNORECASE)
    placed = placements(store)
    rows = []
    for r in df.itertuples(index=False):
        if r.run_id in placed:
            series, x, x_kind = placed[r.run_id]
            rows.append((r.run_id, r.name, series, x_kind, x, r.score, r.steps, r.scoring_version, r.ref_nll))
        elif isinstance(r.pub_series, str) and r.pub_series:
            rows.append((r.run_id, r.name, r.pub_series, r.pub_x_kind, int(r.pub_x), r.score, r.steps, r.scoring_version,
                         r.ref_nll))
        elif r.checkpoint_step is not None and not pd.isna(r.checkpoint_step):
            series = r.training_series if isinstance(r.training_series, str) and SERIES_NAME.fullmatch(r.training_series) \
                else _name_series(rx, str(r.path), r.model_path)
            rows.append((r.run_id, r.name, series, "checkpoint step", int(r.checkpoint_step), r.score, r.steps,
                         r.scoring_version, r.ref_nll))
    out = pd.DataFrame(rows, columns=["run_id", "name", "series", "x_kind", "x", "score", "steps", "scoring_version",
                                      "ref_nll"])
    if out.empty:
        return out
    sizes = out.groupby("series")["run_id"].transform("count")
    out = out[sizes >= min_runs].copy()
    out["series"] = _by_coverage(out, df.set_index("run_id")["total_steps"])
    return out.sort_values(["series", "x", "name"]).reset_index(drop=True)


def _by_coverage(frame: pd.DataFrame, totals: pd.Series) -> pd.Series:
    """Each run's series, those of a series covering fewer steps than its widest runs as `NAME [N/M steps]`: M is
    the whole the run is counted against or the series' widest, whichever is larger (a subset run chose its 18
    steps on purpose, yet its series covers 36)."""
    widest = frame.groupby("series")["steps"].transform("max")
    total = frame["run_id"].map(totals)
    label = [series if steps == most else f"{series} [{steps}/{max(int(t), most) if t == t and t else most} steps]"
             for series, steps, most, t in zip(frame["series"], frame["steps"], widest, total)]
    return pd.Series(label, index=frame.index)


def _name_series(rx: re.Pattern, path: str, model_path: object) -> str:
    """A checkpoint run's series from its file name without `checkpoint-N`; a file named only that (a
    Batch run of `CKPT/checkpoint-3` saved as `checkpoint-3.json`) takes the checkpoint's folder."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".json")
    series = rx.sub("", stem).strip("-_ ")
    if series:
        return series
    parts = [p for p in str(model_path or "").rstrip("/").split("/") if p]
    if len(parts) >= 2 and rx.fullmatch(parts[-1]):
        return parts[-2]
    return stem


def known_series(store: Store) -> set[str]:
    """The name of every series in the store now, a series of one run included."""
    frame = series_frame(store, min_runs=1)
    return set(frame["series"]) if not frame.empty else set()


def series_runs(store: Store) -> dict[str, list[str]]:
    """Series name -> its run ids in checkpoint order (for the flip table)."""
    df = series_frame(store)
    return {name: list(part["run_id"]) for name, part in df.groupby("series", sort=True)}


def series_figure(df: pd.DataFrame, title: str = TITLE) -> go.Figure:
    """One line per series: score (100 × F1) against checkpoint step (or epoch); hover names each run. Series whose
    runs have reference likelihoods (score-reference) get a dashed line of the reference's NLL per token on a
    second axis."""
    fig = go.Figure()
    if df.empty:
        fig.add_annotation(text="no checkpoint series in the store yet: fetch a published series "
                                "(python -m lab data published fetch --series RLVR)", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5)
        fig.update_layout(title=title)
        return fig
    for series, part in df.groupby("series", sort=True):
        part = part.sort_values("x")
        fig.add_trace(go.Scatter(
            x=part["x"], y=part["score"], mode="lines+markers", name=f"{series} ({part['x_kind'].iloc[0]})",
            text=part["name"], customdata=part["run_id"],
            hovertemplate="<b>%{text}</b><br>%{x}: score %{y:.2f}<extra></extra>",
        ))
    has_nll = "ref_nll" in df and df["ref_nll"].notna().any()
    if has_nll:
        for series, part in df[df["ref_nll"].notna()].groupby("series", sort=True):
            part = part.sort_values("x")
            fig.add_trace(go.Scatter(
                x=part["x"], y=part["ref_nll"], mode="lines+markers", yaxis="y2", line=dict(dash="dash"),
                name=f"{series}: reference NLL/token", text=part["name"], customdata=part["run_id"],
                hovertemplate="<b>%{text}</b><br>%{x}: reference NLL/token %{y:.4f}<extra></extra>",
            ))
    fig.update_layout(title=dict(text=title, x=0.01), xaxis_title="checkpoint step (or epoch)", yaxis_title="score",
                      height=480, template="plotly_white", legend=dict(orientation="h", y=-0.2), margin=dict(r=90))
    if has_nll:
        fig.update_layout(yaxis2=dict(title="reference NLL per token (lower: closer)", overlaying="y", side="right",
                                      showline=True, showgrid=False, color="#b45309"))
    else:
        fig.add_annotation(text="reference NLL not recorded for these runs (python -m lab score-reference)",
                           xref="paper", yref="paper", x=1.0, y=1.06, xanchor="right", showarrow=False,
                           font=dict(size=11, color="#92400e"))
    return fig


def leaderboard_checkpoints(store: Store) -> pd.DataFrame:
    """Leaderboard rows naming a checkpoint, shaped like series_frame (before any run is fetched)."""
    df = store.query("SELECT model_label AS name, checkpoint_step AS x, score FROM leaderboard "
                     "WHERE checkpoint_step IS NOT NULL AND score IS NOT NULL ORDER BY x")
    df["series"] = "published leaderboard rows with a checkpoint (fetch a series for its curve)"
    df["x_kind"], df["run_id"] = "checkpoint step", None
    return df


def named_rows(df: pd.DataFrame, text: str) -> pd.DataFrame:
    text = (text or "").strip()
    return df[df["name"].astype(str).str.contains(text, case=False, regex=False)] if text and len(df) else df


def series_plot(store: Store, first56_only: bool = False, name_filter: str = "") -> go.Figure:
    """The Results tab's plot (first56_only does not apply: these are runs, not leaderboard rows);
    until a series is in the store it shows the leaderboard's checkpoint rows as points.
    Names carry "[partial n/N]" for runs that answered part of their selection, "[limited to n steps]" for runs
    whose selection was limited on purpose (--limit, the training callback's limit=)."""
    df = named_rows(series_frame(store), name_filter)
    if df.empty:
        points = named_rows(leaderboard_checkpoints(store), name_filter)
        if not points.empty:
            fig = series_figure(points)
            fig.update_traces(mode="markers")
            return fig
    return series_figure(df)
