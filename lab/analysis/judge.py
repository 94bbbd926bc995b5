"""One baseline against many stored runs, and each run's chance of being the best, from the store's StatsTable
(lab.analysis.run_matrix) by matrix products (lab.scoring.paired_matrix): the same differences, intervals and
MDEs lab.analysis.run_pairs.compare_against_loaded gives (tests/analysis/test_stats_judge.py holds them equal), at a
fraction of the cost.

A comparison is on the steps both runs have the metric for (within a part of the steps when given); the tasks
drawn are those the comparisons judged together hold, numbered in the store's task order, so the draws are
the ones lab.analysis.run_pairs makes. Comparisons with a run that has several answers per step take the two-level
bootstrap of lab.scoring.paired.replicates (slower; the results are cached all the same).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import cachetools
import numpy as np
import pandas as pd

from lab.errors import LabError
from lab.scoring import paired_matrix
from lab.scoring.best import judged_chances
from lab.scoring.paired import (
    Difference, PairedMetric, _settings, pairwise_differences, replicates, simultaneous_differences, summarize,
    task_counts, task_draws, too_few,
)
from lab.analysis.run_pairs import (
    AgainstBaseline, RunSteps, _equiv_note, check_comparable, metric_spec, paired_metric, settings_between,
)
from lab.analysis.run_matrix import StatsTable

_draws: cachetools.LRUCache = cachetools.LRUCache(maxsize=8)
_draws_lock = threading.Lock()


@cachetools.cached(_draws, lock=_draws_lock)
def draw_counts(seed: int, resamples: int, n_tasks: int) -> np.ndarray:
    """The (resamples, tasks) task counts of lab.scoring.paired's draws, drawn once per (seed, resamples, tasks)."""
    counts = task_counts(task_draws(seed, resamples, n_tasks), n_tasks).astype(float)
    counts.setflags(write=False)
    return counts


_NO_STEPS = pd.DataFrame()


def _light(table: StatsTable, i: int) -> RunSteps:
    """A run's name, scorer and equiv state (what the notes of a comparison read)."""
    run_id = table.run_ids[i]
    return RunSteps(run_id, table.names[i], table.scoring[i], table.equiv[i], _NO_STEPS, _NO_STEPS,
                    table.settings.get(run_id), table.missing.get(run_id))


def _note(table: StatsTable, spec, b: int, c: int, have: np.ndarray) -> str:
    """Why run c cannot be compared with baseline b at all on this metric ("" when it can), in
    lab.analysis.run_pairs.paired_metric's words."""
    if table.legacy(b) != table.legacy(c):
        try:
            check_comparable(_light(table, b), _light(table, c))
        except LabError as exc:
            return str(exc)
    if spec.needs == "equiv_done":
        notes = [_equiv_note(_light(table, b), "baseline"), _equiv_note(_light(table, c), "candidate")]
        if notes[0] and notes[0].split(": ", 1)[1] == notes[1].split(": ", 1)[-1]:
            notes = [f"both: {notes[0].split(': ', 1)[1]}"]
        note = "; ".join(n for n in notes if n)
        if note:
            return note
    lacking = [role for role, i in (("the baseline", b), ("the candidate", c)) if not have[i].any()]
    return f"not recorded for {' and '.join(lacking)}" if lacking else ""


@dataclass(frozen=True)
class _Plan:
    """The comparisons of one baseline with its candidates on one metric, before any resample."""

    notes: list[str]                 # per candidate ("" : compared)
    mask: np.ndarray                 # (candidates, steps) common steps
    tasks: np.ndarray                # the tasks drawn, as store task indices
    compact: np.ndarray              # store task index -> drawn task index


