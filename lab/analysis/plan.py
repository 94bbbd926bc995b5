"""How big a difference could this pair of runs see with more answers per step or more tasks? The planner behind
`python -m lab plan BASELINE CANDIDATE`.

It compares the runs as `compare` does (lab.analysis.run_pairs, the pairwise interval and its MDE), then splits the
paired difference's variance into between tasks, between the steps of a task and between the answers of a step
(lab.scoring.power.split_variance, on each step's difference linearised for a ratio metric; the answers' spread
is each run's pooled within-step variance, known only for runs replayed with `--samples`). The detectable
difference of an alternative design is the comparison's own MDE scaled by the square root of the variance
ratio and by the critical value for its number of tasks: the row "as now" is exactly `compare`'s figure.

Runs with one answer per step carry the noise of sampling, if any, inside the between-steps part: the planner
then gives a range for more answers, from "nothing gained" (answers that repeat, as at temperature 0) to "all of
the between-steps part was sampling noise", and says how to measure it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from lab.errors import LabError
from lab.scoring.paired import Difference, PairedMetric, expanded_alpha, load_settings
from lab.scoring.power import VarianceParts, critical_value, split_variance, z_power
from lab.analysis.run_pairs import RunSteps, compare_loaded, metric_spec, paired_metric, task_numbering
from lab.analysis.interval_hint import hint_for

ANSWERS = (1, 2, 4, 8)
TASK_FACTORS = (2, 4)
LITTLE = 0.10  # a part under this share of the variance: more of what shrinks it buys little


@dataclass(frozen=True)
class Row:
    """One design: its label and its MDE (a range `low`–`mde` where the answers' spread is not known)."""

    label: str
    mde: float
    low: float | None = None


@dataclass(frozen=True)
class Plan:
    metric: str
    baseline: str
    candidate: str
    difference: Difference
    parts: VarianceParts
    rows: list[Row]
    advice: list[str] = field(default_factory=list)

    @property
    def shares(self) -> dict[str, float]:
        return self.parts.shares()

    @property
    def dominant(self) -> str:
        shares = self.shares
        return max(shares, key=shares.get)


def _linearised(metric: PairedMetric) -> np.ndarray:
    """Each step's contribution to candidate − baseline (scale × (value − figure × weight) / mean weight)."""
    out = np.zeros(metric.steps)
    for side, sign in (("baseline", -1.0), ("candidate", 1.0)):
        value, weight = metric.step_means(side), metric.weight(side)
        mean_w = weight.mean()
        ratio = value.sum() / weight.sum()
        out += sign * metric.scale * (value - ratio * weight) / mean_w
    return out


def _answer_spread(metric: PairedMetric, side: str) -> tuple[float | None, np.ndarray]:
    """(one answer's pooled within-step variance in the metric's units², None without several answers per step;
    the answers each step has)."""
    grid = getattr(metric, side)
    counts = (~np.isnan(grid)).sum(axis=1).astype(float)
    several = counts >= 2
    if grid.shape[1] < 2 or not several.any():
        return None, counts
    with np.errstate(invalid="ignore"):
        var = np.nanvar(grid[several], axis=1, ddof=1)
    pooled = float(((counts[several] - 1) * var).sum() / (counts[several] - 1).sum())
    return pooled * (metric.scale / metric.weight(side).mean()) ** 2, counts


def _parts(metric: PairedMetric) -> VarianceParts:
    diff = _linearised(metric)
    spreads = [_answer_spread(metric, side) for side in ("baseline", "candidate")]
    if all(s is None for s, _ in spreads):
        return split_variance(metric.task, diff)
    per_answer = sum(s or 0.0 for s, _ in spreads)
    now = sum((s or 0.0) / k for s, k in spreads)                  # each step's sampling variance now
    answers = np.where(now > 0, per_answer / np.where(now > 0, now, 1.0), 1.0)
    return split_variance(metric.task, diff, np.full(metric.steps, per_answer), answers)


def _scaled(mde: float, parts: VarianceParts, critical_now: float, n_eff: float, factor: float = 1.0,
            answers: float | None = None, moved: bool = False) -> float:
    """The MDE of another design: `mde` × √(variance ratio) × (c + z)/(c_now + z). `moved`: count the
    between-steps part as answers' noise (the optimistic end when the answers' spread is not known)."""
    base = parts.variance()
    if base <= 0:
        return 0.0
    other = parts
    if moved:
        other = VarianceParts(parts.task, 0.0, parts.step, True, 1.0, parts.steps, parts.tasks, parts.size_square_sum)
    crit = critical_value(expanded_alpha(load_settings().confidence, n_eff * factor))
    return mde * math.sqrt(other.variance(factor, answers) / base) * (crit + z_power()) / (critical_now + z_power())


def plan_pair(a: RunSteps, b: RunSteps, metric: str = "score", *, resamples: int | None = None,
              seed: int | None = None) -> Plan:
    """The plan for baseline `a` and candidate `b` on `metric` (LabError when they have no interval)."""
    spec = metric_spec(metric)
    comparison = compare_loaded(a, b, [metric], resamples=resamples, seed=seed)
    diff = comparison.get(metric)
    if diff is None or diff.ci is None or diff.mde is None:
        why = comparison.notes.get(metric) if diff is None else diff.note
        hint = hint_for(diff)
        raise LabError(f"no plan for {metric}: {why or 'not comparable'}" + (f"; {hint}" if hint else ""))
    pm, _ = paired_metric(a, b, spec, task_numbering(a, b))
    parts = _parts(pm)
    n_eff = pm.effective_tasks
    crit_now = critical_value(expanded_alpha(load_settings().confidence, n_eff))
    rows = [Row(f"as now ({parts.tasks} tasks, {parts.answers:g} answer{'s' if parts.answers != 1 else ''} per step)",
                diff.mde)]
    for k in ANSWERS:
        label = f"{k} answer{'s' if k != 1 else ''} per step"
        if parts.answers_known:
            rows.append(Row(label, _scaled(diff.mde, parts, crit_now, n_eff, answers=k)))
        else:  # from "answers repeat" (nothing gained) to "the steps' spread was all sampling noise"
            rows.append(Row(label, diff.mde, _scaled(diff.mde, parts, crit_now, n_eff, answers=k, moved=True)))
    for f in TASK_FACTORS:
        rows.append(Row(f"{f}× the tasks ({f * parts.tasks})", _scaled(diff.mde, parts, crit_now, n_eff, factor=f)))
    plan = Plan(metric, a.label(), b.label(), diff, parts, rows)
    plan.advice.extend(_advice(plan))
    return plan


def _advice(plan: Plan) -> list[str]:
    shares, parts = plan.shares, plan.parts
    out = [f"most of the variance is {plan.dominant} ({shares[plan.dominant]:.0%})"]
    if not parts.answers_known:
        out.append("these runs have one answer per step, so the noise of sampling cannot be told apart from the "
                   "steps' own differences: at temperature 0 repeated answers are the same and more answers per step "
                   "buy nothing; replay both with --samples 4 to measure it")
    elif shares["between answers of a step"] < LITTLE:
        out.append(f"only {shares['between answers of a step']:.0%} of it is between the answers of a step: more "
                   "answers per step buy almost nothing")
    if shares["between tasks"] >= 0.5:
        out.append("only more tasks shrink the between-tasks part: TB2-lite has 50, so that means a larger replay")
    return out
