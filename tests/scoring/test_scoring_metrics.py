"""score_units rules, the scorer registry, and score_batch == score_units number for number."""
import pytest

from bench.synthetic import make_results
from lab.scoring import SCORERS, StepMetrics, score_batch, score_units


def test_registry_has_both_scorers():
    assert set(SCORERS) == {"corrected", "legacy"}
    with pytest.raises(ValueError, match="unknown scorer"):
        score_units(["ls"], ["ls"], "nope")


def test_empty_vs_empty_differs_by_scorer():
    assert score_units([], [], "corrected") == StepMetrics(0.0, 0.0, 0.0, 0.0)
    assert score_units([], [], "legacy") == StepMetrics(1.0, 1.0, 1.0, 1.0)
    assert score_units(["ls"], [], "legacy") == StepMetrics(0.0, 0.0, 0.0, 0.0)
    assert score_units([], ["ls"]) == StepMetrics(0.0, 0.0, 0.0, 0.0)


def test_first_cmd_exact_is_case_insensitive_after_normalization():
    assert score_units(["  LS   -la "], ["ls -la", "pwd"]).first_cmd_exact == 1.0
    assert score_units(["pwd", "ls -la"], ["ls -la"]).first_cmd_exact == 0.0


def test_max_matching_rewards_repetition():
    m = score_units(["ls -la", "ls -la", "ls -la"], ["ls -la", "cat a.txt"])
    assert (m.precision, m.recall, m.f1) == (1.0, 0.5, 0.6667)


def test_f1_from_unrounded_precision_and_recall():
    m = score_units(["a b c", "d"], ["a b", "e f g h"])
    p = (0.8 + 0.0) / 2
    r = (0.8 + 0.0) / 2
    assert m.f1 == round(2 * p * r / (p + r), 4)
    assert m.to_dict() == {"first_cmd_exact": 0.0, "command_precision": m.precision,
                           "command_recall": m.recall, "command_f1": m.f1}


def test_wait_units_match_each_other():
    assert score_units(["<WAIT>"], ["   "]).f1 == 1.0


@pytest.mark.parametrize("scorer", ["corrected", "legacy"])
def test_batch_identical_to_per_step_on_synthetic_runs(scorer):
    results = make_results(n_runs=6, n_steps=40, seed=3)
    pairs = [(r["pred_command_units"], r["ref_command_units"]) for res in results for r in res["per_step"]]
    pairs += [([], []), (["ls"], []), ([], ["ls"]), (["x", "x"], ["x"])]
    assert score_batch(pairs, scorer) == [score_units(p, r, scorer) for p, r in pairs]
