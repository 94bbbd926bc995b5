"""When a race may stop replaying a checkpoint: group-sequential tests of paired, task-clustered differences.

A race (`python -m lab sweep --race`) replays a series in rounds of whole tasks and, after each round,
drops every checkpoint that is worse than the current leader with 95 % confidence. Looking after every
round is looking many times, so each look gets only part of the error:

**Method: alpha spending over the rounds (Lan & DeMets 1983), with exact group-sequential boundaries,
Bonferroni over the pairs of checkpoints, and a small-sample t calibration.**

- Pairs. Every elimination compares two checkpoints on the steps both answered, task-clustered as the lab's
  other intervals are (lab.scoring.paired): the difference of two ratios of sums, 100 × Σ(a − b) / Σ steps,
  with the linearised (delta-method) standard error over tasks, se² = n/(n−1) · Σₜ (dₜ − nₜ·D)² / N², dₜ a
  task's summed difference, nₜ its steps, N = Σ nₜ. The family is every pair of the series' k checkpoints,
  P = k(k−1)/2, each tested at α/P (Bonferroni). The leader is chosen from the data, so comparing it with
  the others is not a family of k − 1 fixed comparisons: under a series of equal checkpoints "the leader is
  ahead of some checkpoint" is "some pair differs", and only the family of all pairs bounds it.
- Rounds. The planned rounds fix, before anything runs, the share of the series' steps seen at each look
  (its information fraction tᵣ). A spending function α(t) says how much of a pair's error may be used by
  tᵣ; the boundaries cᵣ are the exact group-sequential ones: the first passage of a Brownian motion observed
  at t₁ … t_R past ±cᵣ·√tᵣ has probability α(tᵣ) − α(tᵣ₋₁) at look r (Armitage, McPherson & Rowe 1969's
  recursive integration, as Jennison & Turnbull 2000, ch. 19, compute it). The cumulative paired difference
  of independently drawn tasks is such a process asymptotically, so each pair's sequence of tests keeps its
  α/P over all the rounds together; a race that ends early (one checkpoint left, a budget) spends less.
- Small samples. Each boundary is turned into its nominal two-sided level pᵣ = 2(1 − Φ(cᵣ)) and applied to
  the paired statistic with a t quantile of n_eff − 1 degrees of freedom (n_eff: Kish's effective number of
  tasks, (Σ nₜ)² / Σ nₜ², as lab.scoring.paired's expanded intervals use), which keeps a look after few,
  uneven tasks from being over-confident. No checkpoint is dropped before `min_tasks` tasks, and the rounds
  before are no looks: the error they would have spent goes to the first look.

Why spending and not an anytime-valid confidence sequence: the horizon is known (the replay's tasks), and
spending uses it — a confidence sequence pays at every look for a future the race never has, so its
intervals at 30–50 tasks are wider. The Pocock-type spending α·ln(1 + (e − 1)t) (Lan & DeMets 1983) spends
early, where a race saves steps; bench/bench_race.py compares it with O'Brien–Fleming-type spending and
measures the error rate on series of equal checkpoints shaped like TB2-lite (`lab/scoring/race.yaml` holds
the choice).

References: K. K. G. Lan and D. L. DeMets, "Discrete sequential boundaries for clinical trials",
Biometrika 70 (1983); C. Jennison and B. W. Turnbull, *Group Sequential Methods with Applications to Clinical
Trials* (2000), ch. 7 and 19; P. Armitage, C. K. McPherson and B. C. Rowe, "Repeated significance tests on
accumulating data", JRSS A 132 (1969); L. Kish, *Survey Sampling* (1965).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import yaml

SETTINGS_PATH = Path(__file__).with_name("race.yaml")
EDGE_SD = 9.0  # the continuation region of a look without a boundary spans ±EDGE_SD standard deviations


@dataclass(frozen=True)
class RaceSettings:
    """The race's settings (lab/scoring/race.yaml)."""

    confidence: float
    spending: str
    round_tasks: int
    min_tasks: int
    grid_points: int

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence


