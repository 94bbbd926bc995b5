"""Is B really better than A? The paired difference of a run-level metric over the steps two runs share,
with a bootstrap interval that resamples tasks.

TB2-lite's 303 steps come from 50 tasks, and the steps of one task rise and fall together, so each
bootstrap resample draws tasks with replacement and keeps all their steps (a cluster bootstrap); both
runs get the same draws (paired). Where a run has several sampled answers per step (`replay --samples N`),
each drawn step's answers are resampled too (two levels), so sampling noise widens the interval.

A metric is a ratio of sums, `scale × Σ value / Σ weight`, per run: the weight is 1 per step for the
means (score = 100 × mean command F1, first-command exact, valid JSON, equiv F1) and the reference's
token count for the reference NLL per token (total NLL / total tokens).

The interval is the *expanded percentile* interval (Hesterberg 2015, "What teachers should know about
the bootstrap", §5): the percentiles at α′/2 and 1 − α′/2 where Φ⁻¹(1 − α′/2) = √(n/(n−1)) · t₍ₙ₋₁₎(1 − α/2),
n being the effective number of tasks (Σ wₜ)² / Σ wₜ² (Kish; wₜ a task's steps, or tokens for the NLL), which
is the number of tasks when they are of one size and fewer when their sizes differ. The plain percentile
interval is too narrow for few, uneven clusters: about 6 % of the 95 % intervals of null pairs shaped like
TB2-lite exclude 0, the expanded ones at most 5 % (bench/bench_paired.py). α′ is 0.042 for 50 tasks of
one size and 0.0487 for 303 tasks of one step each.

One run against many (a checkpoint series, a baseline against every run) gets simultaneous intervals:
max-T over the bootstrap (the same draws for every comparison): d_j ± c·se_j, c the 1 − α′ quantile of
max_j |d*_j − d_j| / se_j, so all k intervals hold together with 95 % confidence, and picking the best of
k cannot manufacture a difference.

Pure numpy (scipy only for the t quantile); deterministic for a seed; vectorised: one comparison of 303 steps
× 10,000 resamples takes about 0.16 s (the benchmark bench/bench_paired.py; its figure, a median of 20, is in
bench/results/bench_paired.json).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np
import yaml

SETTINGS_PATH = Path(__file__).with_name("paired.yaml")
BETTER, WORSE, TIED, NO_INTERVAL = "better", "worse", "not distinguishable at 95 %", "no interval"
PAIRWISE = "pairwise"


@dataclass(frozen=True)
class BootstrapSettings:
    """The comparison's settings (lab/scoring/paired.yaml)."""

    resamples: int
    max_resamples: int
    confidence: float
    seed: int
    min_common_steps: int
    min_common_tasks: int
    chunk_values: int
    unchanged_tolerance: float


