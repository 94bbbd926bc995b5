"""Is B really better than A, for stored runs: pull two runs' common steps from the store (per-step metrics,
tasks, sampled answers, the reference NLL) and hand them to lab.scoring.paired. The `compare` command,
Results, the checkpoint series, Triage and Compare all compare runs through this module, so a difference
is computed one way everywhere.

Steps one run lacks are left out of both (and so are steps where either lacks the metric); the count of
common steps is part of every answer.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
import yaml

from lab.errors import LabError
from lab.resultfiles.run_settings import RunSettings, SettingsDiff, compare_settings, run_settings
from lab.scoring.paired import (
    Difference, PairedMetric, compare_each, compare_many, load_settings, task_contributions,
)
from lab.store.db import Store

METRICS_PATH = Path(__file__).with_name("compare_metrics.yaml")
LEGACY = "legacy_386"
STEPS_SQL = """
SELECT s.step_key, s.task_id, s.step_idx, s.bucket, s.source_group, s.command_f1, s.first_cmd_exact,
       CAST(s.valid_json AS DOUBLE) AS valid_json, s.equiv_f1,
       -r.ref_logprob AS ref_nll_sum, CAST(r.ref_tokens AS DOUBLE) AS ref_tokens
FROM steps s LEFT JOIN step_reference r ON r.run_id = s.run_id AND r.step_key = s.step_key
WHERE s.run_id = ?
ORDER BY s.ord"""
SAMPLES_SQL = """
SELECT step_key, sample, command_f1, first_cmd_exact, CAST(valid_json AS DOUBLE) AS valid_json
FROM samples WHERE run_id = ? ORDER BY step_key, sample"""


@dataclass(frozen=True)
class MetricSpec:
    """One metric of compare_metrics.yaml."""

    name: str
    label: str
    column: str
    scale: float
    digits: int
    weight: str | None = None
    sampled: bool = False
    lower_is_better: bool = False
    needs: str | None = None


@lru_cache(maxsize=2)
def load_metrics(path: Path = METRICS_PATH) -> dict[str, MetricSpec]:
    """name -> MetricSpec, in the order shown."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))["metrics"]
    return {name: MetricSpec(name=name, label=str(m["label"]), column=str(m["column"]), scale=float(m["scale"]),
                             digits=int(m["digits"]), weight=m.get("weight"), sampled=bool(m.get("sampled", False)),
                             lower_is_better=bool(m.get("lower_is_better", False)), needs=m.get("needs"))
            for name, m in raw.items()}


def metric_spec(name: str) -> MetricSpec:
    """The named metric (LabError naming the known ones)."""
    metrics = load_metrics()
    if name not in metrics:
        raise LabError(f"unknown metric '{name}'; choose one of: {', '.join(metrics)}")
    return metrics[name]


@dataclass(frozen=True)
class RunSteps:
    """One run's per-step values as a comparison needs them."""

    run_id: str
    name: str
    scoring_version: str
    equiv_state: str
    steps: pd.DataFrame    # indexed by step_key, in the file's order
    samples: pd.DataFrame  # step_key, sample, the sampled metrics' columns (empty: one answer per step)
    settings: RunSettings | None = None  # how it was made (lab.resultfiles.run_settings)
    missing_from_replay: int | None = None  # its steps the store's replay lacks (None: no replay known)

    def label(self) -> str:
        return f"{self.name} [{self.run_id}]"


def load_run(store: Store, run_id: str) -> RunSteps:
    """A stored run's steps (LabError for a run id the store does not have)."""
    meta = store.dicts("SELECT display_name, scoring_version, equiv_state, meta_json FROM runs WHERE run_id = ?",
                       [str(run_id)])
    if not meta:
        raise LabError(f"no run '{run_id}' in the store; list them with "
                       "`python -m lab results sql \"SELECT run_id, display_name FROM runs\"`")
    steps = store.query(STEPS_SQL, [str(run_id)]).set_index("step_key", drop=False)
    samples = store.query(SAMPLES_SQL, [str(run_id)])
    m = meta[0]
    contexts = store.equiv_contexts
    missing = int((~steps.index.isin(list(contexts))).sum()) if contexts else None
    return RunSteps(str(run_id), str(m["display_name"]), str(m["scoring_version"]), str(m["equiv_state"] or ""),
                    steps, samples, stored_settings(m["meta_json"], m["scoring_version"], steps.index), missing)


