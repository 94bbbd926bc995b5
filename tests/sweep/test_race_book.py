"""The race without a cluster: its rounds (lab.sweep.race_plan), its book fed with the per-step rows of
`stored:` result files over a synthetic replay (lab.sweep.race_book), the race table and race.json's
body, and the refusals that come before anything connects (lab.sweep.race, the CLI)."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from bench.synthetic_series import make_series
from lab.data import load_replay
from lab.errors import LabError
from lab.runs.options import ReplaySource, RunOptions
from lab.sweep.plan import Sweep
from lab.sweep.race import Race, check_race
from lab.sweep.race_book import BUDGET_SPENT, ELIMINATED, FINALIST, ONE_LEFT, STEPS_RAN_OUT, RaceBook
from lab.sweep.race_plan import plan_rounds, task_order
from lab.sweep.race_table import race_table, resume_command, round_line
from tests.helpers_app import lab_env, run_lab_cli
from tests.paths import EXCERPT
from tests.sweep.race_series import write_checkpoint, write_replay

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.fixture(scope="module")
def series(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    """A 24-task replay and three stored checkpoints: one right on about 90 % of the steps, two on 30 and 40 %,
    and a copy of the first (equal to it on every step)."""
    root = tmp_path_factory.mktemp("race-series")
    replay = write_replay(root / "replay.jsonl", 24)
    runs = {name: write_checkpoint(root / f"{name}.json", replay, right)
            for name, right in (("good", 0.9), ("bad1", 0.3), ("bad2", 0.4), ("twin", 0.9))}
    return replay, runs


def rows_of(path: Path) -> dict[str, dict]:
    return {f"{r['task_id']}/{r['step_idx']}": r for r in json.loads(path.read_text())["per_step"]}


def race_files(replay: Path, runs: list[Path], round_tasks: int = 4, seed: int = 0) -> tuple[RaceBook, int]:
    """Race stored files as the driver does: each round's rows handed to the book, then judged."""
    steps = load_replay(str(replay)).steps
    plan = plan_rounds(steps, round_tasks, seed)
    book = RaceBook([p.stem for p in runs], [f"stored:{p}" for p in runs], [s.key for s in steps],
                    {s.key: s.task_id for s in steps}, plan)
    rows = [rows_of(p) for p in runs]
    spent = 0
    for keys in plan.keys:
        racing = book.racing
        for j in racing:
            for key in keys:
                book.record(j, key, rows[j][key]["command_f1"])
        spent += len(keys) * len(racing)
        book.close_round(len(keys) * len(racing))
        if len(book.racing) == 1:
            book.end(ONE_LEFT)
            return book, spent
    book.end(STEPS_RAN_OUT)
    return book, spent


def test_rounds_hold_whole_tasks_once_each_spread_over_the_groups(series):
    replay, _ = series
    steps = load_replay(str(replay)).steps
    plan = plan_rounds(steps, 5, seed=3)
    tasks = [t for chunk in plan.tasks for t in chunk]
    assert sorted(tasks) == sorted({s.task_id for s in steps}) and [len(c) for c in plan.tasks] == [5, 5, 5, 5, 4]
    for chunk, keys in zip(plan.tasks, plan.keys):
        assert keys == [s.key for s in steps if s.task_id in chunk]  # whole tasks, in the replay's order
    assert plan.fractions == sorted(plan.fractions) and plan.fractions[-1] == 1.0 and plan.steps == len(steps)
    group = {s.task_id: s.source_group for s in steps}
    share = Counter(group.values())
    for m in range(1, len(tasks) + 1):  # every prefix holds each group in its share, give or take one task
        seen = Counter(group[t] for t in tasks[:m])
        assert all(abs(seen[g] - m * n / len(tasks)) < 2 for g, n in share.items()), (m, seen)
    assert task_order(steps, 3) == tasks
    assert task_order(steps, 4) != tasks


def test_a_clearly_worse_pair_is_dropped_at_the_first_look_and_the_leader_stays(series):
    replay, runs = series
    book, spent = race_files(replay, [runs["good"], runs["bad1"], runs["bad2"]])
    assert book.ended == ONE_LEFT and len(book.rounds) == 3  # rounds of 4 tasks: the first look has 12
    assert [r.eliminated for r in book.rounds] == [[], [], ["bad1", "bad2"]]
    assert [r.level for r in book.rounds][:2] == [0.0, 0.0] and book.rounds[2].level > 0
    good, bad1, bad2 = book.standings()
    assert (good.status, good.leader, good.delta, good.ci) == (FINALIST, True, 0.0, None)
    assert bad1.status == bad2.status == ELIMINATED and bad1.round == bad2.round == 3
    for s in (bad1, bad2):
        assert s.ci[1] < 0 and s.ci[0] < s.delta < s.ci[1] and s.steps == good.steps == spent // 3
        assert s.score == pytest.approx(good.score + s.delta, abs=2e-3)  # rounded to 3 decimals
    assert sum(s.p_best for s in (good, bad1, bad2)) == pytest.approx(1.0)
    assert good.p_best > 0.99 and good.expected_regret < 0.01
    text = race_table(book.standings())
    assert "eliminated in round 3" in text and "finalist (leader)" in text
    assert "round 3/6" in round_line(book, book.rounds[2]) and "dropped bad1, bad2" in round_line(book, book.rounds[2])
    body = book.as_dict()
    assert body["checkpoints"][1]["status"] == "eliminated" and body["method"]["pairs"] == 3
    assert json.loads(json.dumps(body)) == body


