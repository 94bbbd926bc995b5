"""What the Results table says about differences between its rows: which rows with per-step data are
statistically tied (rank ranges on the same steps), and, against a baseline the user picks, each row's
Δ score with its simultaneous interval, its minimum detectable effect, a verdict, and each row's chance of
being the best of the rows judged together with its expected regret. Rows without per-step data say so, never
an interval. Computed from the store's StatsTable (lab.analysis.judge, the same figures as lab.analysis.run_pairs)
and shared by every visitor until the store changes (lab.analysis.cache): the store's lock (`hold`) is
taken to read, never to compute."""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from lab.errors import LabError
from lab.scoring.paired import load_settings
from lab.scoring.ranking import Ranking, rank_ties
from lab.store.db import Store
from lab.analysis.interval_hint import hint_for, interval_hint
from lab.analysis.run_pairs import delta_text, metric_spec, settings_between, verdict_cell
from lab.analysis.cache import Admit, shared, stats_table
from lab.analysis.judge import against, chances
from lab.analysis.run_matrix import Hold, StatsTable

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


def tie_groups(store: Store, run_ids: Sequence[str], *, hold: Hold = nullcontext, admit: Admit = nullcontext,
               resamples: int | None = None, seed: int | None = None) -> dict[str, TieGroup]:
    """run_id -> the group of runs scored on exactly the same steps it is ranked in (score, one run's step
    values being the mean of its answers), with rank ranges from all-pairs simultaneous intervals."""
    ids = sorted(set(r for r in run_ids if r))
    if not ids:
        return {}
    table = stats_table(store, hold)
    return shared(store, ("ties", tuple(ids), resamples, seed), lambda: _tie_groups(table, ids, resamples, seed), admit)


def _tie_groups(table: StatsTable, ids: list[str], resamples: int | None, seed: int | None) -> dict[str, TieGroup]:
    spec = metric_spec("score")
    have = ~np.isnan(table.values[spec.column])
    groups: dict[tuple, list[str]] = {}
    for run_id in ids:
        i = table.row.get(run_id)
        if i is not None and have[i].any():
            groups.setdefault((have[i].tobytes(), table.scoring[i]), []).append(run_id)
    out: dict[str, TieGroup] = {}
    for members in groups.values():
        rows = [table.row[r] for r in members]
        names = [table.names[i] for i in rows]
        if len(members) < 2:
            group = TieGroup(members, names, None, "no other run on the same steps")
        else:
            at = np.flatnonzero(have[rows[0]])
            at = at[np.argsort(table.order[rows[0], at], kind="stable")]
            tasks = np.unique(table.step_task[table.present[rows].any(axis=0)])  # every task of their steps
            task = np.searchsorted(tasks, table.step_task[at])
            values = table.step_means(spec)[rows][:, at].T
            ranking = rank_ties(task, values, len(tasks), scale=spec.scale, resamples=resamples, seed=seed)
            note = "" if ranking is not None else \
                f"fewer than {load_settings().min_common_steps} steps or {load_settings().min_common_tasks} tasks"
            hint = "" if ranking is not None else interval_hint(len(at), len(np.unique(task)))
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
    return f"{r.rank[i]}{span} of {len(group.run_ids)}" + (f" · tied with {names}" if len(tied) else " · no tie")


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
    """Per row: Δ score against the baseline with its interval, the verdict, the minimum detectable effect,
    P(best) and expected regret among the rows judged together; the label of the intervals' adjustment and a
    note on P(best)."""

    delta: list[str]
    verdict: list[str]
    mde: list[str]
    p_best: list[str]
    regret: list[str]
    label: str
    best_note: str = ""
    hint: str = ""  # what would give the rows without an interval theirs (lab.analysis.interval_hint)


def _against_baseline(table: StatsTable, baseline: str, others: list[str], resamples: int | None,
                      seed: int | None) -> tuple[dict, object]:
    found = {a.run_id: a for a in against(table, baseline, others, "score", resamples=resamples, seed=seed)}
    return found, chances(table, [baseline, *others], baseline, "score", resamples=resamples, seed=seed)