@lru_cache(maxsize=4)
def load_settings(path: Path = SETTINGS_PATH) -> BootstrapSettings:
    """The settings file's values."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return BootstrapSettings(
        resamples=int(raw["resamples"]), max_resamples=int(raw["max_resamples"]),
        confidence=float(raw["confidence"]), seed=int(raw["seed"]),
        min_common_steps=int(raw["min_common_steps"]), min_common_tasks=int(raw["min_common_tasks"]),
        chunk_values=int(raw["chunk_values"]), unchanged_tolerance=float(raw["unchanged_tolerance"]),
    )


@dataclass(frozen=True)
class PairedMetric:
    """One metric of two runs on their common steps, aligned row by row.

    `task`: each step's task index, 0 … n_tasks − 1 (one numbering for every comparison resampled
    together). `baseline` / `candidate`: each step's value, one column per sampled answer (NaN pads a
    step with fewer answers; every step has at least one). `*_weight`: each step's weight (the reference's
    tokens for a per-token NLL; None: 1 per step). The run-level figure is scale × Σ value / Σ weight, a
    step's value being the mean of its answers.
    """

    task: np.ndarray
    baseline: np.ndarray
    candidate: np.ndarray
    baseline_weight: np.ndarray | None = None
    candidate_weight: np.ndarray | None = None
    scale: float = 100.0
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        task = np.asarray(self.task, dtype=np.int64).ravel()
        object.__setattr__(self, "task", task)
        for side in ("baseline", "candidate"):
            values = np.asarray(getattr(self, side), dtype=float)
            values = values.reshape(len(values), -1) if values.ndim <= 2 else values
            if values.ndim != 2 or len(values) != len(task):
                raise ValueError(f"{side}: one row per step expected ({len(task)} steps), got shape {values.shape}")
            if len(task) and (~np.isnan(values)).sum(axis=1).min() == 0:
                raise ValueError(f"{side}: every step needs at least one value")
            object.__setattr__(self, side, values)
            weight = getattr(self, f"{side}_weight")
            if weight is not None:
                weight = np.asarray(weight, dtype=float).ravel()
                if len(weight) != len(task) or (weight < 0).any():
                    raise ValueError(f"{side}_weight: one non-negative weight per step expected")
                object.__setattr__(self, f"{side}_weight", weight)
        if len(task) and task.min() < 0:
            raise ValueError("task indices must be ≥ 0")

    @property
    def steps(self) -> int:
        return len(self.task)

    @property
    def tasks(self) -> int:
        return len(np.unique(self.task))

    @property
    def effective_tasks(self) -> float:
        """(Σ wₜ)² / Σ wₜ² over tasks, wₜ a task's weight (both runs): the tasks' number when all weigh the same."""
        weight = np.bincount(self.task, weights=self.weight("baseline") + self.weight("candidate"))
        weight = weight[weight > 0]
        return float(weight.sum() ** 2 / (weight ** 2).sum()) if len(weight) else 0.0

    @property
    def sampled(self) -> bool:
        return self.baseline.shape[1] > 1 or self.candidate.shape[1] > 1

    def step_means(self, side: str) -> np.ndarray:
        values = getattr(self, side)
        return values[:, 0] if values.shape[1] == 1 else np.nanmean(values, axis=1)

    def weight(self, side: str) -> np.ndarray:
        weight = getattr(self, f"{side}_weight")
        return np.ones(self.steps) if weight is None else weight

    def figure(self, side: str) -> float:
        """The run-level figure of one side over these steps (NaN when its weights sum to 0)."""
        total = self.weight(side).sum()
        return float(self.scale * self.step_means(side).sum() / total) if total > 0 else math.nan


@dataclass(frozen=True)
class Difference:
    """candidate − baseline of one metric over the common steps, with its interval (None: see `note`)."""

    baseline: float
    candidate: float
    delta: float
    low: float | None
    high: float | None
    steps: int
    tasks: int
    improved: int
    regressed: int
    unchanged: int
    verdict: str
    note: str
    confidence: float
    resamples: int
    seed: int
    adjustment: str  # "pairwise" | "simultaneous over k comparisons (max-T)"
    two_level: bool  # samples were resampled within steps too
    higher_is_better: bool = True
    mde: float | None = None  # the smallest true difference this interval finds 80 % of the time (lab.scoring.power)

    @property
    def ci(self) -> list[float] | None:
        return None if self.low is None or self.high is None else [self.low, self.high]

    def worse_by_more_than(self, points: float) -> bool:
        """True when the candidate is worse than the baseline by more than `points` with the interval's
        confidence: the interval lies entirely beyond −points (+points for a metric where lower is better)."""
        if self.low is None or self.high is None:
            return False
        return self.high < -points if self.higher_is_better else self.low > points

    def to_dict(self) -> dict:
        out = asdict(self)
        out["ci"] = self.ci
        return out


# -- draws ---------------------------------------------------------------------------------------
def task_draws(seed: int, resamples: int, n_tasks: int) -> np.ndarray:
    """(resamples, n_tasks) task indices drawn with replacement: resample r keeps the steps of tasks
    draws[r] (a task drawn twice counts twice). The first draws of `np.random.default_rng(seed)`."""
    return np.random.default_rng(seed).integers(0, n_tasks, size=(resamples, n_tasks))


def task_counts(draws: np.ndarray, n_tasks: int) -> np.ndarray:
    """How often each task is drawn in each resample: (resamples, n_tasks)."""
    rows = draws.shape[0]
    flat = (draws + (np.arange(rows, dtype=np.int64) * n_tasks)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * n_tasks).reshape(rows, n_tasks)


def sample_rng(seed: int) -> np.random.Generator:
    """The generator of the within-step draws (apart from the task draws, so one-level results never
    depend on whether a run has samples)."""
    return np.random.default_rng([seed, 1])


def expanded_alpha(confidence: float, n_tasks: float) -> float:
    """α′ of the expanded percentile interval for n (effective) tasks (see the module's docstring)."""
    from scipy.special import ndtr, stdtrit

    alpha = 1.0 - confidence
    if n_tasks <= 1.5:
        return alpha
    z = math.sqrt(n_tasks / (n_tasks - 1)) * float(stdtrit(n_tasks - 1, 1.0 - alpha / 2))
    return float(2.0 * (1.0 - ndtr(z)))


# -- replicates ----------------------------------------------------------------------------------
def _two_level_sums(values: np.ndarray, task: np.ndarray, draws: np.ndarray, rng: np.random.Generator,
                    chunk_values: int) -> np.ndarray:
    """Per resample: the sum over the drawn tasks' steps of the mean of each step's answers resampled
    with replacement (as many as the step has), fresh for every drawn copy of a task. The answers are
    drawn resample by resample, task by task in the order drawn, step by step in the steps' order."""
    n_resamples, n_tasks = draws.shape
    order = np.argsort(task, kind="stable")                  # steps grouped by task
    per_task = np.bincount(task, minlength=n_tasks)
    starts = np.concatenate([[0], np.cumsum(per_task)[:-1]])
    counts = (~np.isnan(values)).sum(axis=1)
    width = values.shape[1]
    every_step_full = bool((counts == width).all())
    packed = np.where(np.isnan(values), 0.0, values).ravel()
    chunk = max(1, chunk_values // max(len(task) * width, 1))
    out = np.zeros(n_resamples)
    for first in range(0, n_resamples, chunk):
        drawn = draws[first:first + chunk].ravel()           # the drawn tasks, resample by resample
        lens = per_task[drawn]
        total = int(lens.sum())
        within = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
        step = order[np.repeat(starts[drawn], lens) + within]
        owner = np.repeat(np.repeat(np.arange(len(drawn) // n_tasks), n_tasks), lens)
        k = counts[step]
        pick = (rng.random((total, width)) * k[:, None]).astype(np.int32)  # 0 … k−1
        pick += (step * width).astype(np.int32)[:, None]
        answers = np.take(packed, pick)
        if every_step_full:  # the usual case: every step has all its answers
            inner = answers.mean(axis=1)
        else:
            inner = np.where(np.arange(width) < k[:, None], answers, 0.0).sum(axis=1) / k
        out[first:first + len(drawn) // n_tasks] = np.bincount(owner, weights=inner, minlength=len(drawn) // n_tasks)
    return out


def replicates(metrics: Sequence[PairedMetric], n_tasks: int, resamples: int, seed: int,
               chunk_values: int | None = None) -> np.ndarray:
    """(resamples, k) bootstrap values of each metric's difference, all from the same task draws."""
    chunk_values = chunk_values or load_settings().chunk_values
    draws = task_draws(seed, resamples, n_tasks)
    counts = task_counts(draws, n_tasks).astype(float)
    inner_rng = sample_rng(seed)
    sums = []  # per metric: task sums of baseline value, baseline weight, candidate value, candidate weight
    for m in metrics:
        for side in ("baseline", "candidate"):
            sums.append(np.bincount(m.task, weights=m.step_means(side), minlength=n_tasks))
            sums.append(np.bincount(m.task, weights=m.weight(side), minlength=n_tasks))
    totals = counts @ np.column_stack(sums) if sums else np.empty((resamples, 0))
    out = np.empty((resamples, len(metrics)))
    with np.errstate(invalid="ignore", divide="ignore"):
        for j, m in enumerate(metrics):
            base_sum, base_w, cand_sum, cand_w = (totals[:, 4 * j + i] for i in range(4))
            if m.baseline.shape[1] > 1:
                base_sum = _two_level_sums(m.baseline, m.task, draws, inner_rng, chunk_values)
            if m.candidate.shape[1] > 1:
                cand_sum = _two_level_sums(m.candidate, m.task, draws, inner_rng, chunk_values)
            out[:, j] = m.scale * (cand_sum / cand_w - base_sum / base_w)
    return out


# -- results -------------------------------------------------------------------------------------
def step_changes(metric: PairedMetric, tolerance: float | None = None) -> tuple[int, int, int]:
    """Steps improved, regressed and unchanged (a step's value per weight, the better direction)."""
    tolerance = load_settings().unchanged_tolerance if tolerance is None else tolerance
    with np.errstate(invalid="ignore", divide="ignore"):
        base = metric.step_means("baseline") / np.where(metric.weight("baseline") > 0, metric.weight("baseline"), np.nan)
        cand = metric.step_means("candidate") / np.where(metric.weight("candidate") > 0, metric.weight("candidate"), np.nan)
    diff = (cand - base) * (1 if metric.higher_is_better else -1)
    diff = diff[~np.isnan(diff)]
    improved, regressed = int((diff > tolerance).sum()), int((diff < -tolerance).sum())
    return improved, regressed, int(len(diff) - improved - regressed)


def task_contributions(metric: PairedMetric) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(task indices, steps of each, each task's share of the difference in points): the shares add up to
    the difference, so the largest say which tasks carry it."""
    tasks, steps = np.unique(metric.task, return_counts=True)
    parts = []
    for side in ("baseline", "candidate"):
        total = metric.weight(side).sum()
        by_task = np.bincount(metric.task, weights=metric.step_means(side), minlength=int(tasks.max()) + 1)[tasks]
        parts.append(metric.scale * by_task / total if total > 0 else np.full(len(tasks), math.nan))
    return tasks, steps, parts[1] - parts[0]


def verdict_of(low: float | None, high: float | None, higher_is_better: bool) -> str:
    """better / worse / not distinguishable at 95 %, from the interval of candidate − baseline."""
    if low is None or high is None:
        return NO_INTERVAL
    if low > 0:
        return BETTER if higher_is_better else WORSE
    if high < 0:
        return WORSE if higher_is_better else BETTER
    return TIED


@dataclass(frozen=True)
class Summary:
    """What a difference reports besides its interval: both runs' figures on the common steps, the steps and
    tasks they cover (and the effective tasks, lab.scoring.paired's n), how the steps moved."""

    baseline: float
    candidate: float
    steps: int
    tasks: int
    effective_tasks: float
    improved: int
    regressed: int
    unchanged: int
    sampled: bool = False
    higher_is_better: bool = True


def summarize(metric: PairedMetric, tolerance: float | None = None) -> Summary:
    """The Summary of one PairedMetric."""
    improved, regressed, unchanged = step_changes(metric, tolerance)
    return Summary(metric.figure("baseline"), metric.figure("candidate"), metric.steps, metric.tasks,
                   metric.effective_tasks, improved, regressed, unchanged, metric.sampled, metric.higher_is_better)


def too_few(summary: Summary, settings: BootstrapSettings) -> str:
    """Why the steps are too few for an interval ("" when they are enough)."""
    if summary.steps < settings.min_common_steps:
        return f"fewer than {settings.min_common_steps} common steps ({summary.steps}): no interval"
    if summary.tasks < settings.min_common_tasks:
        return f"fewer than {settings.min_common_tasks} common tasks ({summary.tasks}): no interval"
    if math.isnan(summary.baseline) or math.isnan(summary.candidate):
        return "no weight on the common steps: no interval"
    return ""


def _settings(resamples: int | None, seed: int | None, settings: BootstrapSettings | None
              ) -> tuple[BootstrapSettings, int, int]:
    settings = settings or load_settings()
    resamples = settings.resamples if resamples is None else int(resamples)
    if not 100 <= resamples <= settings.max_resamples:
        raise ValueError(f"resamples must be between 100 and {settings.max_resamples} (got {resamples})")
    return settings, resamples, settings.seed if seed is None else int(seed)


def _difference(summary: Summary, low: float | None, high: float | None, note: str, settings: BootstrapSettings,
                resamples: int, seed: int, adjustment: str, mde: float | None = None) -> Difference:
    return Difference(
        baseline=summary.baseline, candidate=summary.candidate, delta=summary.candidate - summary.baseline, low=low,
        high=high, steps=summary.steps, tasks=summary.tasks, improved=summary.improved, regressed=summary.regressed,
        unchanged=summary.unchanged, verdict=verdict_of(low, high, summary.higher_is_better), note=note,
        confidence=settings.confidence, resamples=resamples, seed=seed, adjustment=adjustment,
        two_level=summary.sampled, higher_is_better=summary.higher_is_better, mde=mde,
    )


def _n_tasks(metrics: Sequence[PairedMetric], n_tasks: int | None) -> int:
    return n_tasks if n_tasks is not None else max((int(m.task.max()) + 1 for m in metrics if m.steps), default=0)


def pairwise_differences(summaries: Sequence[Summary], reps: np.ndarray | None, settings: BootstrapSettings,
                         resamples: int, seed: int) -> list[Difference]:
    """Each comparison's own (pairwise) expanded percentile interval and MDE from its column of `reps`, the
    replicates of the comparisons too_few leaves usable, in order."""
    from lab.scoring.power import critical_value, detectable

    out, j = [], 0
    for s in summaries:
        note = too_few(s, settings)
        if note:
            out.append(_difference(s, None, None, note, settings, resamples, seed, PAIRWISE))
            continue
        alpha = expanded_alpha(settings.confidence, s.effective_tasks)
        column = reps[:, j]
        low, high = (float(v) for v in np.nanquantile(column, [alpha / 2, 1 - alpha / 2]))
        mde = detectable(float(np.nanstd(column, ddof=1)), critical_value(alpha))
        out.append(_difference(s, low, high, "", settings, resamples, seed, PAIRWISE, mde))
        j += 1
    return out


def simultaneous_differences(summaries: Sequence[Summary], reps: np.ndarray | None, settings: BootstrapSettings,
                             resamples: int, seed: int, chunk: int = 256) -> list[Difference]:
    """Simultaneous intervals (max-T over the columns of `reps`, the usable comparisons' replicates in order)
    and each one's MDE at the simultaneous critical value. Comparisons too_few refuses get no interval and do
    not count in k. A family of one (the others without an interval) is one comparison: its pairwise interval,
    the one `compare` gives that pair, not a max-T interval over one column. Columns are read `chunk` at a time
    (a baseline against a thousand runs stays small)."""
    from lab.scoring.power import detectable

    notes = [too_few(s, settings) for s in summaries]
    usable = [s for s, note in zip(summaries, notes) if not note]
    if len(usable) <= 1:
        return pairwise_differences(summaries, reps, settings, resamples, seed)
    point = np.array([s.candidate - s.baseline for s in usable])
    se = np.empty(len(usable))
    worst = np.full(reps.shape[0], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        for first in range(0, len(usable), chunk):
            block = reps[:, first:first + chunk]
            part = np.nanstd(block, axis=0, ddof=1) if np.isnan(block).any() else np.std(block, axis=0, ddof=1)
            se[first:first + chunk] = part
            z = np.where(part > 0, np.abs(block - point[first:first + chunk]) / np.where(part > 0, part, 1.0), 0.0)
            np.fmax(worst, np.nanmax(z, axis=1), out=worst)
    alpha = expanded_alpha(settings.confidence, min(s.effective_tasks for s in usable))
    crit = float(np.nanquantile(worst, 1 - alpha))
    label = simultaneous_label(len(usable))
    out, j = [], 0
    for s, note in zip(summaries, notes):
        if note:
            out.append(_difference(s, None, None, note, settings, resamples, seed, label))
            continue
        half = crit * float(se[j])
        out.append(_difference(s, float(point[j] - half), float(point[j] + half), "", settings, resamples, seed, label,
                               detectable(float(se[j]), crit)))
        j += 1
    return out


def _usable_replicates(metrics: Sequence[PairedMetric], summaries: Sequence[Summary], n_tasks: int,
                       settings: BootstrapSettings, resamples: int, seed: int) -> np.ndarray | None:
    usable = [m for m, s in zip(metrics, summaries) if not too_few(s, settings)]
    return replicates(usable, n_tasks, resamples, seed, settings.chunk_values) if usable else None


def compare_each(metrics: Sequence[PairedMetric], n_tasks: int | None = None, *, resamples: int | None = None,
                 seed: int | None = None, settings: BootstrapSettings | None = None) -> list[Difference]:
    """Each metric's difference with its own (pairwise) 95 % interval; one set of task draws for all, so
    the metrics of one pair of runs are resampled together."""
    settings, resamples, seed = _settings(resamples, seed, settings)
    summaries = [summarize(m, settings.unchanged_tolerance) for m in metrics]
    reps = _usable_replicates(metrics, summaries, _n_tasks(metrics, n_tasks), settings, resamples, seed)
    return pairwise_differences(summaries, reps, settings, resamples, seed)


def compare(metric: PairedMetric, n_tasks: int | None = None, *, resamples: int | None = None, seed: int | None = None,
            settings: BootstrapSettings | None = None) -> Difference:
    """One metric's difference, candidate − baseline, with its 95 % interval over task resamples."""
    return compare_each([metric], n_tasks, resamples=resamples, seed=seed, settings=settings)[0]


def simultaneous_label(k: int) -> str:
    return f"simultaneous over {k} comparisons (max-T)"


def compare_many(metrics: Sequence[PairedMetric], n_tasks: int | None = None, *, resamples: int | None = None,
                 seed: int | None = None, settings: BootstrapSettings | None = None) -> list[Difference]:
    """One run against many (each metric a comparison with the same baseline, or neighbours of a
    ranking): simultaneous 95 % intervals by max-T over one set of task draws, so that all of them
    hold together. Comparisons with too few steps get no interval and do not count in k."""
    settings, resamples, seed = _settings(resamples, seed, settings)
    summaries = [summarize(m, settings.unchanged_tolerance) for m in metrics]
    reps = _usable_replicates(metrics, summaries, _n_tasks(metrics, n_tasks), settings, resamples, seed)
    return simultaneous_differences(summaries, reps, settings, resamples, seed)
