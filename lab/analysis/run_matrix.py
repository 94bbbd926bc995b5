"""Every stored run's per-step metrics as one matrix, read once per store generation: what the statistics of
Results, the checkpoint series, Compare and Triage compute from (lab.analysis.judge), so that a visitor's
click is matrix products over data already in memory instead of a query and a bootstrap per run.

The steps of all runs form one list (the union of their step keys, each with its task and bucket); a run's row
holds NaN for a step it lacks or a value it did not record, so the runs' different step sets stay exact: each
comparison takes its own common steps. Runs with several answers per step keep their RunSteps too (the
two-level bootstrap reads the answers; lab.analysis.run_pairs.step_values).

Reading takes the store's lock (the `hold` the caller passes); building the matrices does not.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Sequence

import numpy as np

from lab.errors import LabError
from lab.store.db import Store
from lab.analysis.run_pairs import (
    LEGACY, MetricSpec, RunSteps, load_metrics, load_run, settings_from, settings_rows, step_values,
)

Hold = Callable[[], ContextManager]
RUNS_SQL = "SELECT run_id, display_name, scoring_version, coalesce(equiv_state, '') FROM runs ORDER BY run_id"
STEPS_SQL = ("SELECT step_key, any_value(task_id), any_value(bucket), min(ord) AS first FROM steps "
             "GROUP BY step_key ORDER BY first, step_key")
VALUES_SQL = """
WITH r AS (SELECT run_id, row_number() OVER (ORDER BY run_id) - 1 AS i FROM runs),
     k AS (SELECT step_key, row_number() OVER (ORDER BY min(ord), step_key) - 1 AS j FROM steps GROUP BY step_key)
SELECT r.i AS run, k.j AS step, s.ord AS ord, s.command_f1 AS command_f1, s.first_cmd_exact AS first_cmd_exact,
       CAST(s.valid_json AS DOUBLE) AS valid_json, s.equiv_f1 AS equiv_f1, -ref.ref_logprob AS ref_nll_sum,
       CAST(ref.ref_tokens AS DOUBLE) AS ref_tokens
