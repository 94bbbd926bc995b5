"""`python -m lab sweep --race` on a real Ray cluster on this machine (ray.cluster_utils.Cluster), with
`stored:` checkpoints over a synthetic 24-task replay: the worse checkpoints stop at the first look, every
checkpoint keeps exactly the steps it was given as replay's checkpoint, `replay --resume` completes one
into the file a full replay writes, and a budget ends a race that `--race --resume` then finishes. The
worker node holds two engines at once, so three checkpoints share it round by round."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.paths import EXCERPT
from tests.sweep.race_series import write_checkpoint, write_replay
from tests.sweep.test_sweep_ray import lab, ray_cluster, same_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
NODE = {"num_cpus": 2, "object_store_memory": 80 * 1024 * 1024}
TASKS, STEPS_PER_TASK, ROUND_TASKS = 24, 7, 4


@pytest.fixture(scope="module")
def cluster():
    with ray_cluster(NODE) as made:
        yield made


@pytest.fixture(scope="module")
def series(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    root = tmp_path_factory.mktemp("race")
    replay = write_replay(root / "replay.jsonl", TASKS)
    return replay, {name: write_checkpoint(root / f"{name}.json", replay, right)
                    for name, right in (("good", 0.9), ("bad1", 0.3), ("bad2", 0.4), ("twin", 0.9))}


def race(cluster, replay: Path, out: Path, tmp_path: Path, runs: list[Path], *extra: str):
    return lab(["sweep", "--race", "--ray", cluster.address, "--replay", str(replay), "--out", str(out),
                "--round-tasks", str(ROUND_TASKS), *[a for p in runs for a in ("--engine", f"stored:{p}")], *extra],
               tmp_path)


def rows(path: Path) -> list[dict]:
    return [json.loads(line)["row"] for line in path.read_text().splitlines() if '"row"' in line]


def test_a_race_drops_the_worse_and_replay_resume_completes_a_partial_run(cluster, series, tmp_path):
    replay, runs = series
    out = tmp_path / "race"
    done = race(cluster, replay, out, tmp_path, [runs["good"], runs["bad1"], runs["bad2"]])
    assert "race ended: one checkpoint left after 3 of 6 rounds" in done.stdout, done.stdout[-3000:]
    assert all(f"round {r}/6" in done.stdout for r in (1, 2, 3))  # the table, live after every round
    report = json.loads((out / "race.json").read_text())
    given = 3 * ROUND_TASKS * STEPS_PER_TASK
    assert report["ended"] == "one checkpoint left" and report["steps_spent"] == 3 * given
    assert report["full_sweep_steps"] == 3 * TASKS * STEPS_PER_TASK and len(report["rounds"]) == 3
    good, bad1, bad2 = report["checkpoints"]
    assert (good["name"], good["status"], good["delta"], good["ci"], good["leader"]) == ("good", "finalist", 0.0, None, True)
    for entry in (bad1, bad2):
        assert entry["status"] == "eliminated" and entry["round"] == 3 and entry["ci"][1] < 0 and entry["p_best"] < 0.01
        assert entry["engine"] == f"stored:{runs[entry['name']]}"
    assert sum(c["p_best"] for c in report["checkpoints"]) == pytest.approx(1.0, abs=1e-3)
    keys = {t for r in report["rounds"] for t in r["tasks"]}
    for entry in report["checkpoints"]:  # each holds exactly the steps it was given, still a checkpoint
        assert entry["steps"] == given and not entry["complete"] and entry["file"].endswith(".partial.jsonl")
        kept = rows(Path(entry["file"]))
        assert len(kept) == given and {r["task_id"] for r in kept} == keys
    assert sorted(p.name for p in out.glob("*.json")) == ["race.json"]  # no result file of a partial run

    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("bad1: ") and "complete it with:" in ln)
    command = shlex.split(line.split("complete it with: ", 1)[1])
    assert command[:4] == ["python", "-m", "lab", "replay"]
    lab(command[3:], tmp_path)
    lab(["replay", "--replay", str(replay), "--engine", f"stored:{runs['bad1']}", "--out", str(tmp_path / "full")],
        tmp_path)
    same_run(tmp_path / "full" / "bad1.json", out / "bad1.json")
    assert not (out / "bad1.partial.jsonl").exists()


def test_a_budget_ends_the_race_and_race_resume_finishes_it(cluster, series, tmp_path):
    replay, runs = series
    out = tmp_path / "race"
    per_round = 2 * ROUND_TASKS * STEPS_PER_TASK
    done = race(cluster, replay, out, tmp_path, [runs["good"], runs["twin"]], "--budget-steps", str(2 * per_round + 1))
    assert "race ended: the step budget is spent after 2 of 6 rounds" in done.stdout, done.stdout[-3000:]
    first = json.loads((out / "race.json").read_text())
    assert [c["status"] for c in first["checkpoints"]] == ["finalist", "finalist"]
    assert first["steps_spent"] == 2 * per_round and first["budget_steps"] == 2 * per_round + 1
    kept = {name: rows(out / f"{name}.partial.jsonl") for name in ("good", "twin")}

    done = race(cluster, replay, out, tmp_path, [runs["good"], runs["twin"]], "--resume")
    assert "race ended: the steps ran out after 6 of 6 rounds" in done.stdout, done.stdout[-3000:]
    final = json.loads((out / "race.json").read_text())
    assert not list(out.glob("race-*.json"))  # a resumed race rewrites its own file
    assert final["steps_spent"] == 2 * TASKS * STEPS_PER_TASK and not any(r["eliminated"] for r in final["rounds"])
    for name in ("good", "twin"):
        entry = next(c for c in final["checkpoints"] if c["name"] == name)
        assert entry["complete"] and entry["status"] == "finalist" and entry["file"] == str(out / f"{name}.json")
        whole = {f"{r['task_id']}/{r['step_idx']}": r for r in json.loads((out / f"{name}.json").read_text())["per_step"]}
        assert len(whole) == TASKS * STEPS_PER_TASK
        assert all(whole[f"{r['task_id']}/{r['step_idx']}"] == r for r in kept[name])  # kept, not replayed again
    lab(["replay", "--replay", str(replay), "--engine", f"stored:{runs['good']}", "--out", str(tmp_path / "full")],
        tmp_path)
    same_run(tmp_path / "full" / "good.json", out / "good.json")
