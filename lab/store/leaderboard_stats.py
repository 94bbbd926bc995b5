"""What the Results table says about differences between its rows: which rows with per-step data are
statistically tied (rank ranges on the same steps), and, against a baseline the user picks, each row's
Δ score with its simultaneous interval and a verdict. Rows without per-step data say so, never an
interval. Computed with lab.store.paired / lab.scoring.paired like every other comparison."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from lab.errors import LabError
from lab.scoring.paired import Ranking, load_settings, rank_ties
from lab.store.db import Store
from lab.store.interval_hint import hint_for, interval_hint
from lab.store.paired import (
    cached, compare_against, delta_text, load_run, metric_spec, settings_between, settings_of, step_values,
    task_numbering,
)

NO_STEPS = "no per-step data"
BASELINE = "baseline"


def _has_table(store: Store, name: str) -> bool:
    return bool(store.scalar("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]))


def row_runs(store: Store, frame: pd.DataFrame) -> list[str | None]:
    """For each row of a leaderboard frame (lab.store.queries.leaderboard): the run whose per-step answers it
    shows: a lab run's own, a published row's fetched run (published_runs.leaderboard_row), else None."""
    linked: dict[tuple[str, float], str] = {}
    if _has_table(store, "published_runs"):
        for label, score, run_id in store.rows(
                "SELECT l.model_label, l.score, p.run_id FROM published_runs p "
                "JOIN leaderboard l ON l.row_no = p.leaderboard_row JOIN runs r ON r.run_id = p.run_id"):
            linked[(str(label), round(float(score), 2) if score is not None else float("nan"))] = str(run_id)
    out: list[str | None] = []
    for row in frame.itertuples(index=False):
        run_id = getattr(row, "run_id", None)
        if isinstance(run_id, str) and run_id:
            out.append(run_id)
            continue
        score = getattr(row, "score", None)
        key = (str(getattr(row, "name", "")), round(float(score), 2) if score is not None and score == score else float("nan"))
        out.append(linked.get(key))
    return out


@dataclass(frozen=True)
class TieGroup:
    """Runs on the same steps, ranked with simultaneous intervals."""

    run_ids: list[str]
    names: list[str]
    ranking: Ranking | None
    note: str
    hint: str = ""  # what would give the group its ranking, where too few steps leave it without one


def _step_sets(store: Store, run_ids: Sequence[str]) -> pd.DataFrame:
    return store.query(
        "SELECT s.run_id, count(*) AS n, md5(string_agg(s.step_key, ',' ORDER BY s.step_key)) AS steps_sig, "
        "any_value(r.scoring_version) AS scoring_version FROM steps s JOIN runs r USING (run_id) "
        "WHERE list_contains(?, s.run_id) AND s.command_f1 IS NOT NULL GROUP BY s.run_id", [list(run_ids)])


def tie_groups(store: Store, run_ids: Sequence[str], *, resamples: int | None = None,
               seed: int | None = None) -> dict[str, TieGroup]:
    """run_id -> the group of runs scored on exactly the same steps it is ranked in (score, one run's step
    values being the mean of its answers), with rank ranges from all-pairs simultaneous intervals."""
    ids = sorted(set(r for r in run_ids if r))
    if not ids:
        return {}
    return cached(store, ("ties", tuple(ids), resamples, seed), lambda: _tie_groups(store, ids, resamples, seed))


def _tie_groups(store: Store, ids: list[str], resamples: int | None, seed: int | None) -> dict[str, TieGroup]:
    sets = _step_sets(store, ids)
    out: dict[str, TieGroup] = {}
    for _, part in sets.groupby(["steps_sig", "scoring_version"], sort=False):
        members = sorted(part["run_id"])
        runs = [load_run(store, r) for r in members]
        names = [r.name for r in runs]
        if len(members) < 2:
            group = TieGroup(members, names, None, "no other run on the same steps")
        else:
            index = task_numbering(*runs)
            keys = runs[0].steps.dropna(subset=["command_f1"]).index
            task = np.array([index[t] for t in runs[0].steps.loc[keys, "task_id"]])
            spec = metric_spec("score")
            values = np.column_stack([np.nanmean(step_values(r, spec, keys), axis=1) for r in runs])
            ranking = rank_ties(task, values, len(index), scale=spec.scale, resamples=resamples, seed=seed)
            note = "" if ranking is not None else \
                f"fewer than {load_settings().min_common_steps} steps or {load_settings().min_common_tasks} tasks"
            hint = "" if ranking is not None else interval_hint(len(keys), len(set(task)))
            group = TieGroup(members, names, ranking, note, hint)
        for r in members:
            out[r] = group
    return out


def tie_text(group: TieGroup | None, run_id: str | None) -> str:
    """"2 (1–4) of 6 · tied with A, B" for a row with per-step data; NO_STEPS otherwise."""
    if run_id is None or group is None:
        return NO_STEPS
    if group.ranking is None:
        return f"no ranking: {group.note}"
    i = group.run_ids.index(run_id)
    r = group.ranking
    span = f" ({r.rank_best[i]}–{r.rank_worst[i]})" if r.rank_best[i] != r.rank_worst[i] else ""
    tied = r.tied_with(i)
    names = ", ".join(group.names[j] for j in tied[:3]) + (f" +{len(tied) - 3}" if len(tied) > 3 else "")
    return f"{r.rank[i]}{span} of {len(group.run_ids)}" + (f" · tied with {names}" if tied else " · no tie")


def ties_note(groups: dict[str, TieGroup]) -> str:
    """What the ties column means, once for the table."""
    rankings = {id(g): g for g in groups.values() if g.ranking is not None}
    if not rankings:
        return ""
    parts = [f"{len(g.run_ids)} runs on the same {g.ranking.steps} steps ({g.ranking.adjustment})"
             for g in rankings.values()]
    return ("per-step rank (95 % range) among runs scored on the same steps, from intervals on every pair: "
            + "; ".join(parts))


@dataclass(frozen=True)
class BaselineColumns:
    """Per row: Δ score against the baseline with its interval, and the verdict; and the label of the
    intervals' adjustment."""

    delta: list[str]
    verdict: list[str]
    label: str
    hint: str = ""  # what would give the rows without an interval theirs (lab.store.interval_hint)


