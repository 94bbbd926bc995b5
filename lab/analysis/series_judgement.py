"""One checkpoint series, point by point, against its first point: the score and the reference NLL over
all steps, each bucket (early / mid / late) and a slice of steps (a saved Triage slice, e.g. the steps
trained on vs held out), each checkpoint's difference from the first with a 95 % interval simultaneous over
the series and its minimum detectable effect, each checkpoint's chance of being the best with its expected
regret (all steps, score), and the best checkpoint's lead over the runner-up with its interval.

Computed from the store's StatsTable (lab.analysis.judge: the figures of lab.analysis.run_pairs, as matrix
products) and kept for every visitor until the store changes (lab.analysis.cache); the store's lock
(`hold`) is taken to read only.

The plot: lab.figures.series.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import pandas as pd

from lab.errors import LabError
from lab.store.db import Store
from lab.scoring.paired import Difference
from lab.analysis.interval_hint import hint_for
from lab.analysis.run_pairs import (
    AgainstBaseline, delta_text, metric_spec, mde_text, points_text, signed, verdict_cell, verdict_words,
)
from lab.store.series import series_frame
from lab.analysis.cache import Admit, shared, stats_table
from lab.analysis.judge import Chances, against, chances
from lab.analysis.run_matrix import Hold, StatsTable

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
class Lead:
    """The best checkpoint (by score) against the runner-up: their difference with its pairwise interval."""

    best: str
    runner: str
    difference: Difference | None
    note: str = ""


@dataclass(frozen=True)
class SeriesStats:
    series: str
    x_kind: str
    points: pd.DataFrame                        # run_id, name, x, score, ref_nll, steps (by x)
    parts: list[Part]
    lead: Lead | None = None                    # the best checkpoint against the runner-up (score)
    lead_note: str = ""
    notes: list[str] = field(default_factory=list)
    chances: Chances | None = None              # P(best) and expected regret per checkpoint (all steps, score)


def series_points(store: Store, series: str) -> pd.DataFrame:
    """The runs of one series by position (LabError for a series the store does not have)."""
    frame = series_frame(store)
    part = frame[frame["series"] == series].sort_values(["x", "name"], kind="stable").reset_index(drop=True)
    if part.empty:
        known = sorted(set(frame["series"]))
        raise LabError(f"no checkpoint series '{series}' in the store" + (f"; known: {', '.join(known[:20])}" if known else
                                                                         "; place runs in one first"))
    return part


def _figures(table: StatsTable, ids: list[str], metric: str, keys: list[str] | None) -> list[float | None]:
    """Each run's figure over its own steps in the part (None: no step with the metric)."""
    spec = metric_spec(metric)
    rows = [table.index(r) for r in ids]
    have = table.has(spec)[rows] & table.part(keys)
    value = np.where(have, table.values[spec.column][rows], 0.0).sum(axis=1)
    weight = np.where(have, table.weights(spec)[rows], 0.0).sum(axis=1)
    return [float(spec.scale * v / w) if h.any() else None for v, w, h in zip(value, weight, have)]


def _part(table: StatsTable, name: str, ids: list[str], keys: list[str] | None, resamples: int | None,
          seed: int | None) -> Part:
    figures = {m: _figures(table, ids, m, keys) for m in METRICS}
    deltas = {m: against(table, ids[0], ids[1:], m, keys, resamples=resamples, seed=seed) for m in METRICS}
    return Part(name, keys, figures, deltas)


def series_stats(store: Store, series: str, slice_keys: Iterable[str] | None = None, slice_name: str = "",
                 *, hold: Hold = nullcontext, admit: Admit = nullcontext, resamples: int | None = None,
                 seed: int | None = None) -> SeriesStats:
    """The series' points, parts (all steps, buckets, the slice when given), P(best) and the lead of its best."""
    def read() -> pd.DataFrame:
        with hold():
            return series_points(store, series)

    points = shared(store, ("points", series), read, background=False)  # one read for visitors asking at once
    table = stats_table(store, hold)
    keys = None if slice_keys is None else tuple(sorted(set(slice_keys)))
    key = ("series", series, tuple(points["run_id"]), keys, slice_name, resamples, seed)
    return shared(store, key, lambda: _series_stats(table, series, points, keys, slice_name, resamples, seed), admit)


def _series_stats(table: StatsTable, series: str, points: pd.DataFrame, slice_keys: tuple | None, slice_name: str,
                  resamples: int | None, seed: int | None) -> SeriesStats:
    ids = list(points["run_id"])
    first = table.index(ids[0])
    parts = [_part(table, ALL_STEPS, ids, None, resamples, seed)]
    for bucket in BUCKETS:
        keys = [table.step_keys[j] for j in np.flatnonzero(table.present[first] & (table.bucket == bucket))]
        if keys:
            parts.append(_part(table, bucket, ids, keys, resamples, seed))
    notes = []
    if slice_keys is not None:
        if slice_keys:
            parts.append(_part(table, f"slice: {slice_name or 'slice'}", ids, list(slice_keys), resamples, seed))
        else:
            notes.append(f"slice {slice_name!r} has no step of these runs")
    lead, lead_note = None, ""
    scored = points.dropna(subset=["score"]).sort_values("score", ascending=False, kind="stable")
    if len(scored) >= 2:
        best, runner = str(scored.iloc[0]["run_id"]), str(scored.iloc[1]["run_id"])
        found = against(table, runner, [best], "score", simultaneous=False, resamples=resamples, seed=seed)[0]
        lead, lead_note = Lead(best, runner, found.difference, found.note), "pairwise, picked after seeing the scores"
    if points["ref_nll"].isna().all():
        notes.append(NO_NLL)
    notes += series_notes(parts[0])
    best_chances = chances(table, ids, ids[0], "score", resamples=resamples, seed=seed)
    return SeriesStats(series, str(points["x_kind"].iloc[0]), points, parts, lead, lead_note, notes, best_chances)


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