@lru_cache(maxsize=4)
def load_race_settings(path: Path = SETTINGS_PATH) -> RaceSettings:
    """The settings file's values; an unknown spending function is a ValueError naming the known ones."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    settings = RaceSettings(confidence=float(raw["confidence"]), spending=str(raw["spending"]),
                            round_tasks=int(raw["round_tasks"]), min_tasks=int(raw["min_tasks"]),
                            grid_points=int(raw["grid_points"]))
    if settings.spending not in SPENDING:
        raise ValueError(f"{path}: spending '{settings.spending}' is not one of {', '.join(SPENDING)}")
    return settings


def _obrien_fleming(t: float, alpha: float) -> float:
    from scipy.special import ndtr, ndtri

    return 0.0 if t <= 0 else float(2.0 * (1.0 - ndtr(ndtri(1.0 - alpha / 2.0) / math.sqrt(t))))


SPENDING: dict[str, Callable[[float, float], float]] = {
    "pocock": lambda t, alpha: alpha * math.log(1.0 + (math.e - 1.0) * t) if t > 0 else 0.0,
    "obrien-fleming": _obrien_fleming,
    "linear": lambda t, alpha: alpha * t if t > 0 else 0.0,
}


def spent(spending: str, t: float, alpha: float) -> float:
    """α(t): the error a spending function allows by information fraction t (0 … 1)."""
    return SPENDING[spending](min(max(t, 0.0), 1.0), alpha)


def _boundary(exit_mass: Callable[[float], float], target: float) -> float:
    """The z boundary whose exit probability is `target` (inf when the target is beyond numerical reach)."""
    from scipy.optimize import brentq

    if target <= 1e-15:
        return math.inf
    low, high = 1e-6, 40.0
    if exit_mass(low) <= target:  # cannot happen for a level below the mass still in play
        return low
    return float(brentq(lambda c: exit_mass(c) - target, low, high, xtol=1e-9))


def look_levels(fractions: Sequence[float], alpha: float, spending: str, grid_points: int = 401) -> np.ndarray:
    """Each look's nominal two-sided level: the exact group-sequential boundaries of `spending` at the
    information fractions `fractions` (increasing, in (0, 1]) for a two-sided test of overall level `alpha`,
    each as 2(1 − Φ(c)). A look given no error (tiny increments) gets level 0."""
    from scipy.special import ndtr

    t = np.asarray(fractions, dtype=float)
    if t.ndim != 1 or not len(t) or (t <= 0).any() or (t > 1 + 1e-12).any() or (np.diff(t) <= 0).any():
        raise ValueError(f"information fractions must increase within (0, 1], got {list(fractions)}")
    levels = np.zeros(len(t))
    grid = density = None
    previous = 0.0
    for r, (tr, cumulative) in enumerate(zip(t, (spent(spending, x, alpha) for x in t))):
        target = cumulative - spent(spending, previous, alpha)
        root = math.sqrt(tr)
        if density is None:
            def exit_mass(c: float) -> float:
                return float(2.0 * ndtr(-c))

            def next_density(x: np.ndarray) -> np.ndarray:
                return np.exp(-0.5 * x ** 2 / tr) / math.sqrt(2 * math.pi * tr)
        else:
            sd = math.sqrt(tr - previous)
            weights = density * _trapezoid(grid)

            def exit_mass(c: float, grid=grid, weights=weights, sd=sd) -> float:
                b = c * root
                return float(((ndtr((grid - b) / sd) + ndtr((-b - grid) / sd)) * weights).sum())

            def next_density(x: np.ndarray, grid=grid, weights=weights, sd=sd) -> np.ndarray:
                z = (x[:, None] - grid[None, :]) / sd
                return (np.exp(-0.5 * z ** 2) / (sd * math.sqrt(2 * math.pi))) @ weights
        c = _boundary(exit_mass, target)
        levels[r] = 0.0 if math.isinf(c) else float(2.0 * ndtr(-c))
        edge = (c if not math.isinf(c) else EDGE_SD) * root
        grid = np.linspace(-edge, edge, grid_points)
        density = next_density(grid)
        previous = tr
    return levels


def _trapezoid(x: np.ndarray) -> np.ndarray:
    """Trapezoid-rule weights of an evenly spaced grid."""
    w = np.full(len(x), x[1] - x[0])
    w[[0, -1]] *= 0.5
    return w


@dataclass(frozen=True)
class PairDifference:
    """a − b in points over the steps both answered, with its task-clustered standard error."""

    delta: float
    se: float
    steps: int
    tasks: int
    effective_tasks: float


def paired_difference(task: np.ndarray, a: np.ndarray, b: np.ndarray, scale: float = 100.0) -> PairDifference:
    """The paired difference of two runs' per-step values (NaN: not answered) over their common steps,
    clustered by `task` (see the module's docstring)."""
    both = ~(np.isnan(a) | np.isnan(b))
    task = np.asarray(task)[both]
    if not len(task):
        return PairDifference(math.nan, math.nan, 0, 0, 0.0)
    _, index = np.unique(task, return_inverse=True)
    per_task = np.bincount(index, weights=scale * (a[both] - b[both]))
    steps = np.bincount(index).astype(float)
    total, n = steps.sum(), len(steps)
    delta = float(per_task.sum() / total)
    se = math.sqrt(n / (n - 1) * float(((per_task - steps * delta) ** 2).sum())) / total if n > 1 else math.nan
    return PairDifference(delta, se, int(total), n, float(total ** 2 / (steps ** 2).sum()))


def critical_value(level: float, effective_tasks: float) -> float:
    """The two-sided t quantile of `level` with n_eff − 1 degrees of freedom (inf for level 0 or too few tasks)."""
    from scipy.special import stdtrit

    if level <= 0 or effective_tasks <= 1.5:
        return math.inf
    return float(stdtrit(effective_tasks - 1.0, 1.0 - level / 2.0))


@dataclass(frozen=True)
class Look:
    """One look at the active checkpoints: the leader, each one's difference from it with the race's
    interval (NaN for the leader and the inactive), and which are now worse than it."""

    leader: int
    delta: np.ndarray
    low: np.ndarray
    high: np.ndarray
    eliminate: np.ndarray
    level: float  # the nominal two-sided level of each pair's test at this look


def leader_of(values: np.ndarray, active: np.ndarray) -> int:
    """The active checkpoint with the highest mean on the steps every active one answered (on its own steps
    when they share none); the first of equals."""
    cols = np.flatnonzero(active)
    block = values[:, cols]
    shared = ~np.isnan(block).any(axis=1)
    with np.errstate(invalid="ignore"):
        means = block[shared].mean(axis=0) if shared.any() else np.nanmean(block, axis=0)
    return int(cols[int(np.nanargmax(np.where(np.isnan(means), -np.inf, means)))])


def judge(task: np.ndarray, values: np.ndarray, active: np.ndarray, level: float, min_tasks: int = 5) -> Look:
    """Compare every active checkpoint with the leader at one look. `values`: steps × checkpoints (per-step
    score 0–1, NaN where not answered); `level`: each pair's nominal level at this look (look_levels of
    α/P). A checkpoint is dropped when the leader's lead over it exceeds the t critical value times its
    standard error, on at least `min_tasks` common tasks."""
    values = np.asarray(values, dtype=float)
    active = np.asarray(active, dtype=bool)
    k = values.shape[1]
    delta, low, high = (np.full(k, math.nan) for _ in range(3))
    eliminate = np.zeros(k, dtype=bool)
    leader = leader_of(values, active)
    for j in np.flatnonzero(active):
        if j == leader:
            continue
        pair = paired_difference(task, values[:, j], values[:, leader])
        crit = critical_value(level, pair.effective_tasks) if pair.tasks >= min_tasks else math.inf
        delta[j] = pair.delta
        if math.isfinite(crit) and math.isfinite(pair.se):
            low[j], high[j] = pair.delta - crit * pair.se, pair.delta + crit * pair.se
            eliminate[j] = high[j] < 0
    return Look(leader, delta, low, high, eliminate, level)


def pairs_of(k: int) -> int:
    """The family of a series of k checkpoints: every pair."""
    return max(k * (k - 1) // 2, 1)