def baseline_columns(store: Store, runs: Sequence[str | None], baseline: str, *, resamples: int | None = None,
                     seed: int | None = None) -> BaselineColumns:
    """Each row's run against `baseline` (score), the intervals simultaneous over the rows compared."""
    others = sorted({r for r in runs if r and r != baseline})
    results = cached(store, ("baseline", baseline, tuple(others), resamples, seed),
                     lambda: {a.run_id: a for a in compare_against(store, baseline, others, "score",
                                                                   resamples=resamples, seed=seed)})
    labels = {a.difference.adjustment for a in results.values() if a.difference is not None and a.difference.ci}
    delta, verdict, hints = [], [], []
    for run_id in runs:
        if run_id is None:
            delta.append(NO_STEPS)
            verdict.append(NO_STEPS)
        elif run_id == baseline:
            delta.append(BASELINE)
            verdict.append(BASELINE)
        else:
            found = results.get(run_id)
            diff = found.difference if found else None
            delta.append(delta_text(diff, 2, found.note if found else "not comparable"))
            verdict.append(diff.verdict if diff is not None and diff.ci is not None else "no interval")
            hints.append(hint_for(diff))
    return BaselineColumns(delta, verdict, next(iter(labels)) if len(labels) == 1 else "pairwise",
                           next((h for h in hints if h), ""))


def settings_column(store: Store, runs: Sequence[str | None], baseline: str) -> list[str]:
    """Per row: the settings its run differs from the baseline's in (lab.resultfiles.run_settings), "⚠" before
    one that changes answers; "baseline" for the baseline and NO_STEPS for a row without a run."""
    ids = tuple(sorted({baseline, *[r for r in runs if r]}))
    known = cached(store, ("settings", ids), lambda: settings_of(store, ids))  # kept until the store changes
    out = []
    for run_id in runs:
        if run_id is None:
            out.append(NO_STEPS)
        elif run_id == baseline:
            out.append(BASELINE)
        else:
            diff = settings_between(known.get(baseline), known.get(run_id))
            out.append(diff.short() if diff is not None else "not recorded")
    return out


def baseline_choices(store: Store) -> list[tuple[str, str]]:
    """(label, run_id) of every run with per-step answers, for the baseline picker."""
    df = store.query("SELECT run_id, display_name, source, steps, score FROM runs "
                     "ORDER BY source = 'published', display_name, run_id")
    return [(f"{r.display_name} · {r.source} · {int(r.steps)} steps"
             + ("" if r.score is None or r.score != r.score else f" · score {r.score:.2f}"), str(r.run_id))
            for r in df.itertuples(index=False)]


def check_baseline(store: Store, run_id: str | None) -> str | None:
    """The baseline run id if the store has it (None for none picked); LabError otherwise."""
    if not run_id:
        return None
    if not store.rows("SELECT 1 FROM runs WHERE run_id = ?", [str(run_id)]):
        raise LabError(f"baseline '{run_id}' is not a run of the store; pick one from the list")
    return str(run_id)


TIES_COLUMN = "per-step rank (95 %)"
DELTA_COLUMN = "Δ score vs baseline [95 %]"
VERDICT_COLUMN = "vs baseline"
SETTINGS_COLUMN = "settings vs baseline"


def with_comparisons(store: Store, frame: pd.DataFrame, baseline: str | None = None, *,
                     resamples: int | None = None, seed: int | None = None) -> tuple[pd.DataFrame, str]:
    """The leaderboard frame with the per-step rank column (and, with a baseline, Δ score and the verdict)
    after `score`, and one line saying what the intervals are."""
    runs = row_runs(store, frame)
    groups = tie_groups(store, [r for r in runs if r], resamples=resamples, seed=seed)
    out = frame.copy()
    at = list(out.columns).index("score") + 1 if "score" in out.columns else len(out.columns)
    columns = {TIES_COLUMN: [tie_text(groups.get(r) if r else None, r) for r in runs]}
    notes = [ties_note(groups), next((g.hint for g in groups.values() if g.hint), "")]
    if baseline:
        picked = baseline_columns(store, runs, baseline, resamples=resamples, seed=seed)
        columns[DELTA_COLUMN], columns[VERDICT_COLUMN] = picked.delta, picked.verdict
        columns[SETTINGS_COLUMN] = settings_column(store, runs, baseline)
        name = store.scalar("SELECT display_name FROM runs WHERE run_id = ?", [baseline])
        notes.append(f"Δ score = row − baseline {name} [{baseline}] over their common steps; 95 % intervals "
                     f"{picked.label}; ⚠ a setting that changes answers differs from the baseline's")
        notes.append(picked.hint if picked.hint not in notes else "")
    for offset, (name, values) in enumerate(columns.items()):
        out.insert(at + offset, name, values)
    return out, " · ".join(n for n in notes if n)
