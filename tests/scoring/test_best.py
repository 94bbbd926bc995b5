"""lab.scoring.best: each run's chance of being the best and its expected regret, from bootstrap figures."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from lab.scoring.best import best_chances


def test_a_clear_winner_takes_every_resample_and_regrets_nothing():
    boot = np.array([[50.0, 40.0, 45.0], [52.0, 41.0, 44.0], [51.0, 39.0, 46.0]])
    chances = best_chances(boot)
    assert chances.p_best.tolist() == [1.0, 0.0, 0.0]
    assert chances.expected_regret[0] == 0.0
    assert chances.expected_regret[1] == pytest.approx(np.mean([10.0, 11.0, 12.0]))
    assert chances.resamples == 3


def test_ties_at_the_top_split_the_resample():
    chances = best_chances(np.array([[1.0, 1.0, 0.0], [2.0, 0.0, 0.0]]))
    assert chances.p_best.tolist() == [0.75, 0.25, 0.0]


def test_lower_is_better_turns_the_order_and_regret_stays_positive():
    chances = best_chances(np.array([[2.0, 3.0], [2.5, 3.5]]), higher_is_better=False)
    assert chances.p_best.tolist() == [1.0, 0.0]
    assert chances.expected_regret.tolist() == [0.0, 1.0]


def test_resamples_with_nan_are_left_out_and_none_left_gives_nan():
    chances = best_chances(np.array([[1.0, np.nan], [0.0, 1.0]]))
    assert chances.p_best.tolist() == [0.0, 1.0] and chances.resamples == 1
    empty = best_chances(np.array([[np.nan, 1.0]]))
    assert empty.resamples == 0 and np.isnan(empty.p_best).all()


def test_a_matrix_is_required():
    with pytest.raises(ValueError, match="resamples, runs"):
        best_chances(np.array([1.0, 2.0]))


@settings(max_examples=60, deadline=None)
@given(arrays(float, st.tuples(st.integers(1, 30), st.integers(1, 6)),
              elements=st.floats(-100, 100, allow_nan=False).map(lambda v: round(v, 1))))
def test_chances_add_up_to_one_and_regret_is_never_negative(boot):
    chances = best_chances(boot)
    assert chances.p_best.sum() == pytest.approx(1.0)
    assert (chances.p_best >= 0).all() and (chances.expected_regret >= -1e-12).all()
    # regret_j = E[max] − mean_j: the smallest regret belongs to the run with the top mean figure
    assert chances.expected_regret.min() == pytest.approx((boot.max(axis=1) - boot.mean(axis=0).max()).mean())