def test_equal_checkpoints_race_to_the_end_and_all_are_finalists(series):
    replay, runs = series
    book, spent = race_files(replay, [runs["good"], runs["twin"]])
    assert book.ended == STEPS_RAN_OUT and not any(r.eliminated for r in book.rounds)
    assert spent == 2 * len(load_replay(str(replay)).steps)
    assert [s.status for s in book.standings()] == [FINALIST, FINALIST]
    assert [s.p_best for s in book.standings()] == [0.5, 0.5]  # a tie in every resample splits it


def test_synthetic_equal_series_keep_everyone_on_most_seeds():
    """Ten series of equal checkpoints shaped like TB2-lite (bench/bench_race.py races hundreds): a
    smoke check that the race does not drop checkpoints at random."""
    rng = np.random.default_rng(11)
    lost = 0
    for i in range(10):
        s = make_series(rng, (0.0, 0.0, 0.0))
        plan = plan_rounds(s.steps, 5, seed=i)
        book = RaceBook(["a", "b", "c"], ["a", "b", "c"], [x.key for x in s.steps], s.task_of, plan)
        row = {x.key: n for n, x in enumerate(s.steps)}
        for keys in plan.keys:
            for j in book.racing:
                for key in keys:
                    book.record(j, key, s.values[row[key], j])
            book.close_round(len(keys))
        lost += not book.active.all()
    assert lost <= 2


def test_races_that_cannot_run_are_refused_before_connecting(series):
    replay, runs = series
    steps = load_replay(str(replay)).steps
    plan = plan_rounds(steps, 4, 0)

    def race(specs, shards=1, budget=None):
        return Race(Sweep(specs, steps, RunOptions(), ReplaySource(str(replay)), Path("."), shards), 4, 0, budget)

    with pytest.raises(LabError, match="at least two checkpoints"):
        check_race(race(["reference"]), plan)
    with pytest.raises(LabError, match="drop --shards"):
        check_race(race(["reference", "stored:x"], shards=2), plan)
    with pytest.raises(LabError, match="the first round alone is 56 steps"):
        check_race(race(["reference", "stored:x"], budget=55), plan)
    check_race(race(["reference", "stored:x"], budget=56), plan)
    assert BUDGET_SPENT != STEPS_RAN_OUT


@pytest.mark.parametrize("extra, words", [
    (["--round-tasks", "3"], "belong to a race: add --race"),
    (["--race", "--what", "reference"], "drop --what reference"),
    (["--race", "--budget-steps", "1"], "the first round alone"),
    (["--race", "--shards", "2"], "drop --shards"),
])
def test_race_options_that_cannot_run_are_one_line_before_ray(series, tmp_path, extra, words):
    replay, runs = series
    args = ["sweep", "--replay", str(replay), "--ray", "local", "--out", str(tmp_path / "out"),
            "--engine", f"stored:{runs['good']}", "--engine", f"stored:{runs['bad1']}", *extra]
    out = run_lab_cli(args, env=lab_env(RAY_ADDRESS="", LAB_RAY_ADDRESS=""), timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 2 and "Traceback" not in text and "Ray cluster" not in text, text[-2000:]
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and words in errors[0], text[-2000:]
    assert not (tmp_path / "out").exists()


def test_the_resume_line_names_what_the_checkpoint_pins():
    line = resume_command("stored:/r/a b.json", "a-b", "/r/replay.jsonl", "/out",
                          {"--mode": "corrected", "--tasks": ["t1", "t2"], "--seed": None, "--allow-raw-fallback": True,
                           "--temperature": 0.7})
    assert line == ("python -m lab replay --resume --name a-b --engine 'stored:/r/a b.json' --replay /r/replay.jsonl "
                    "--out /out --mode corrected --tasks t1 t2 --allow-raw-fallback --temperature 0.7")


def test_a_second_race_in_one_folder_keeps_the_first_ones_file(tmp_path):
    from lab.sweep.race import race_path, write_json

    first = race_path(tmp_path, resume=False)
    write_json(first, {"ended": "one checkpoint left"})
    assert first.name == "race.json"
    assert race_path(tmp_path, resume=False).name == "race-2.json"
    assert race_path(tmp_path, resume=True) == first  # a resumed race rewrites its own
    assert json.loads(first.read_text()) == {"ended": "one checkpoint left"}
    assert [p.name for p in tmp_path.iterdir()] == ["race.json"]  # no temporary file left