def stored_settings(meta_json: str | None, scoring_version: str, step_keys: Iterable[str]) -> RunSettings:
    """A stored run's settings from its `runs.meta_json` (the result file's top-level fields) and its steps."""
    try:
        meta = json.loads(meta_json) if meta_json else {}
    except ValueError:
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    return run_settings({**meta, "scoring_version": scoring_version}, step_keys)


def settings_rows(store: Store, run_ids: Sequence[str]) -> list[tuple[str, str | None, str, list]]:
    """(run_id, meta_json, scoring_version, step keys) of many stored runs, in two queries: what settings_from
    reads (the store's lock held for these, not for that)."""
    ids = sorted({str(r) for r in run_ids if r})
    if not ids:
        return []
    keys = store.query("SELECT run_id, list(step_key ORDER BY step_key) AS keys FROM steps "
                       "WHERE list_contains(?, run_id) GROUP BY run_id", [ids])
    by_run = dict(zip(keys["run_id"], keys["keys"]))
    metas = store.rows("SELECT run_id, meta_json, scoring_version FROM runs WHERE list_contains(?, run_id)", [ids])
    return [(str(r), mj, str(v), list(by_run.get(r, []))) for r, mj, v in metas]


def settings_from(rows: Sequence[tuple[str, str | None, str, list]]) -> dict[str, RunSettings]:
    """run_id -> its settings, from settings_rows (Results, the series)."""
    return {r: stored_settings(mj, v, keys) for r, mj, v, keys in rows}

def settings_between(a: RunSettings | None, b: RunSettings | None) -> SettingsDiff | None:
    """What differs between two runs' settings (None when either is not known)."""
    return compare_settings(a, b) if a is not None and b is not None else None


def check_comparable(a: RunSteps, b: RunSteps) -> None:
    """LabError when the two runs were scored by different scorers (legacy 386-step vs corrected 303-step)."""
    if (a.scoring_version == LEGACY) != (b.scoring_version == LEGACY):
        legacy, other = (a, b) if a.scoring_version == LEGACY else (b, a)
        raise LabError(f"{legacy.label()} is scored with the legacy 386-step scorer and {other.label()} with the "
                       "corrected 303-step one: their scores are not comparable")


def _needs_replay(run: RunSteps) -> str:
    """Why a run's equiv F1 waits for a replay: none is known, or the one known lacks its steps."""
    if run.missing_from_replay is None:
        return ("equiv F1 needs the replay its steps came from (--replay PATH, LAB_REPLAY, or "
                "`python -m lab data download`)")
    if run.missing_from_replay:
        return (f"equiv F1 needs the screens of {run.missing_from_replay} of its steps, which the loaded replay "
                "does not have (the run was made on another replay: give that one with --replay PATH)")
    return "equiv F1 was computed without the loaded replay and is being filled again with it"


def _equiv_note(run: RunSteps, role: str) -> str:
    if run.equiv_state == "done":
        return ""
    if run.equiv_state == "needs_replay":
        return f"{role}: {_needs_replay(run)}"
    why = {"pending": "equiv F1 is still being filled", "skipped": "some step is past the equiv limits",
           "failed": "equiv F1 failed"}.get(run.equiv_state, f"equiv state {run.equiv_state}")
    return f"{role}: {why}"


def step_values(run: RunSteps, spec: MetricSpec, keys: pd.Index) -> np.ndarray:
    """(steps, answers) values of `keys`: the sampled answers where the run has them, else the step's own."""
    own = run.steps.loc[keys, spec.column].to_numpy(dtype=float)
    if not spec.sampled or run.samples.empty:
        return own[:, None]
    grid = run.samples.pivot_table(index="step_key", columns="sample", values=spec.column, aggfunc="first")
    grid = grid.reindex(keys).to_numpy(dtype=float, copy=True)
    if grid.shape[1] <= 1:
        return own[:, None]
    missing = np.isnan(grid).all(axis=1)
    grid[missing, 0] = own[missing]
    return grid


