"""Importing result JSON files: runs and per-step rows, idempotence, broken files, legacy units."""
from __future__ import annotations

import json

import pytest

from lab.store import import_path, open_store, run_id_of
from lab.store import queries as q
from tests.helpers_store import golden_rows, make_results_dir, result_from_rows, write_json


@pytest.fixture()
def store(tmp_path):
    with open_store(tmp_path / "lab.duckdb", make_results_dir(tmp_path)) as s:
        yield s


@pytest.fixture()
def golden_files(tmp_path, shared_dir):
    corrected = golden_rows(shared_dir, "corrected_303")
    legacy = golden_rows(shared_dir, "legacy_386")
    folder = tmp_path / "incoming"
    c = write_json(folder / "corrected.json", result_from_rows(
        corrected, "LLM-OS-Models/LFM2.5-8B-A1B-Terminal-ToolBench-Full-SFT-1Epoch",
        prompt_template={"template_status": "chat_template", "rank_eligible": True}))
    legacy_rows = [dict(r, ref_command_units=repr(r["ref_command_units"])) for r in legacy]  # Python-repr units
    lg = write_json(folder / "nested" / "legacy.json", result_from_rows(legacy_rows, "/models/Qwen3.5-2B/checkpoint-40"))
    return folder, c, lg, corrected, legacy


def test_import_folder_adds_runs_and_steps(store, golden_files):
    folder, c, lg, corrected, legacy = golden_files
    report = import_path(store, folder)
    assert report.ok and sorted(report.added) == sorted([str(c), str(lg)])
    runs = store.query("SELECT * FROM runs ORDER BY display_name").set_index("path")
    run_c = runs.loc[str(c.resolve())]
    assert run_c["run_id"] == run_id_of(c.read_bytes())
    assert run_c["display_name"] == "LLM-OS-Models/LFM2.5-8B-A1B-Terminal-ToolBench-Full-SFT-1Epoch"
    assert run_c["scoring_version"] == "corrected_303" and run_c["steps"] == len(corrected)
    assert run_c["template_status"] == "chat_template" and bool(run_c["rank_eligible"])
    # facts joined from the published leaderboard row of that model id
    assert (run_c["family"], run_c["params_b"], run_c["active_params_b"], run_c["epochs"]) == ("LFM", 8.0, 1.0, 1)
    expected_f1 = round(sum(r["command_f1"] for r in corrected) / len(corrected), 4)
    assert run_c["avg_command_f1"] == pytest.approx(expected_f1)
    assert run_c["score"] == pytest.approx(round(100 * expected_f1, 2))
    run_l = runs.loc[str(lg.resolve())]
    assert run_l["display_name"] == "Qwen3.5-2B (checkpoint-40)"
    assert run_l["scoring_version"] == "legacy_386" and run_l["template_status"] == "unknown"
    assert bool(run_l["rank_eligible"]) and run_l["checkpoint_step"] == 40 and run_l["family"] == "Qwen"

    steps = q.run_steps(store, run_c["run_id"])
    assert len(steps) == len(corrected)
    for stored, row in zip(steps.itertuples(), corrected):
        assert stored.step_key == f"{row['task_id']}/{row['step_idx']}"
        assert list(stored.ref_command_units) == row["ref_command_units"]
        assert list(stored.pred_command_units) == row["pred_command_units"]
        assert stored.command_f1 == row["command_f1"] and stored.pred_preview == row["pred_preview"]
        assert stored.n_ref_units == len(row["ref_command_units"])
    legacy_steps = q.run_steps(store, run_l["run_id"])
    assert [list(u) for u in store.query(
        "SELECT ref_command_units FROM steps WHERE run_id = ? ORDER BY ord", [run_l["run_id"]])["ref_command_units"]
    ] == [r["ref_command_units"] for r in legacy]  # decoded from the Python repr
    assert len(legacy_steps) == len(legacy)
    extra = json.loads(store.scalar("SELECT extra_json FROM steps WHERE run_id = ? AND ord = 0", [run_c["run_id"]]))
    assert extra["source_file"] == corrected[0]["source_file"]


def test_reimport_is_a_no_op(store, golden_files):
    folder, c, *_ = golden_files
    import_path(store, folder)
    before = store.query("SELECT run_id, imported_at FROM runs ORDER BY run_id")
    n_steps = store.scalar("SELECT count(*) FROM steps")
    again = import_path(store, folder)
    assert again.added == [] and len(again.skipped) == 2 and again.ok
    c.touch()  # new mtime, same bytes: still nothing to do
    third = import_path(store, c)
    assert third.added == [] and "same content" in third.skipped[0][1]
    copy = write_json(folder.parent / "copy" / "same.json", json.loads(c.read_text()))
    copy.write_bytes(c.read_bytes())
    assert import_path(store, copy).added == []
    assert store.query("SELECT run_id, imported_at FROM runs ORDER BY run_id").equals(before)
    assert store.scalar("SELECT count(*) FROM steps") == n_steps