FROM steps s JOIN r USING (run_id) JOIN k USING (step_key)
LEFT JOIN step_reference ref ON ref.run_id = s.run_id AND ref.step_key = s.step_key"""
COLUMNS = ("command_f1", "first_cmd_exact", "valid_json", "equiv_f1", "ref_nll_sum", "ref_tokens")


@dataclass(frozen=True)
class StatsTable:
    """The store's runs × steps, one matrix per metric column (NaN: not there)."""

    generation: tuple
    run_ids: list[str]
    names: list[str]
    scoring: list[str]
    equiv: list[str]
    step_keys: list[str]
    task_ids: list[str]                 # sorted: a task's index is its place here
    step_task: np.ndarray               # (steps,) each step's task index
    bucket: np.ndarray                  # (steps,) each step's bucket
    present: np.ndarray                 # (runs, steps) the run has the step
    order: np.ndarray                   # (runs, steps) the step's place in the run's file (-1: not there)
    values: dict[str, np.ndarray]       # column -> (runs, steps)
    loaded: dict[str, RunSteps] = field(default_factory=dict)  # runs kept as loaded (every run with answers)
    means: dict[str, np.ndarray] = field(default_factory=dict)  # sampled column -> (runs, steps) step means
    answered: dict[str, set] = field(default_factory=dict)  # sampled column -> runs with several answers per step
    row: dict[str, int] = field(default_factory=dict)
    step_row: dict[str, int] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)  # run_id -> its RunSettings (lab.resultfiles.run_settings)
    missing: dict = field(default_factory=dict)   # run_id -> its steps the store's replay lacks (None: no replay)

    def index(self, run_id: str) -> int:
        """The run's row (LabError naming a run the store does not have)."""
        if run_id not in self.row:
            raise LabError(f"no run '{run_id}' in the store; list them with "
                           "`python -m lab results sql \"SELECT run_id, display_name FROM runs\"`")
        return self.row[run_id]

    def has(self, spec: MetricSpec) -> np.ndarray:
        """(runs, steps): where a run has the metric (value, and a positive weight for a ratio metric)."""
        have = ~np.isnan(self.values[spec.column])
        if spec.weight:
            weight = self.values[spec.weight]
            have &= ~np.isnan(weight) & (np.nan_to_num(weight) > 0)
        return have

    def weights(self, spec: MetricSpec) -> np.ndarray:
        """(runs, steps) each step's weight (1 for a mean)."""
        return self.values[spec.weight] if spec.weight else np.ones_like(self.values[spec.column])

    def step_means(self, spec: MetricSpec) -> np.ndarray:
        """(runs, steps): each step's value, the mean of its answers where a run has several."""
        return self.means.get(spec.column, self.values[spec.column])

    def two_level(self, run_id: str, spec: MetricSpec) -> bool:
        """Whether the run's steps have several answers for this metric (the two-level bootstrap)."""
        return spec.sampled and run_id in self.answered.get(spec.column, ())

    def legacy(self, i: int) -> bool:
        return self.scoring[i] == LEGACY

    def part(self, step_keys) -> np.ndarray:
        """(steps,) the steps of `step_keys` (None: all)."""
        if step_keys is None:
            return np.ones(len(self.step_keys), dtype=bool)
        out = np.zeros(len(self.step_keys), dtype=bool)
        rows = [self.step_row[k] for k in step_keys if k in self.step_row]
        out[rows] = True
        return out

    def run_steps(self, run_id: str) -> RunSteps:
        """The run as lab.analysis.run_pairs.load_run gives it (for the two-level path)."""
        if run_id in self.loaded:
            return self.loaded[run_id]
        import pandas as pd

        i = self.row[run_id]
        at = np.flatnonzero(self.present[i])
        at = at[np.argsort(self.order[i, at], kind="stable")]
        frame = pd.DataFrame({"step_key": [self.step_keys[j] for j in at],
                              "task_id": [self.task_ids[t] for t in self.step_task[at]],
                              "bucket": self.bucket[at],
                              **{c: self.values[c][i, at] for c in COLUMNS}}).set_index("step_key", drop=False)
        return RunSteps(run_id, self.names[i], self.scoring[i], self.equiv[i], frame, pd.DataFrame(),
                        self.settings.get(run_id), self.missing.get(run_id))


@dataclass(frozen=True)
class _Read:
    generation: tuple
    runs: list[tuple]
    steps: list[tuple]
    values: dict
    sampled: dict
    settings: list             # lab.analysis.run_pairs.settings_rows
    contexts: frozenset | None


def _read(store: Store, hold: Hold) -> _Read:
    """The rows the table is built from, read under `hold` (the store's lock)."""
    with hold():
        generation = store.connector.generation()
        with store.connector.cursor() as cur:
            runs = cur.execute(RUNS_SQL).fetchall()
            steps = cur.execute(STEPS_SQL).fetchall()
            values = cur.execute(VALUES_SQL).fetchnumpy()
            with_samples = [r for (r,) in cur.execute("SELECT DISTINCT run_id FROM samples ORDER BY run_id").fetchall()]
        sampled = {r: load_run(store, r) for r in with_samples}
        settings = settings_rows(store, [r for r, *_ in runs])
    contexts = frozenset(store.equiv_contexts) if store.equiv_contexts else None
    return _Read(generation, runs, steps, values, sampled, settings, contexts)