def _plan(table: StatsTable, spec, b: int, cands: Sequence[int], keys) -> _Plan:
    have = table.has(spec)
    part = table.part(keys)
    notes, mask = [], np.zeros((len(cands), len(table.step_keys)), dtype=bool)
    for j, c in enumerate(cands):
        note = _note(table, spec, b, c, have)
        if not note:
            mask[j] = have[b] & have[c] & part
            note = "" if mask[j].any() else "no step in common"
        notes.append(note)
    tasks = np.unique(table.step_task[mask.any(axis=0)])
    compact = np.zeros(len(table.task_ids), dtype=np.int64)
    compact[tasks] = np.arange(len(tasks))
    return _Plan(notes, mask, tasks, compact)


def _two_level_metric(table: StatsTable, spec, b: int, c: int, keys) -> PairedMetric:
    """The PairedMetric lab.analysis.run_pairs builds for this pair (answers and all), in the store's task numbering."""
    index = {t: i for i, t in enumerate(table.task_ids)}
    metric, _ = paired_metric(table.run_steps(table.run_ids[b]), table.run_steps(table.run_ids[c]), spec, index, keys)
    return metric


def against(table: StatsTable, baseline: str, candidates: Sequence[str], metric: str = "score", step_keys=None, *,
            simultaneous: bool = True, resamples: int | None = None, seed: int | None = None) -> list[AgainstBaseline]:
    """`baseline` against each of `candidates` on `metric` (within `step_keys`): simultaneous 95 % intervals
    (max-T) as lab.analysis.run_pairs.compare_against_loaded gives them, or each its own (pairwise)."""
    settings, resamples, seed = _settings(resamples, seed, None)
    spec = metric_spec(metric)
    b, cands = table.index(baseline), [table.index(c) for c in candidates]
    keys = None if step_keys is None else list(step_keys)
    plan = _plan(table, spec, b, cands, keys)
    ready = [j for j, note in enumerate(plan.notes) if not note]
    slow = {j for j in ready if table.two_level(table.run_ids[b], spec) or table.two_level(table.run_ids[cands[j]], spec)}
    summaries, metrics = {}, {}
    for j in slow:
        metrics[j] = _two_level_metric(table, spec, b, cands[j], keys)
        metrics[j] = PairedMetric(plan.compact[metrics[j].task], metrics[j].baseline, metrics[j].candidate,
                                  metrics[j].baseline_weight, metrics[j].candidate_weight, scale=spec.scale,
                                  higher_is_better=not spec.lower_is_better)
        summaries[j] = summarize(metrics[j], settings.unchanged_tolerance)
    fast = [j for j in ready if j not in slow]
    values, weights, task = table.step_means(spec), table.weights(spec), plan.compact[table.step_task]
    if fast:
        rows = [cands[j] for j in fast]
        got = paired_matrix.summaries(values[b], weights[b], values[rows], weights[rows], plan.mask[fast], task,
                                      len(plan.tasks), spec.scale, not spec.lower_is_better, settings.unchanged_tolerance)
        summaries.update(zip(fast, got))
    usable = [j for j in ready if not too_few(summaries[j], settings)]
    reps = _replicates(table, spec, b, cands, plan, usable, slow, metrics, resamples, seed, settings.chunk_values)
    ordered = [summaries[j] for j in ready]
    made = (simultaneous_differences if simultaneous else pairwise_differences)(ordered, reps, settings, resamples, seed)
    found: dict[int, Difference] = dict(zip(ready, made))
    base = table.settings.get(baseline)
    return [AgainstBaseline(table.run_ids[c], table.names[c], found.get(j), plan.notes[j],
                            settings_between(base, table.settings.get(table.run_ids[c]))) for j, c in enumerate(cands)]