def test_changed_file_replaces_its_run(store, golden_files):
    folder, c, *_ = golden_files
    import_path(store, c)
    old_id = store.scalar("SELECT run_id FROM runs")
    data = json.loads(c.read_text())
    data["per_step"] = data["per_step"][:3]
    c.write_text(json.dumps(data))
    assert import_path(store, c).added == [str(c)]
    assert store.scalar("SELECT count(*) FROM runs") == 1
    assert store.scalar("SELECT run_id FROM runs") != old_id
    assert store.scalar("SELECT count(*) FROM steps") == 3


def test_broken_files_are_reported_by_name_and_never_half_imported(store, golden_files, tmp_path):
    folder, c, lg, corrected, _ = golden_files
    bad = tmp_path / "bad"
    not_json = bad / "not_json.json"
    not_json.parent.mkdir(parents=True)
    not_json.write_text('{"model": "x", "per_step": [', encoding="utf-8")
    no_steps = write_json(bad / "no_per_step.json", {"model": "x", "aggregate": {"avg_command_f1": 0.5}})
    rows = [dict(r) for r in corrected]
    rows[-1] = dict(rows[-1], step_idx="not-a-number")  # fails on the last row, after others were converted
    late_bad = write_json(bad / "late_bad_row.json", result_from_rows(rows, "org/model-x"))
    dup = write_json(bad / "duplicate_steps.json", result_from_rows(corrected[:2] + corrected[:1], "org/model-y"))
    report = import_path(store, bad, c)
    failed = dict(report.failed)
    assert set(failed) == {str(not_json), str(no_steps), str(late_bad), str(dup)}
    assert "invalid JSON" in failed[str(not_json)]
    assert "per_step" in failed[str(no_steps)]
    assert "per_step[" in failed[str(late_bad)]
    assert report.added == [str(c)]
    assert store.scalar("SELECT count(*) FROM runs") == 1
    assert store.scalar("SELECT count(DISTINCT run_id) FROM steps") == 1
    assert store.scalar("SELECT count(*) FROM steps") == len(corrected)
    missing = import_path(store, tmp_path / "nowhere")
    assert missing.failed and "no such file" in missing.failed[0][1]


def test_rebuild_imports_result_files_under_results_including_runs(tmp_path, shared_dir):
    results = make_results_dir(tmp_path)
    rows = golden_rows(shared_dir, "corrected_303")
    write_json(results / "runs" / "deep" / "new.json", result_from_rows(rows, "org/Qwen3.5-0.8B-SFT"))
    with open_store(tmp_path / "lab.duckdb", results) as store:
        paths = store.query("SELECT path FROM runs")["path"].tolist()
        assert paths == ["runs/deep/new.json"]  # relative to the results folder
    write_json(results / "runs" / "later.json", result_from_rows(rows[:4], "org/Qwen3.5-0.8B-SFT-2"))
    with open_store(tmp_path / "lab.duckdb", results) as store:  # reopening picks up new files
        assert store.scalar("SELECT count(*) FROM runs") == 2
    (tmp_path / "lab.duckdb").unlink()
    with open_store(tmp_path / "lab.duckdb", results) as store:  # a lost DB file is rebuilt
        assert store.scalar("SELECT count(*) FROM runs") == 2
        assert store.scalar("SELECT count(*) FROM leaderboard") == 116


def test_synthetic_runs_and_per_step_queries(store, tmp_path):
    from bench.synthetic import make_results

    results = make_results(n_runs=3, n_steps=40, seed=3)
    for i, result in enumerate(results):
        write_json(tmp_path / "syn" / f"run{i}.json", result)
    assert import_path(store, tmp_path / "syn").ok
    runs = q.runs(store, order="score")
    assert len(runs) == 3 and runs["score"].is_monotonic_decreasing
    a, b = runs["run_id"][0], runs["run_id"][2]
    sliced = q.slice_pair(store, a, b, 0.8, 0.2)
    steps_a = q.run_steps(store, a).set_index("step_key")["command_f1"]
    steps_b = q.run_steps(store, b).set_index("step_key")["command_f1"]
    expected = sorted(k for k in steps_a.index if steps_a[k] >= 0.8 and steps_b[k] < 0.2)
    assert sorted(sliced["step_key"]) == expected
    across = q.step_across_runs(store, steps_a.index[0], [a, b])
    assert set(across["run_id"]) == {a, b}
    buckets = q.by_bucket(store, run_ids=[a], include_published=False)
    f1 = q.run_steps(store, a).groupby("bucket")["command_f1"].mean().round(4)
    assert dict(zip(buckets["bucket"], buckets["avg_command_f1"])) == pytest.approx(f1.to_dict())