def paired_metric(a: RunSteps, b: RunSteps, spec: MetricSpec, task_index: dict[str, int],
                  step_keys: Iterable[str] | None = None) -> tuple[PairedMetric | None, str]:
    """The metric of both runs on the steps both have it (within `step_keys` when given), or None and why."""
    if spec.needs == "equiv_done":
        notes = [_equiv_note(a, "baseline"), _equiv_note(b, "candidate")]
        if notes[0] and notes[0].split(": ", 1)[1] == notes[1].split(": ", 1)[-1]:
            notes = [f"both: {notes[0].split(': ', 1)[1]}"]
        note = "; ".join(n for n in notes if n)
        if note:
            return None, note
    cols = [spec.column] + ([spec.weight] if spec.weight else [])
    have = []
    for run in (a, b):
        part = run.steps[cols].dropna()
        if spec.weight:
            part = part[part[spec.weight] > 0]
        have.append(part.index)
    if not len(have[0]) or not len(have[1]):
        lacking = [role for role, keys in zip(("the baseline", "the candidate"), have) if not len(keys)]
        return None, f"not recorded for {' and '.join(lacking)}"
    common = have[0][have[0].isin(have[1])]
    if step_keys is not None:
        common = common[common.isin(pd.Index(list(step_keys)))]
    if not len(common):
        return None, "no step in common"
    task = np.array([task_index[t] for t in a.steps.loc[common, "task_id"]], dtype=np.int64)
    weight = (lambda run: run.steps.loc[common, spec.weight].to_numpy(dtype=float)) if spec.weight else (lambda run: None)
    return PairedMetric(task, step_values(a, spec, common), step_values(b, spec, common), weight(a), weight(b),
                        scale=spec.scale, higher_is_better=not spec.lower_is_better), ""


def compact_tasks(metrics: Sequence[PairedMetric]) -> tuple[list[PairedMetric], int]:
    """The metrics with their tasks renumbered 0 … n−1 over the tasks they hold (a part of the steps, such as a
    bucket or a slice, covers fewer tasks than the runs: the bootstrap draws from those only)."""
    present = np.unique(np.concatenate([m.task for m in metrics])) if metrics else np.array([], dtype=np.int64)
    out = [PairedMetric(np.searchsorted(present, m.task), m.baseline, m.candidate, m.baseline_weight,
                        m.candidate_weight, scale=m.scale, higher_is_better=m.higher_is_better) for m in metrics]
    return out, len(present)


def _finite(value: Any) -> Any:
    """JSON has no NaN: a figure that is not a number is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def task_numbering(*runs: RunSteps) -> dict[str, int]:
    """One task numbering for runs resampled together (so they share the task draws)."""
    tasks = sorted(set().union(*(set(r.steps["task_id"]) for r in runs)))
    return {t: i for i, t in enumerate(tasks)}


@dataclass(frozen=True)
class RunComparison:
    """Baseline vs candidate: each metric's difference (None where it cannot be compared, with the reason)."""

    baseline: RunSteps
    candidate: RunSteps
    differences: dict[str, Difference | None]
    notes: dict[str, str] = field(default_factory=dict)
    settings: SettingsDiff | None = None  # how the two runs' settings differ

    def get(self, metric: str) -> Difference | None:
        return self.differences.get(metric)

    def to_dict(self) -> dict:
        """The JSON shape of `compare --json`: metrics by name, each with delta, ci, counts, steps."""
        metrics = {}
        for name, diff in self.differences.items():
            spec = load_metrics()[name]
            if diff is None:
                metrics[name] = {"label": spec.label, "delta": None, "ci": None, "steps": 0, "note": self.notes.get(name, "")}
            else:
                metrics[name] = {"label": spec.label, **{k: _finite(v) for k, v in diff.to_dict().items()}}
        return {"baseline": {"run_id": self.baseline.run_id, "name": self.baseline.name},
                "candidate": {"run_id": self.candidate.run_id, "name": self.candidate.name},
                "settings": self.settings.to_dict() if self.settings is not None else None,
                "metrics": metrics}


def compare_loaded(a: RunSteps, b: RunSteps, metrics: Sequence[str] | None = None,
                   step_keys: Iterable[str] | None = None, *, resamples: int | None = None,
                   seed: int | None = None) -> RunComparison:
    """Baseline `a` vs candidate `b` on every metric (pairwise intervals, one set of task draws)."""
    check_comparable(a, b)
    specs = [metric_spec(m) for m in (metrics or list(load_metrics()))]
    index = task_numbering(a, b)
    keys = None if step_keys is None else list(step_keys)
    built = {s.name: paired_metric(a, b, s, index, keys) for s in specs}
    ready = [name for name, (m, _) in built.items() if m is not None]
    metrics, n_tasks = compact_tasks([built[n][0] for n in ready])
    diffs = dict(zip(ready, compare_each(metrics, n_tasks, resamples=resamples, seed=seed)))
    return RunComparison(a, b, {s.name: diffs.get(s.name) for s in specs},
                         {name: note for name, (_, note) in built.items() if note},
                         settings_between(a.settings, b.settings))


