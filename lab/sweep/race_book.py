"""A race's book: every checkpoint's per-step scores as they come back, what each round decided
(lab.scoring.sequential), and the standings the race table and race.json show. No Ray here: the race's
driver (lab.sweep.race) feeds it, and bench/bench_race.py feeds it synthetic series."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np

from lab.scoring.sequential import RaceSettings, judge, load_race_settings, look_levels, pairs_of
from lab.sweep.race_plan import RacePlan

RACING, FINALIST, ELIMINATED, BROKEN = "racing", "finalist", "eliminated", "failed"
ONE_LEFT, STEPS_RAN_OUT, BUDGET_SPENT, STOPPED, FAILED = (
    "one checkpoint left", "the steps ran out", "the step budget is spent", "stopped", "failed")
FINISHED = (ONE_LEFT, STEPS_RAN_OUT, BUDGET_SPENT)  # a race ended by itself: those still racing are its finalists


@dataclass
class Standing:
    """One checkpoint's line of the race table and of race.json. `status`: racing (a race going on, stopped
    or failed: its checkpoint resumes), finalist (the race ended with it), eliminated, or failed (its
    engine). `delta`, `ci`: its score minus the
    leader's (points) on their common steps, with the race's interval (valid over every round and pair),
    at its elimination, else at the last round; the leader's delta is 0 and its ci None."""

    name: str
    engine: str
    steps: int
    status: str
    round: int | None
    delta: float | None
    ci: list[float] | None
    p_best: float | None
    expected_regret: float | None
    score: float | None
    leader: bool = False


@dataclass
class RoundRecord:
    """What one round did: its tasks, the steps it replayed (all checkpoints), its information fraction,
    each pair's nominal level, the leader and who was dropped."""

    round: int
    tasks: list[str]
    steps: int
    fraction: float
    level: float
    leader: str
    eliminated: list[str] = field(default_factory=list)
    racing: int = 0


def round_levels(plan: RacePlan, settings: RaceSettings, k: int) -> np.ndarray:
    """Each round's nominal level for one pair (lab.scoring.sequential.look_levels at α/P): the rounds before
    `min_tasks` tasks are no looks, so the error they would have spent goes to the first look."""
    levels = np.zeros(plan.rounds)
    seen = np.cumsum([len(t) for t in plan.tasks])
    looks = [r for r in range(plan.rounds) if seen[r] >= settings.min_tasks] or list(range(plan.rounds))[-1:]
    if looks:
        levels[looks] = look_levels([plan.fractions[r] for r in looks], settings.alpha / pairs_of(k),
                                    settings.spending, settings.grid_points)
    return levels


