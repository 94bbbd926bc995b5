"""`replay --samples N` on the tiny model: schema, seeds, hand-computed aggregates, N=1 unchanged, store."""
from __future__ import annotations

import json
import subprocess
import sys
from itertools import combinations
from math import comb
from statistics import fmean, pstdev

import pytest

from lab.resultfiles.files import read_result_file
from lab.scoring.stability import collapse_answers, pass_at_k
from tests.paths import EXCERPT, REPO

SAMPLE_KEYS = {
    "sample", "seed", "raw_output", "pred_command_units", "valid_json", "pred_task_complete", "first_cmd_exact",
    "command_precision", "command_recall", "command_f1", "finish_reason", "completion_tokens", "latency_s",
    "parse_failure", "error",
}  # fmt: skip
# what may differ between two runs of the same greedy replay: wall-clock times
VOLATILE_TOP = ("timestamp", "load_time_sec", "gen_time_sec", "avg_sec_per_step")
VOLATILE_STEP = ("latency_s", "ttft_s")


def lab_replay(tmp_path, tiny_model_dir, name: str, *extra: str) -> dict:
    spec = f"transformers:{tiny_model_dir}?device=cpu&batch_size=2"
    proc = subprocess.run(
        [sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--engine", spec, "--out", str(tmp_path),
         "--limit", "2", "--max-tokens", "8", "--name", name, *extra],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return {"path": tmp_path / f"{name}.json", "stdout": proc.stdout, "stderr": proc.stderr}


def without_timings(result: dict) -> dict:
    out = {k: v for k, v in result.items() if k not in VOLATILE_TOP}
    out["per_step"] = [{k: v for k, v in row.items() if k not in VOLATILE_STEP} for row in result["per_step"]]
    return out


@pytest.fixture(scope="module")
def sampled(tmp_path_factory, tiny_model_dir):
    folder = tmp_path_factory.mktemp("sampled")
    run = lab_replay(folder, tiny_model_dir, "s3", "--samples", "3", "--seed", "11", "--temperature", "1.0")
    return run, read_result_file(run["path"])


def test_samples_schema_and_seeds(sampled):
    run, result = sampled
    assert "3 samples/step" in run["stdout"] and "pass@3" in run["stdout"]
    assert result["sampling"]["seed"] == 11 and result["sampling"]["temperature"] == 1.0
    for row in result["per_step"]:
        samples = row["samples"]
        assert [s["sample"] for s in samples] == [0, 1, 2] and [s["seed"] for s in samples] == [11, 12, 13]
        assert all(set(s) == SAMPLE_KEYS for s in samples)
        # the harness fields of the step are sample 0's
        assert row["raw_output"] == samples[0]["raw_output"]
        assert row["pred_command_units"] == samples[0]["pred_command_units"]
        for key in ("first_cmd_exact", "command_precision", "command_recall", "command_f1", "valid_json"):
            assert row[key] == samples[0][key]
        assert all(0 < s["completion_tokens"] <= 8 for s in samples)
    # sampling differs by seed: the three answers of a step are not all the same text
    assert all(len({s["raw_output"] for s in row["samples"]}) > 1 for row in result["per_step"])


def test_aggregate_is_sample_0s_plus_sampling_figures_by_hand(sampled):
    _, result = sampled
    from lab.scoring.aggregate import aggregate_scores

    rows = result["per_step"]
    agg = result["aggregate"]
    plain = aggregate_scores([{k: v for k, v in r.items() if k != "samples"} for r in rows])
    assert {k: agg[k] for k in plain} == plain
    f1s = [[s["command_f1"] for s in r["samples"]] for r in rows]
    assert agg["samples"] == 3 and agg["pass_threshold"] == 0.5
    assert agg["mean_f1_over_samples"] == round(sum(sum(f) / 3 for f in f1s) / len(f1s), 4)
    assert agg["f1_std_mean"] == round(fmean(pstdev(f) for f in f1s), 4)
    for k in (1, 2, 3):
        by_hand = fmean(1 - comb(3 - sum(x >= 0.5 for x in f), k) / comb(3, k) for f in f1s)
        assert agg["pass_at_k"][str(k)] == round(by_hand, 4)


def test_rescore_recomputes_sample_metrics_and_aggregates(sampled, tmp_path):
    """Give the samples known answers (some right, some half right) and rescore: every figure by hand."""
    _, result = sampled
    data = json.loads(json.dumps(result))
    answers = []
    for r, row in enumerate(data["per_step"]):
        ref = row["ref_command_units"]
        choices = [list(ref), ["no-such-command --at-all"], list(ref[:1]) if r == 0 else list(ref)]
        for sample, units in zip(row["samples"], choices):
            sample["pred_command_units"] = units
        answers.append(choices)
    source, out = tmp_path / "edited.json", tmp_path / "rescored.json"
    source.write_text(json.dumps(data))
    proc = subprocess.run([sys.executable, "-m", "lab", "rescore", str(source), "-o", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rescored = read_result_file(out)
    f1s = [[s["command_f1"] for s in row["samples"]] for row in rescored["per_step"]]
    for row, per_sample in zip(rescored["per_step"], f1s):
        assert per_sample[0] == 1.0 and per_sample[1] == 0.0
        n_ref = len(row["ref_command_units"])
        if row is rescored["per_step"][0] and n_ref > 1:
            assert 0.0 < per_sample[2] < 1.0  # one of n reference units: a partial answer
    agg = rescored["aggregate"]
    passes = [sum(f >= 0.5 for f in per_sample) for per_sample in f1s]
    assert agg["mean_f1_over_samples"] == round(fmean(fmean(f) for f in f1s), 4)
    assert agg["f1_std_mean"] == round(fmean(pstdev(f) for f in f1s), 4)
    for k in (1, 2, 3):
        assert agg["pass_at_k"][str(k)] == round(fmean(pass_at_k(3, c, k) for c in passes), 4)
    assert agg["pass_at_k"]["3"] == 1.0 and agg["pass_at_k"]["1"] == round(fmean(c / 3 for c in passes), 4)


def test_n1_and_no_samples_reproduce_todays_file(tmp_path, tiny_model_dir):
    """`--samples 1` writes the same file as no --samples (byte-for-byte apart from timings)."""
    plain = lab_replay(tmp_path, tiny_model_dir, "plain")
    one = lab_replay(tmp_path, tiny_model_dir, "one", "--samples", "1")
    a, b = read_result_file(plain["path"]), read_result_file(one["path"])
    assert "samples" not in json.dumps(list(a["aggregate"])) and all("samples" not in r for r in a["per_step"])
    for key in ("model", "model_short", "run_name"):  # the run names differ on purpose
        a[key] = b[key] = "x"
    left = json.dumps(without_timings(a), ensure_ascii=False, indent=1)
    right = json.dumps(without_timings(b), ensure_ascii=False, indent=1)
    assert left == right
    assert "samples/step" not in one["stdout"]


def test_bad_samples_values_are_one_line_errors(tmp_path, tiny_model_dir):
    for extra, needle in ((["--samples", "0"], "--samples"), (["--pass-threshold", "1.5"], "--pass-threshold")):
        proc = subprocess.run(
            [sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--engine", "reference",
             "--out", str(tmp_path), *extra], capture_output=True, text=True, cwd=REPO, timeout=120)
        assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr


def test_store_round_trip_of_samples(sampled, tmp_path):
    from lab.store.opening import open_store

    _, result = sampled
    results = tmp_path / "results"
    results.mkdir()
    (results / "s3.json").write_text(json.dumps(result))
    with open_store(tmp_path / "lab.duckdb", results) as store:
        run_id = store.scalar("SELECT run_id FROM runs")
        rows = store.dicts("SELECT * FROM samples ORDER BY step_key, sample")
        stats = {r["step_key"]: r for r in store.dicts("SELECT * FROM sample_stats")}
        assert "samples" not in (store.scalar("SELECT extra_json FROM steps LIMIT 1") or "")
    assert len(rows) == 3 * len(result["per_step"]) and {r["run_id"] for r in rows} == {run_id}
    by_key = {f"{r['task_id']}/{r['step_idx']}": r for r in result["per_step"]}
    for row in rows:
        sample = by_key[row["step_key"]]["samples"][row["sample"]]
        for key in ("seed", "raw_output", "command_f1", "command_precision", "command_recall", "valid_json"):
            assert row[key] == sample[key], key
        assert list(row["pred_command_units"]) == sample["pred_command_units"]
    for key, row in by_key.items():
        f1s = [s["command_f1"] for s in row["samples"]]
        st = stats[key]
        assert (st["n_samples"], st["f1_min"], st["f1_max"]) == (3, min(f1s), max(f1s))
        assert st["f1_spread"] == round(max(f1s) - min(f1s), 4) and st["f1_mean"] == round(fmean(f1s), 4)
        assert st["n_distinct"] == len({tuple(s["pred_command_units"]) for s in row["samples"]})


def test_pass_at_k_matches_counting_every_draw():
    """The estimator equals the share of k-subsets of the n samples that contain a pass."""
    for n in range(1, 7):
        for c in range(n + 1):
            outcomes = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                draws = list(combinations(outcomes, k))
                assert pass_at_k(n, c, k) == pytest.approx(sum(any(d) for d in draws) / len(draws))
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_collapse_answers_most_frequent_first():
    samples = [
        {"sample": 0, "pred_command_units": ["ls"], "command_f1": 0.5, "raw_output": "a"},
        {"sample": 1, "pred_command_units": ["cd /app"], "command_f1": 1.0, "raw_output": "b"},
        {"sample": 2, "pred_command_units": ["ls"], "command_f1": 0.5, "raw_output": "c"},
        {"sample": 3, "pred_command_units": ["ls"], "command_f1": 0.5, "raw_output": "a"},
        {"sample": 4, "pred_command_units": [], "command_f1": 0.0, "raw_output": "junk"},
    ]
    groups = collapse_answers(samples)
    assert [(g.units, g.count, g.samples, g.raw_variants) for g in groups] == [
        (["ls"], 3, [0, 2, 3], 2), (["cd /app"], 1, [1], 1), ([], 1, [4], 1)]


def test_sampled_replay_resumes_and_refuses_other_n(tmp_path):
    """An interrupted `--samples 3` run resumes with its samples; a resume with another N is refused."""
    import threading

    from lab.data import load_replay
    from lab.engines import create_engine
    from lab.errors import LabError
    from lab.runs.replay import ReplayConfig, replay

    steps = load_replay(EXCERPT, mode="corrected").steps
    engine = create_engine("reference")
    engine.load()
    stop = threading.Event()
    config = ReplayConfig(out_dir=tmp_path, chunk_size=4, run_name="r", samples=3)
    with pytest.raises(InterruptedError):
        replay(engine, steps, config, progress=lambda done, total, agg: done >= 4 and stop.set(), stop=stop)
    config.resume, config.samples = True, 2
    with pytest.raises(LabError, match="different samples"):
        replay(engine, steps, config)
    config.samples = 3
    result = read_result_file(replay(engine, steps, config))
    assert [f"{r['task_id']}/{r['step_idx']}" for r in result["per_step"]] == [s.key for s in steps]
    assert all([s["seed"] for s in r["samples"]] == [0, 1, 2] for r in result["per_step"])
    agg = result["aggregate"]
    assert agg["mean_f1_over_samples"] == 1.0 and agg["f1_std_mean"] == 0.0 and agg["pass_at_k"] == {
        "1": 1.0, "2": 1.0, "3": 1.0}