def compare_runs(store: Store, baseline: str, candidate: str, metrics: Sequence[str] | None = None,
                 step_keys: Iterable[str] | None = None, *, resamples: int | None = None,
                 seed: int | None = None) -> RunComparison:
    """Two stored runs (by run id) compared on their common steps."""
    return compare_loaded(load_run(store, baseline), load_run(store, candidate), metrics, step_keys,
                          resamples=resamples, seed=seed)


@dataclass(frozen=True)
class AgainstBaseline:
    """One run compared with a shared baseline, its interval simultaneous with the others'."""

    run_id: str
    name: str
    difference: Difference | None
    note: str = ""
    settings: SettingsDiff | None = None  # how its settings differ from the baseline's


def compare_against(store: Store, baseline: str, candidates: Sequence[str], metric: str = "score",
                    step_keys: Iterable[str] | None = None, *, resamples: int | None = None,
                    seed: int | None = None) -> list[AgainstBaseline]:
    """One baseline against many runs (a checkpoint series, a Results table): simultaneous 95 % intervals
    (max-T over the comparisons that have enough common steps)."""
    return compare_against_loaded(load_run(store, baseline), [load_run(store, c) for c in candidates], metric,
                                  step_keys, resamples=resamples, seed=seed)


def compare_against_loaded(base: RunSteps, runs: Sequence[RunSteps], metric: str = "score",
                           step_keys: Iterable[str] | None = None, *, resamples: int | None = None,
                           seed: int | None = None) -> list[AgainstBaseline]:
    """compare_against for runs already loaded (load_run)."""
    spec = metric_spec(metric)
    index = task_numbering(base, *runs)
    keys = None if step_keys is None else list(step_keys)
    built = []
    for run in runs:
        try:
            check_comparable(base, run)
        except LabError as exc:
            built.append((None, str(exc)))
            continue
        built.append(paired_metric(base, run, spec, index, keys))
    ready = [i for i, (m, _) in enumerate(built) if m is not None]
    metrics, n_tasks = compact_tasks([built[i][0] for i in ready])
    diffs = dict(zip(ready, compare_many(metrics, n_tasks, resamples=resamples, seed=seed)))
    return [AgainstBaseline(run.run_id, run.name, diffs.get(i), built[i][1], settings_between(base.settings, run.settings))
            for i, run in enumerate(runs)]


def task_breakdown(comparison: RunComparison, metric: str = "score") -> pd.DataFrame:
    """Per task: its common steps, each run's figure on them, and its share of the difference (points;
    the shares add up to the run-level difference), largest share first."""
    spec = metric_spec(metric)
    a, b = comparison.baseline, comparison.candidate
    index = task_numbering(a, b)
    m, _ = paired_metric(a, b, spec, index)
    columns = ["task_id", "steps", "baseline", "candidate", "contribution"]
    if m is None:
        return pd.DataFrame(columns=columns)
    tasks, steps, share = task_contributions(m)
    names = {i: t for t, i in index.items()}
    rows = []
    for t, n, s in zip(tasks, steps, share):
        on = m.task == t
        part = PairedMetric(m.task[on], m.baseline[on], m.candidate[on],
                            None if m.baseline_weight is None else m.baseline_weight[on],
                            None if m.candidate_weight is None else m.candidate_weight[on], scale=m.scale,
                            higher_is_better=m.higher_is_better)
        rows.append((names[int(t)], int(n), round(part.figure("baseline"), spec.digits),
                     round(part.figure("candidate"), spec.digits), round(float(s), spec.digits + 1)))
    df = pd.DataFrame(rows, columns=columns)
    order = df["contribution"].abs().sort_values(ascending=False, kind="stable").index
    return df.loc[order].reset_index(drop=True)


