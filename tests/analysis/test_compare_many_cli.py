"""`python -m lab compare A B C …` judges several runs together (each against the baseline, simultaneous,
with its detectable Δ, every run's P(best) and expected regret) and gates on all of them; two runs carry the
detectable Δ per metric (`mde`) and say a tie in words; `python -m lab plan A B` splits the variance and says
what more answers per step or more tasks would detect."""
from __future__ import annotations

import json
import math

import pytest

from lab.cli import main
from tests.helpers_paired import variant, write

FAST = ["--resamples", "1000"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare-many")
    out = {}
    for name, shift, seed, samples, steps in (("base", 0.0, 1, 0, None), ("better", 0.08, 2, 0, None),
                                              ("close", 0.005, 3, 0, None), ("worse", -0.08, 4, 0, None),
                                              ("sampled", 0.0, 5, 4, None), ("short", 0.0, 6, 0, 150)):
        out[name] = str(write(root, name, variant(name, shift=shift, seed=seed, samples=samples, steps=steps)))
    return out


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_several_runs_get_their_chance_of_being_best(files, capsys):
    rc, out, _ = run(capsys, "compare", files["base"], files["better"], files["close"], files["short"], *FAST, "--json")
    report = json.loads(out)
    rows = {r["name"]: r for r in report["runs"]}
    assert rc == 0 and [r["role"] for r in report["runs"]] == ["baseline", "candidate", "candidate", "candidate"]
    judged = [r["p_best"] for r in report["runs"] if r["p_best"] is not None]
    assert math.isclose(sum(judged), 1.0) and rows["better"]["p_best"] == max(judged)
    assert rows["short"]["p_best"] is None and "lacking steps" in report["p_best_note"]  # not on the baseline's steps
    better = rows["better"]["difference"]
    assert better["adjustment"] == "simultaneous over 3 comparisons (max-T)" and better["mde"] > 0
    assert rows["close"]["verdict"].startswith("not distinguishable at 95 %: with these 50 tasks only differences of "
                                                "about ")
    assert report["gate"] is None  # a look: no --max-drop


def test_the_table_and_a_gate_that_fails_on_any_worse_run(files, capsys):
    rc, out, _ = run(capsys, "compare", files["base"], files["close"], files["worse"], *FAST, "--max-drop", "0")
    assert rc == 1 and "P(best)" in out and "regret" in out and "detects" in out
    assert "gate (score, --max-drop 0): FAILED: worse than the baseline by more than 0" in out and "worse" in out
    rc, _, err = run(capsys, "compare", files["base"], files["close"], files["base"], *FAST)
    assert rc == 2 and "given twice" in err
    rc, out, _ = run(capsys, "compare", files["base"], files["close"], files["worse"], *FAST)
    assert rc == 0 and "a look, not a gate" in out


def test_two_runs_carry_the_detectable_difference(files, capsys):
    rc, out, _ = run(capsys, "compare", files["base"], files["close"], *FAST, "--json")
    score = json.loads(out)["metrics"]["score"]
    assert rc == 0 and score["mde"] > abs(score["delta"]) and score["mde"] > (score["ci"][1] - score["ci"][0]) / 2
    rc, out, _ = run(capsys, "compare", files["base"], files["close"], *FAST)
    line = next(x for x in out.splitlines() if x.startswith("score: "))
    assert line.startswith("score: not distinguishable at 95 %: with these 50 tasks only differences of about ")
    assert line.endswith(" points or more are reliably seen")


def test_the_planner_splits_the_variance_and_is_honest_about_answers(files, capsys):
    rc, out, _ = run(capsys, "plan", files["base"], files["sampled"], *FAST, "--json")
    plan = json.loads(out)
    assert rc == 0 and plan["answers_per_step"] > 1 and plan["variance"]["between answers of a step"] > 0
    assert math.isclose(sum(plan["shares"].values()), 1.0)
    designs = {d["design"].split(" (")[0]: d for d in plan["designs"]}
    assert designs["1 answer per step"]["mde"] > designs["8 answers per step"]["mde"]
    assert designs["2× the tasks"]["mde"] < designs["as now"]["mde"] and designs["as now"]["mde"] == plan["mde"]
    rc, out, _ = run(capsys, "plan", files["base"], files["close"], *FAST)
    assert rc == 0 and "not measured (one answer per step)" in out and "more answers per step buy nothing" in out
    assert "2× the tasks (100)" in out and "… " in out  # a range where the answers' spread is unknown
    rc, _, err = run(capsys, "plan", files["base"], "no-such-run-file.json", *FAST, "--db", files["base"] + ".db")
    assert rc == 2 and err.startswith("error: ")


def test_a_plan_without_an_interval_says_what_would_give_one(tmp_path, capsys):
    few = [str(write(tmp_path, name, variant(name, shift=shift, seed=seed, steps=12)))
           for name, shift, seed in (("few-a", 0.0, 1), ("few-b", 0.05, 2))]
    rc, _, err = run(capsys, "plan", *few, *FAST, "--db", str(tmp_path / "plan.db"))
    assert rc == 2 and err.startswith("error: no plan for score: fewer than 30 common steps (12): no interval; ")
    assert "more common steps" in err and "python -m lab data download" in err and "python -m lab demo" in err
    assert "--samples) add answers, not tasks" in err and len(err.strip().splitlines()) == 1
