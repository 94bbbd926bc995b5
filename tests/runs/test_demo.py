"""`python -m lab demo` (issue 56 item 1): a synthetic pair a newcomer compares with intervals offline. The
replay is shaped like TB2-lite, the runs go through the lab's own replay and scoring, their true difference is
known, everything is labelled synthetic (names, files, the store's source, Results, the CLI), and `compare`
gives an interval for it."""
from __future__ import annotations

import json

import pytest

from lab.cli import main
from lab.data import load_replay
from lab.resultfiles.files import read_result_file
from lab.store.opening import open_store
from tests.helpers_store import make_results_dir


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    results = make_results_dir(root)
    rc = main(["demo", "--results", str(results)])
    assert rc == 0
    return root, results


def test_the_replay_is_synthetic_and_shaped_like_tb2lite(demo):
    _, results = demo
    replay = load_replay(str(results / "synthetic" / "synthetic-demo-replay.jsonl"))
    tasks = {s.task_id for s in replay.steps}
    assert len(replay.steps) == 303 and len(tasks) == 50 and replay.problems == []
    assert all(t.startswith("synthetic-") for t in tasks)
    assert all("not a TB2-lite task" in s.prompt for s in replay.steps)
    lengths = sorted(sum(1 for s in replay.steps if s.task_id == t) for t in tasks)
    assert lengths[0] < 4 < 9 < lengths[-1]  # uneven tasks, as TB2-lite's are
    assert len({s.bucket for s in replay.steps}) == 3 and len({s.source_group for s in replay.steps}) > 3


def test_the_runs_say_what_they_are(demo, capsys):
    _, results = demo
    for name in ("synthetic-demo-baseline", "synthetic-demo-candidate"):
        data = read_result_file(results / "synthetic" / f"{name}.json")
        assert data["model_short"] == name and data["engine_spec"] == f"synthetic:{name}"
        assert data["synthetic"]["true_difference_points"] == 6.0 and "not a model" in data["synthetic"]["note"]
        assert data["replay_sha256"] and data["prompt_template"]["template_sha256"]
        assert len(data["per_step"]) == 303
    with open_store(results / "lab.duckdb", results) as store:
        rows = store.rows("SELECT display_name, source, steps, partial FROM runs ORDER BY display_name")
        listed = store.rows("SELECT name, source FROM results_all WHERE run_id IS NOT NULL ORDER BY name")
    assert rows == [("synthetic-demo-baseline", "synthetic", 303, False), ("synthetic-demo-candidate", "synthetic", 303, False)]
    assert [n for n, _ in listed] == ["synthetic-demo-baseline", "synthetic-demo-candidate"]  # Results' names


def test_compare_gives_the_pair_an_interval_that_holds_the_true_difference(demo, capsys):
    _, results = demo
    capsys.readouterr()
    rc = main(["compare", "synthetic-demo-baseline", "synthetic-demo-candidate", "--json", "--resamples", "2000",
               "--results", str(results)])
    data = json.loads(capsys.readouterr().out)
    score = data["metrics"]["score"]
    assert rc == 0 and score["tasks"] == 50 and score["steps"] == 303
    low, high = score["ci"]
    assert low <= 6.0 <= high and high - low < 12, score  # seed 0's pair: the interval holds the truth
    assert data["settings"]["differ"] == []
    assert data["baseline"]["name"] == "synthetic-demo-baseline"


def test_another_difference_and_seed_rewrite_the_pair(tmp_path, capsys):
    results = make_results_dir(tmp_path)
    assert main(["demo", "--results", str(results), "--difference", "-10", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert "SYNTHETIC" in out and "-10.00 points" in out and "python -m lab compare synthetic-demo-baseline" in out
    first = (results / "synthetic" / "synthetic-demo-candidate.json").read_bytes()
    assert main(["demo", "--results", str(results), "--difference", "3"]) == 0  # run again: replaced, not NAME-2
    assert sorted(p.name for p in (results / "synthetic").iterdir() if not p.name.startswith(".")) == [
        "synthetic-demo-baseline.json", "synthetic-demo-candidate.json", "synthetic-demo-replay.jsonl"]
    assert (results / "synthetic" / "synthetic-demo-candidate.json").read_bytes() != first


@pytest.mark.parametrize("argv, expected", [
    (["--difference", "20"], "--difference 20.0: give a number of points from -15 to 15"),
    (["--difference", "nan"], "--difference nan"),
    (["--difference", "inf"], "--difference inf"),
    (["--seed", "-1"], "--seed -1"),
])
def test_bad_options_exit_2_in_one_line(tmp_path, capsys, argv, expected):
    rc = main(["demo", "--results", str(make_results_dir(tmp_path)), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and expected in err and err.count("\n") == 1, err
    assert not (tmp_path / "results" / "synthetic").exists()