class RaceBook:
    """The per-step scores of k checkpoints over the selected steps (NaN until answered), the active set,
    and each checkpoint's frozen standing once dropped."""

    def __init__(self, names: Sequence[str], engines: Sequence[str], keys: Sequence[str], task_of: dict[str, str],
                 plan: RacePlan, settings: RaceSettings | None = None) -> None:
        self.settings = settings or load_race_settings()
        self.names, self.engines, self.plan = list(names), list(engines), plan
        self.row = {key: i for i, key in enumerate(keys)}
        tasks = sorted({task_of[key] for key in keys})
        index = {t: i for i, t in enumerate(tasks)}
        self.task = np.array([index[task_of[key]] for key in keys], dtype=np.int64)
        k = len(self.names)
        self.values = np.full((len(keys), k), math.nan)
        self.active = np.ones(k, dtype=bool)
        self.dropped_in: list[int | None] = [None] * k
        self.failed = np.zeros(k, dtype=bool)
        self.delta, self.low, self.high = (np.full(k, math.nan) for _ in range(3))
        self.leader: int | None = None
        self.rounds: list[RoundRecord] = []
        self.levels = round_levels(plan, self.settings, k)
        self.ended: str | None = None

    # -- feeding --------------------------------------------------------------------------------
    def record(self, j: int, key: str, value: float) -> None:
        """Checkpoint j's score (0–1) on step `key` (a step outside the selection is ignored)."""
        row = self.row.get(key)
        if row is not None:
            self.values[row, j] = float(value)

    def close_round(self, steps: int) -> RoundRecord:
        """Judge the active checkpoints after the next round (`steps`: the steps it replayed, all checkpoints)
        and drop those worse than the leader."""
        r = len(self.rounds)
        look = judge(self.task, self.values, self.active, float(self.levels[r]), self.settings.min_tasks)
        self.leader = look.leader
        out = [j for j in np.flatnonzero(look.eliminate)]
        for j in np.flatnonzero(self.active):
            self.delta[j], self.low[j], self.high[j] = look.delta[j], look.low[j], look.high[j]
        self.delta[look.leader] = 0.0
        for j in out:
            self.active[j] = False
            self.dropped_in[j] = r + 1
        record = RoundRecord(r + 1, list(self.plan.tasks[r]), steps, self.plan.fractions[r], look.level,
                             self.names[look.leader], [self.names[j] for j in out], int(self.active.sum()))
        self.rounds.append(record)
        return record

    def fail(self, j: int) -> None:
        """Checkpoint j's engine failed: it leaves the race, neither finalist nor eliminated."""
        self.active[j], self.failed[j] = False, True
        self.dropped_in[j] = len(self.rounds) + 1

    def end(self, reason: str) -> None:
        self.ended = reason

    @property
    def planned_steps(self) -> int:
        """The steps of every round closed so far, all checkpoints (what a budget counts)."""
        return sum(r.steps for r in self.rounds)

    # -- reading --------------------------------------------------------------------------------
    @property
    def racing(self) -> list[int]:
        return [int(j) for j in np.flatnonzero(self.active)]

    def answered(self) -> np.ndarray:
        """Steps each checkpoint has answered."""
        return (~np.isnan(self.values)).sum(axis=0)

    def scores(self) -> np.ndarray:
        """Each checkpoint's score (points) over the steps it answered (NaN: none yet)."""
        n = self.answered()
        return np.where(n > 0, 100.0 * np.nansum(self.values, axis=0) / np.maximum(n, 1), math.nan)

    def chances(self, resamples: int | None = None, seed: int | None = None):
        """P(best) and expected regret of every checkpoint (lab.scoring.best) from one set of task resamples
        of the tasks replayed so far, each checkpoint's figure over the drawn tasks it answered; None before
        any step."""
        from lab.scoring.best import chances_of_runs

        return chances_of_runs(self.task, self.values, resamples=resamples, seed=seed)

    def standings(self, resamples: int | None = None) -> list[Standing]:
        """Every checkpoint's line, in the series' order."""
        chances = self.chances(resamples)
        scores, answered = self.scores(), self.answered()
        out = []
        for j, (name, engine) in enumerate(zip(self.names, self.engines)):
            is_leader = self.leader == j and self.active[j]
            status = BROKEN if self.failed[j] else ELIMINATED if not self.active[j] else \
                FINALIST if self.ended in FINISHED else RACING
            ci = None if is_leader or math.isnan(self.low[j]) else [round(float(self.low[j]), 3),
                                                                     round(float(self.high[j]), 3)]
            out.append(Standing(
                name, engine, int(answered[j]), status,
                self.dropped_in[j] if not self.active[j] else (len(self.rounds) or None),
                None if math.isnan(self.delta[j]) else round(float(self.delta[j]), 3), ci,
                None if chances is None else round(float(chances.p_best[j]), 4),
                None if chances is None else round(float(chances.expected_regret[j]), 3),
                None if math.isnan(scores[j]) else round(float(scores[j]), 3), bool(is_leader)))
        return out

    def as_dict(self, resamples: int | None = None) -> dict:
        """race.json's body: the method and its settings, every round, and every checkpoint's standing."""
        return {
            "method": {"name": "group-sequential paired comparisons with the leader",
                       "spending": self.settings.spending, "alpha": round(self.settings.alpha, 6),
                       "confidence": self.settings.confidence, "pairs": pairs_of(len(self.names)),
                       "multiplicity": "Bonferroni over every pair of checkpoints",
                       "clusters": "tasks", "min_tasks": self.settings.min_tasks},
            "rounds_planned": self.plan.rounds,
            "rounds": [asdict(r) for r in self.rounds],
            "ended": self.ended,
            "checkpoints": [asdict(s) for s in self.standings(resamples)],
        }