def best_text(stats: SeriesStats, run_id: str) -> str:
    """"step 300: P(best) 0.93, expected regret 0.1 points" ("" when the run was not judged)."""
    found = stats.chances
    if found is None or run_id not in found.run_ids:
        return ""
    i = found.run_ids.index(run_id)
    if found.p_best[i] is None:
        return ""
    label = point_label(stats, list(stats.points["run_id"]).index(run_id))
    return f"{label}: P(best) {found.p_best[i]:.2f}, expected regret {points_text(found.expected_regret[i])}"


def lead_text(stats: SeriesStats) -> str:
    """"step 200 over step 100: +0.8 [−1.1, +2.6], not distinguishable at 95 %: …; step 200: P(best) 0.61,
    expected regret 0.4 points" (score); two checkpoints whose difference shows as 0.00 are a tie, said so:
    "step 200 and step 100 tie: Δ 0.00 [−1.9, +1.9], …"."""
    if stats.lead is None:
        return "fewer than two scored checkpoints: no lead to show"
    diff = stats.lead.difference
    ids = list(stats.points["run_id"])
    best = point_label(stats, ids.index(stats.lead.best))
    runner = point_label(stats, ids.index(stats.lead.runner))
    chance = best_text(stats, stats.lead.best)
    if diff is None:
        return f"{best} over {runner}: {stats.lead.note or 'not comparable'}"
    if signed(diff.delta, 2) == signed(0.0, 2):  # no lead as shown: neither is ahead
        return f"{best} and {runner} tie: Δ {delta_text(diff, 2)}" + (f", {verdict_words(diff)}" if diff.ci else "")
    return f"{best} over {runner}: {delta_text(diff, 2)}, {verdict_words(diff)}" + (f"; {chance}" if chance else "")


def _cell(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def series_table(stats: SeriesStats) -> pd.DataFrame:
    """One row per checkpoint and part: its score and reference NLL, each one's difference from the series'
    first point with its interval (simultaneous over the series' checkpoints) and the smallest difference that
    comparison detects; on the all-steps rows each checkpoint's P(best) and expected regret (points)."""
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
            diff = part.deltas["score"][i - 1].difference if i else None
            row["verdict (score)"] = "first point" if i == 0 else verdict_cell(diff)
            row["detectable Δ score (80 %)"] = "" if i == 0 else mde_text(diff)
            row["p_best"], row["expected_regret"] = _chance_cells(stats, run_id, part.name == ALL_STEPS)
            found = part.deltas["score"][i - 1] if i else None
            row["settings vs first"] = "first point" if i == 0 else (
                found.settings.short() if found is not None and found.settings is not None else "not recorded")
            row["run_id"] = run_id
            rows.append(row)
    return pd.DataFrame(rows)


def _chance_cells(stats: SeriesStats, run_id: str, shown: bool) -> tuple[str, str]:
    found = stats.chances
    if not shown or found is None or run_id not in found.run_ids:
        return "", ""
    i = found.run_ids.index(run_id)
    if found.p_best[i] is None:
        return "", ""
    return f"{found.p_best[i]:.3f}", f"{found.expected_regret[i]:.2f}"


def adjustment_note(stats: SeriesStats) -> str:
    """What the intervals are, in one line."""
    k = len(stats.points) - 1
    chance = stats.chances.note if stats.chances is not None and stats.chances.note else ""
    kind = (f"simultaneous over the {k} later checkpoints (max-T; pairwise where only one of them has an interval)"
            if k > 1 else "pairwise (one later checkpoint)")
    return (f"Δ = checkpoint − the series' first point ({point_label(stats, 0)}) over their common steps; 95 % "
            f"intervals {kind}, per part and metric; detectable Δ: the smallest true difference each comparison "
            "finds 80 % of the time at that level; P(best): the share of task resamples in which the checkpoint scores highest on the first "
            "point's steps, expected regret: the points picking it gives up on average"
            + (f" ({chance})" if chance else "") + "; lower reference NLL = the reference is likelier. "
            "Best vs runner-up: " + lead_text(stats) + (f" ({stats.lead_note})" if stats.lead_note else ""))


def print_series(store: Store, series: str) -> int:
    """`results series show SERIES`: the series table as CSV, then its notes as `#` lines."""
    import sys

    stats = series_stats(store, series)
    series_table(stats).to_csv(sys.stdout, index=False)
    print(f"# {adjustment_note(stats)}")
    for note in stats.notes:
        print(f"# {note}")
    return 0