def read_table(store: Store, hold: Hold = nullcontext) -> StatsTable:
    """The store's StatsTable (the reading under `hold`, the building outside it)."""
    got = _read(store, hold)
    n_runs, n_steps = len(got.runs), len(got.steps)
    task_ids = sorted({str(t) for _, t, _, _ in got.steps})
    task_of = {t: i for i, t in enumerate(task_ids)}
    run_at, step_at, order = (np.asarray(got.values[c], dtype=np.int64) for c in ("run", "step", "ord"))
    present = np.zeros((n_runs, n_steps), dtype=bool)
    present[run_at, step_at] = True
    place = np.full((n_runs, n_steps), -1, dtype=np.int64)
    place[run_at, step_at] = order
    values = {}
    for name in COLUMNS:
        grid = np.full((n_runs, n_steps), np.nan)
        grid[run_at, step_at] = np.ma.filled(np.ma.asarray(got.values[name], dtype=float), np.nan)
        values[name] = grid
    table = StatsTable(
        generation=got.generation, run_ids=[str(r[0]) for r in got.runs], names=[str(r[1]) for r in got.runs],
        scoring=[str(r[2]) for r in got.runs], equiv=[str(r[3]) for r in got.runs],
        step_keys=[str(s[0]) for s in got.steps], task_ids=task_ids,
        step_task=np.array([task_of[str(s[1])] for s in got.steps], dtype=np.int64),
        bucket=np.array([s[2] for s in got.steps], dtype=object), present=present, order=place, values=values,
        loaded=got.sampled,
    )
    table.row.update({r: i for i, r in enumerate(table.run_ids)})
    table.step_row.update({k: j for j, k in enumerate(table.step_keys)})
    table.settings.update(settings_from(got.settings))
    if got.contexts is None:
        table.missing.update({r: None for r in table.run_ids})
    else:
        lacking = np.array([k not in got.contexts for k in table.step_keys])
        table.missing.update({r: int((present[i] & lacking).sum()) for i, r in enumerate(table.run_ids)})
    _sample_means(table)
    return table


def table_of(runs: Sequence[RunSteps]) -> StatsTable:
    """A StatsTable of runs already loaded (lab.analysis.run_pairs.load_run; they may come from several stores, as
    `compare`'s result files and stored runs do). LabError when a run is given twice."""
    ids = [r.run_id for r in runs]
    twice = sorted({r for r in ids if ids.count(r) > 1})
    if twice:
        raise LabError(f"run {twice[0]} is given twice; give each run once")
    keys: dict[str, int] = {}
    tasks: dict[str, str] = {}
    buckets: dict[str, object] = {}
    for run in runs:
        for key, task, bucket in zip(run.steps["step_key"], run.steps["task_id"], run.steps["bucket"]):
            if key not in keys:
                keys[key], tasks[key], buckets[key] = len(keys), str(task), bucket
    task_ids = sorted(set(tasks.values()))
    task_of = {t: i for i, t in enumerate(task_ids)}
    shape = (len(runs), len(keys))
    present, place = np.zeros(shape, dtype=bool), np.full(shape, -1, dtype=np.int64)
    values = {c: np.full(shape, np.nan) for c in COLUMNS}
    for i, run in enumerate(runs):
        at = np.array([keys[k] for k in run.steps["step_key"]], dtype=np.int64)
        present[i, at] = True
        place[i, at] = np.arange(len(at))
        for c in COLUMNS:
            values[c][i, at] = run.steps[c].to_numpy(dtype=float)
    table = StatsTable(
        generation=(), run_ids=ids, names=[r.name for r in runs], scoring=[r.scoring_version for r in runs],
        equiv=[r.equiv_state for r in runs], step_keys=list(keys), task_ids=task_ids,
        step_task=np.array([task_of[tasks[k]] for k in keys], dtype=np.int64),
        bucket=np.array([buckets[k] for k in keys], dtype=object), present=present, order=place, values=values,
        loaded={r.run_id: r for r in runs},
    )
    table.row.update({r: i for i, r in enumerate(ids)})
    table.step_row.update(keys)
    table.settings.update({r.run_id: r.settings for r in runs})
    table.missing.update({r.run_id: r.missing_from_replay for r in runs})
    _sample_means(table)
    return table


def _sample_means(table: StatsTable) -> None:
    """The step means of the sampled columns of runs with several answers (the others' own values)."""
    for spec in load_metrics().values():
        if not spec.sampled or not table.loaded:
            continue
        means = table.values[spec.column].copy()
        for run_id, run in table.loaded.items():
            if run.samples.empty:
                continue
            keys = run.steps.index
            grid = step_values(run, spec, keys)
            if grid.shape[1] <= 1:
                continue
            table.answered.setdefault(spec.column, set()).add(run_id)
            with np.errstate(invalid="ignore"):
                row_means = np.nanmean(grid, axis=1)
            means[table.row[run_id], [table.step_row[k] for k in keys]] = row_means
        table.means[spec.column] = means