def baseline_columns(store: Store, runs: Sequence[str | None], baseline: str, *, hold: Hold = nullcontext,
                     admit: Admit = nullcontext, resamples: int | None = None, seed: int | None = None) -> BaselineColumns:
    """Each row's run against `baseline` (score), the intervals simultaneous over the rows compared."""
    others = sorted({r for r in runs if r and r != baseline})
    table = stats_table(store, hold)
    if baseline not in table.row:
        raise LabError(f"baseline '{baseline}' is not a run of the store; pick one from the list")
    others = [r for r in others if r in table.row]
    results, best = shared(store, ("baseline", baseline, tuple(others), resamples, seed),
                           lambda: _against_baseline(table, baseline, others, resamples, seed), admit)
    chance = dict(zip(best.run_ids, zip(best.p_best, best.expected_regret)))
    labels = {a.difference.adjustment for a in results.values() if a.difference is not None and a.difference.ci}
    cols: dict[str, list[str]] = {"delta": [], "verdict": [], "mde": [], "p_best": [], "regret": []}
    hints = []
    for run_id in runs:
        p, regret = chance.get(run_id, (None, None)) if run_id else (None, None)
        cols["p_best"].append("" if p is None else f"{p:.2f}")
        cols["regret"].append("" if regret is None else f"{regret:.2f}")
        if run_id is None or run_id == baseline:
            shown = NO_STEPS if run_id is None else BASELINE
            cols["delta"].append(shown)
            cols["verdict"].append(shown)
            cols["mde"].append("")
            continue
        found = results.get(run_id)
        diff = found.difference if found else None
        cols["delta"].append(delta_text(diff, 2, found.note if found else "not comparable"))
        cols["verdict"].append(verdict_cell(diff))
        cols["mde"].append("" if diff is None or diff.mde is None else f"{diff.mde:.1f}")
        hints.append(hint_for(diff))
    return BaselineColumns(**cols, label=next(iter(labels)) if len(labels) == 1 else "pairwise", best_note=best.note,
                           hint=next((h for h in hints if h), ""))


def settings_column(store: Store, runs: Sequence[str | None], baseline: str, hold: Hold = nullcontext) -> list[str]:
    """Per row: the settings its run differs from the baseline's in (lab.resultfiles.run_settings), "⚠" before
    one that changes answers; "baseline" for the baseline and NO_STEPS for a row without a run."""
    known = stats_table(store, hold).settings  # read with the store's matrix, kept until the store changes
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
MDE_COLUMN = "detectable Δ (80 %)"
BEST_COLUMN = "P(best)"
REGRET_COLUMN = "regret (points)"
SETTINGS_COLUMN = "settings vs baseline"


def leaderboard_rows(store: Store, first56: bool, sort: str, hold: Hold = nullcontext) -> tuple[pd.DataFrame, list]:
    """The leaderboard frame (lab.store.queries.leaderboard) and each row's run (row_runs), read once under
    `hold` for every visitor asking at once, kept until the store changes (never change the frame kept)."""
    from lab.store import queries

    def read() -> tuple[pd.DataFrame, list]:
        with hold():
            frame = queries.leaderboard(store, first56_only=first56, include_runs=not first56, order=sort)
            return frame, row_runs(store, frame)
    return shared(store, ("leaderboard", first56, sort), read, background=False)


def with_comparisons(store: Store, frame: pd.DataFrame, baseline: str | None = None, *, hold: Hold = nullcontext,
                     admit: Admit = nullcontext, runs: list | None = None, resamples: int | None = None,
                     seed: int | None = None) -> tuple[pd.DataFrame, str]:
    """The leaderboard frame with the per-step rank column (and, with a baseline, Δ score, the verdict, the
    detectable difference, P(best) and regret) after `score`, and one line saying what they are; `runs`: each
    row's run when known (leaderboard_rows)."""
    with hold():
        runs = row_runs(store, frame) if runs is None else runs
        name = store.scalar("SELECT display_name FROM runs WHERE run_id = ?", [baseline]) if baseline else None
    groups = tie_groups(store, [r for r in runs if r], hold=hold, admit=admit, resamples=resamples, seed=seed)
    out = frame.copy()
    at = list(out.columns).index("score") + 1 if "score" in out.columns else len(out.columns)
    columns = {TIES_COLUMN: [tie_text(groups.get(r) if r else None, r) for r in runs]}
    notes = [ties_note(groups), next((g.hint for g in groups.values() if g.hint), "")]
    if baseline:
        picked = baseline_columns(store, runs, baseline, hold=hold, admit=admit, resamples=resamples, seed=seed)
        columns.update({DELTA_COLUMN: picked.delta, VERDICT_COLUMN: picked.verdict, MDE_COLUMN: picked.mde,
                        BEST_COLUMN: picked.p_best, REGRET_COLUMN: picked.regret,
                        SETTINGS_COLUMN: settings_column(store, runs, baseline, hold)})
        notes.append(f"Δ score = row − baseline {name} [{baseline}] over their common steps; 95 % intervals "
                     f"{picked.label}; detectable Δ: the smallest true difference each comparison finds 80 % of the "
                     "time; P(best): the share of task resamples in which the row scores highest on the baseline's "
                     "steps, regret: the points picking it is expected to give up"
                     + (f" ({picked.best_note})" if picked.best_note else "")
                     + "; ⚠ a setting that changes answers differs from the baseline's")
        notes.append(picked.hint if picked.hint not in notes else "")
    for offset, (col, values) in enumerate(columns.items()):
        out.insert(at + offset, col, values)
    return out, " · ".join(n for n in notes if n)