# -- words ---------------------------------------------------------------------------------------
def counted(n: int, noun: str) -> str:
    """"1 task", "14 tasks": a count with its noun, plural unless the count is one."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def points_text(value: float, digits: int = 1) -> str:
    """"2.3 points", "1 point" (digits 0): an amount of score points as shown."""
    shown = f"{value:.{digits}f}"
    return f"{shown} point{'' if shown == '1' else 's'}"


def signed(value: float, digits: int) -> str:
    """+1.23 / −1.23 (a real minus sign), 0.00 without a sign."""
    text = f"{abs(value):.{digits}f}"
    if float(text) == 0:
        return text
    return ("+" if value > 0 else "−") + text


def delta_text(diff: Difference | None, digits: int = 2, note: str = "") -> str:
    """"+0.82 [−1.10, +2.64]"; the difference alone and why when there is no interval."""
    if diff is None:
        return note or "not comparable"
    if diff.low is None or diff.high is None:
        return f"{signed(diff.delta, digits)} ({diff.note})"
    return f"{signed(diff.delta, digits)} [{signed(diff.low, digits)}, {signed(diff.high, digits)}]"


def detectable_unit(spec: MetricSpec) -> tuple[str, int]:
    """How a metric's differences are worded: (unit, decimals) — points for the 0–100 figures."""
    return ("points", 1) if spec.scale == 100 else ("", max(1, spec.digits - 1))


def mde_text(diff: Difference | None, metric: str = "score") -> str:
    """"5.4" (points; the metric's decimals), "" without an interval."""
    if diff is None or diff.mde is None or diff.ci is None:
        return ""
    return f"{diff.mde:.{detectable_unit(metric_spec(metric))[1]}f}"


def verdict_cell(diff: Difference | None) -> str:
    """The verdict of a table cell ("no interval" without one)."""
    return diff.verdict if diff is not None and diff.ci is not None else "no interval"


def verdict_words(diff: Difference | None, metric: str = "score") -> str:
    """The verdict in words a reader without statistics follows: "not distinguishable at 95 %: with these 50
    tasks only differences of about 5.4 points or more are reliably seen"; better / worse as they are."""
    from lab.scoring.paired import TIED
    from lab.scoring.power import detectable_words

    if diff is None or diff.ci is None:
        return "no interval"
    if diff.verdict != TIED or diff.mde is None:
        return diff.verdict
    unit, digits = detectable_unit(metric_spec(metric))
    return f"{diff.verdict}: {detectable_words(diff.mde, diff.tasks, unit, digits)}"


def summary_line(comparison: RunComparison, metric: str = "score") -> str:
    """One line: "score +0.82 [−1.10, +2.64] (95 %, pairwise, 303 common steps of 50 tasks): not
    distinguishable at 95 % · 101 improved, 96 regressed, 106 unchanged"; without an interval "score −7.06 over 2
    common steps of 1 task: no interval (it needs at least 30 common steps) · …"."""
    spec = metric_spec(metric)
    diff = comparison.get(metric)
    if diff is None:
        return f"{metric}: {comparison.notes.get(metric, 'not comparable')}"
    where = f"{counted(diff.steps, 'common step')} of {counted(diff.tasks, 'task')}"
    changes = f"{diff.improved} improved, {diff.regressed} regressed, {diff.unchanged} unchanged"
    sampled = ", samples resampled too" if diff.two_level else ""
    if diff.ci is None:
        return f"{metric} {signed(diff.delta, spec.digits)} over {where}{sampled}: {no_interval_words(diff)} · {changes}"
    level = f"{diff.confidence:.0%}".replace("%", " %")
    return (f"{metric} {delta_text(diff, spec.digits)} ({level}, {diff.adjustment}, {where}{sampled}): "
            f"{verdict_words(diff, metric)} · {changes}")


def no_interval_words(diff: Difference) -> str:
    """Why `diff` has no interval, in words that do not repeat its counts: "no interval (it needs at least 30
    common steps)"."""
    need = load_settings()
    if diff.steps < need.min_common_steps:
        return f"no interval (it needs at least {need.min_common_steps} common steps)"
    if diff.tasks < need.min_common_tasks:
        return f"no interval (it needs at least {need.min_common_tasks} tasks)"
    return diff.note or "no interval"


def resample_setting(value: int | None) -> int:
    """A caller's resample count, checked against the settings (LabError with the allowed range)."""
    settings = load_settings()
    if value is None:
        return settings.resamples
    if not 100 <= int(value) <= settings.max_resamples:
        raise LabError(f"--resamples {value}: use 100 to {settings.max_resamples}")
    return int(value)