def _replicates(table: StatsTable, spec, b: int, cands: Sequence[int], plan: _Plan, usable: list[int], slow: set,
                metrics: dict, resamples: int, seed: int, chunk_values: int) -> np.ndarray | None:
    """(resamples, usable) replicate columns: matrix products for one-answer comparisons, the two-level
    bootstrap (its own answer draws, in the comparisons' order, as lab.scoring.paired draws them) for the rest."""
    if not usable:
        return None
    n_tasks = len(plan.tasks)
    counts = draw_counts(seed, resamples, n_tasks)
    out = np.empty((resamples, len(usable)))
    fast = [k for k, j in enumerate(usable) if j not in slow]
    if fast:
        values, weights = np.nan_to_num(table.step_means(spec)), np.nan_to_num(table.weights(spec))
        rows = [cands[usable[k]] for k in fast]
        mask, task = plan.mask[[usable[k] for k in fast]], plan.compact[table.step_task]
        sums = [paired_matrix.task_sums(v, mask, task, n_tasks) for v in (values[b], weights[b], values[rows], weights[rows])]
        out[:, fast] = paired_matrix.replicate_columns(counts, *sums, spec.scale)
    two = [k for k, j in enumerate(usable) if j in slow]
    if two:
        out[:, two] = replicates([metrics[usable[k]] for k in two], n_tasks, resamples, seed, chunk_values)
    return out


@dataclass(frozen=True)
class Chances:
    """Each judged run's chance of being the best and expected regret (None: not judged, see `note`)."""

    run_ids: list[str]
    p_best: list[float | None]
    expected_regret: list[float | None]
    steps: int
    tasks: int
    note: str = ""


def chances(table: StatsTable, run_ids: Sequence[str], reference: str, metric: str = "score", step_keys=None, *,
            resamples: int | None = None, seed: int | None = None) -> Chances:
    """P(best) and expected regret of the runs judged together, on the steps `reference` has the metric for
    (within `step_keys`): runs lacking one of those steps are not judged (None), so all share the same steps
    and task draws (each step's value the mean of its answers); the resamples pulled toward the runs' mean
    first (lab.scoring.best.judged_chances)."""
    settings, resamples, seed = _settings(resamples, seed, None)
    spec = metric_spec(metric)
    rows = [table.index(r) for r in run_ids]
    ref = table.index(reference)
    have = table.has(spec)
    steps = have[ref] & table.part(None if step_keys is None else list(step_keys))
    judged = [k for k, i in enumerate(rows) if have[i][steps].all() and table.legacy(i) == table.legacy(ref)]
    tasks = np.unique(table.step_task[steps])
    none: list[float | None] = [None] * len(rows)
    if steps.sum() < settings.min_common_steps or len(tasks) < settings.min_common_tasks or len(judged) < 2:
        why = (f"fewer than {settings.min_common_steps} steps or {settings.min_common_tasks} tasks to judge on"
               if len(judged) >= 2 else "fewer than two runs have every step of the reference")
        return Chances(list(run_ids), none, list(none), int(steps.sum()), len(tasks), f"no P(best): {why}")
    compact = np.zeros(len(table.task_ids), dtype=np.int64)
    compact[tasks] = np.arange(len(tasks))
    picked = [rows[k] for k in judged]
    mask = np.broadcast_to(steps, (len(picked), len(steps)))
    value = paired_matrix.task_sums(np.nan_to_num(table.step_means(spec)[picked]), mask, compact[table.step_task], len(tasks))
    weight = paired_matrix.task_sums(np.nan_to_num(table.weights(spec)[picked]), mask, compact[table.step_task], len(tasks))
    boot = paired_matrix.figures(draw_counts(seed, resamples, len(tasks)), value, weight, spec.scale)
    per_task = weight[0]
    effective = float(per_task.sum() ** 2 / (per_task ** 2).sum())
    found = judged_chances(boot, spec.scale * value.sum(axis=1) / weight.sum(axis=1), effective, settings.confidence,
                           higher_is_better=not spec.lower_is_better)
    p_best, regret = list(none), list(none)
    for k, p, r in zip(judged, found.p_best, found.expected_regret):
        p_best[k], regret[k] = float(p), float(r)
    left = len(rows) - len(judged)
    note = f"{left} run{'s' if left != 1 else ''} lacking steps of the reference not judged" if left else ""
    return Chances(list(run_ids), p_best, regret, int(steps.sum()), len(tasks), note)
