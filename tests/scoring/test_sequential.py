"""lab.scoring.sequential: the race's group-sequential levels, its paired task-clustered differences and
one look's verdicts."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.stats import norm

from lab.scoring.sequential import (
    SPENDING, critical_value, judge, leader_of, load_race_settings, look_levels, paired_difference, pairs_of, spent,
)

FRACTIONS = np.arange(1, 11) / 10


def test_one_look_at_the_end_is_the_plain_two_sided_test():
    for name in SPENDING:
        assert look_levels([1.0], 0.05, name) == pytest.approx([0.05], rel=1e-6)


@pytest.mark.parametrize("name", list(SPENDING))
def test_brownian_first_passages_spend_exactly_what_the_function_allows(name):
    """The levels' boundaries, applied to Brownian paths observed at the looks, are first crossed by
    α(t_r) of the paths by look r (200,000 paths; binomial noise of about 0.0005)."""
    alpha = 0.05
    levels = look_levels(FRACTIONS, alpha, name)
    bounds = np.where(levels > 0, norm.isf(np.maximum(levels, 1e-300) / 2), np.inf)
    rng = np.random.default_rng(7)
    paths = rng.normal(0, math.sqrt(0.1), (200_000, len(FRACTIONS))).cumsum(axis=1)
    crossed = np.maximum.accumulate(np.abs(paths) / np.sqrt(FRACTIONS) > bounds, axis=1).mean(axis=0)
    expected = [spent(name, t, alpha) for t in FRACTIONS]
    assert crossed == pytest.approx(expected, abs=0.0015)
    assert crossed[-1] <= alpha + 0.0015


def test_pocock_spends_early_and_obrien_fleming_late():
    pocock, obf = (look_levels(FRACTIONS, 0.005, name) for name in ("pocock", "obrien-fleming"))
    assert pocock[0] > 1e-4 and obf[0] < 1e-10
    assert obf[-1] > pocock[-1]
    assert all(0 <= x < 0.005 for x in (*pocock, *obf))


@pytest.mark.parametrize("bad", [[], [0.0, 1.0], [0.5, 0.4], [0.5, 1.2]])
def test_fractions_must_increase_within_0_and_1(bad):
    with pytest.raises(ValueError, match="information fractions"):
        look_levels(bad, 0.05, "pocock")


def test_the_paired_difference_is_the_ratio_of_sums_with_the_task_clustered_error():
    task = np.array([0, 0, 1, 2, 2, 2, 3])
    a = np.array([1.0, 0.5, 0.0, 1.0, 1.0, 0.0, 0.5])
    b = np.array([0.0, 0.5, 0.0, 0.5, 1.0, 0.0, 0.0])
    pair = paired_difference(task, a, b)
    assert pair.delta == pytest.approx(100 * (a.sum() - b.sum()) / len(a))
    d = np.array([100.0, 0.0, 50.0, 50.0])  # each task's summed difference
    n = np.array([2, 1, 3, 1])
    e = d - n * pair.delta
    assert pair.se == pytest.approx(math.sqrt(4 / 3 * (e ** 2).sum()) / 7)
    assert (pair.steps, pair.tasks) == (7, 4)
    assert pair.effective_tasks == pytest.approx(49 / 15)


def test_the_difference_uses_the_steps_both_answered():
    task = np.array([0, 1, 2, 3])
    a = np.array([1.0, np.nan, 1.0, 0.0])
    b = np.array([0.0, 1.0, np.nan, 0.0])
    pair = paired_difference(task, a, b)
    assert (pair.steps, pair.tasks, pair.delta) == (2, 2, pytest.approx(50.0))
    empty = paired_difference(task, a * np.nan, b)
    assert empty.steps == 0 and math.isnan(empty.delta)


def test_no_level_or_too_few_tasks_is_no_critical_value():
    assert critical_value(0.0, 30) == math.inf
    assert critical_value(0.05, 1.2) == math.inf
    assert critical_value(0.05, 1e9) == pytest.approx(norm.isf(0.025), rel=1e-4)


def test_a_look_drops_the_clearly_worse_and_keeps_the_close_and_the_leader():
    rng = np.random.default_rng(3)
    task = np.repeat(np.arange(30), 6)
    base = rng.random(len(task))
    close = np.clip(base + rng.normal(-0.01, 0.3, len(task)), 0, 1)  # a point or so lower, noisily
    values = np.column_stack([base, np.clip(base - 0.5, 0, 1), close, base])
    look = judge(task, values, np.array([True, True, True, False]), level=0.001, min_tasks=10)
    assert look.leader == 0 and math.isnan(look.delta[0])
    assert look.eliminate.tolist() == [False, True, False, False]
    assert look.high[1] < 0 < look.high[2]
    assert math.isnan(look.delta[3])  # not racing: not judged
    few = judge(task[:54], values[:54], np.ones(4, dtype=bool), level=0.001, min_tasks=10)  # 9 tasks
    assert not few.eliminate.any()


def test_the_leader_is_judged_on_the_steps_every_racer_answered():
    values = np.array([[1.0, 0.0], [0.0, np.nan], [0.0, np.nan]])
    assert leader_of(values, np.array([True, True])) == 0  # 1 vs 0 on the first step; not 1/3 vs 0
    assert leader_of(values, np.array([False, True])) == 1


def test_the_family_is_every_pair_and_the_settings_name_their_spending(tmp_path):
    assert [pairs_of(k) for k in (1, 2, 5, 10)] == [1, 1, 10, 45]
    settings = load_race_settings()
    assert settings.spending in SPENDING and 0 < settings.alpha < 1
    bad = tmp_path / "race.yaml"
    bad.write_text("\n".join(f"{k}: {v}" for k, v in {**dataclasses.asdict(settings), "spending": "guess"}.items()))
    with pytest.raises(ValueError, match="guess"):
        load_race_settings(bad)
