"""The store's equiv_f1 columns (not the published score): per step from the stored units, the
working directory from the configured replay, per run the equiv score and the spelling gap."""
import json
import shutil

import pytest

from lab.settings import Settings
from lab.store import import_path, open_store
from tests.paths import EXCERPT, TB2LITE
from tests.helpers_store import make_results_dir, result_from_rows, write_json

PUBLISHED = TB2LITE / "published" / "llada21_flash_transformers_sample10_suffix_len256.json"


@pytest.fixture()
def store(tmp_path):
    results = make_results_dir(tmp_path)
    shutil.copy(PUBLISHED, results / PUBLISHED.name)
    settings = Settings(results_dir=results, db_path=tmp_path / "lab.duckdb", replay_path=str(EXCERPT),
                        cache_dir=tmp_path / "cache")
    with open_store(settings) as s:
        yield s


def test_steps_carry_equiv_metrics_and_the_cwd_used(store):
    rows = store.dicts("SELECT step_key, command_f1, equiv_f1, equiv_precision, equiv_recall, equiv_cwd "
                       "FROM steps ORDER BY ord")
    published = json.loads(PUBLISHED.read_text(encoding="utf-8"))["per_step"]
    assert len(rows) == len(published) == 10
    for row, step in zip(rows, published):
        assert row["command_f1"] == step["command_f1"]  # the harness column is the file's, untouched
        assert row["equiv_f1"] >= row["command_f1"]
        assert 0 <= row["equiv_precision"] <= 1 and 0 <= row["equiv_recall"] <= 1
    first = rows[0]
    # task-000/0: `cd /app/myproject` vs the reference's `cd myproject` on a screen at /app
    assert first["step_key"] == "task-000/0" and first["equiv_cwd"] == "/app"
    assert first["equiv_f1"] > first["command_f1"]


def test_runs_carry_equiv_score_and_spelling_gap(store):
    run = store.dicts("SELECT score, avg_command_f1, avg_equiv_f1, equiv_score, spelling_gap FROM runs")[0]
    mean = store.scalar("SELECT avg(equiv_f1) FROM steps")
    assert run["avg_equiv_f1"] == pytest.approx(mean)
    assert run["equiv_score"] == round(100 * mean, 2)
    assert run["spelling_gap"] == round(run["equiv_score"] - run["score"], 2) > 0
    view = store.dicts("SELECT equiv_score, spelling_gap FROM results_all WHERE source = 'run'")[0]
    assert view == {"equiv_score": run["equiv_score"], "spelling_gap": run["spelling_gap"]}
    assert store.scalar("SELECT count(*) FROM results_all WHERE source = 'published' AND equiv_score IS NOT NULL") == 0


def test_without_a_replay_a_relative_cd_needs_the_replay(tmp_path):
    results = make_results_dir(tmp_path)
    rows = [{"task_id": "task-000", "step_idx": 0, "pred_command_units": ["cd /app/myproject", "ls -la"],
             "ref_command_units": ["cd myproject", "ls -al"], "command_precision": 0.5, "command_recall": 0.5,
             "command_f1": 0.5, "first_cmd_exact": 0.0},
            {"task_id": "task-000", "step_idx": 1, "pred_command_units": ["ls -la"],
             "ref_command_units": ["ls -al"], "command_precision": 0.5, "command_recall": 0.5,
             "command_f1": 0.5, "first_cmd_exact": 0.0}]
    write_json(results / "a.json", result_from_rows(rows, "org/model-a"))
    settings = Settings(results_dir=results, db_path=tmp_path / "lab.duckdb", replay_path=None,
                        cache_dir=tmp_path / "cache")
    with open_store(settings) as s:
        steps = s.dicts("SELECT command_f1, equiv_f1, equiv_cwd, equiv_skipped FROM steps ORDER BY ord")
        run = s.dicts("SELECT equiv_state, equiv_score FROM runs")[0]
    # `cd myproject` cannot be resolved without the screen's cwd: no number (Compare, with the
    # replay, would give another); `ls -la` = `ls -al` needs no screen
    assert steps[0]["equiv_f1"] is None and steps[0]["equiv_skipped"] == "equiv needs the replay"
    assert steps[1]["equiv_cwd"] is None and steps[1]["equiv_f1"] == 1.0 > steps[1]["command_f1"]
    assert run == {"equiv_state": "needs_replay", "equiv_score": None}


def test_reimport_of_a_changed_file_recomputes_equiv(store, tmp_path):
    path = store.results_dir / PUBLISHED.name
    data = json.loads(path.read_text(encoding="utf-8"))
    for step in data["per_step"]:
        step["pred_command_units"] = list(step["ref_command_units"])
        step.update(command_precision=1.0, command_recall=1.0, command_f1=1.0, first_cmd_exact=1.0)
    data.pop("aggregate")
    path.write_text(json.dumps(data), encoding="utf-8")
    report = import_path(store, store.results_dir)
    assert report.ok and len(report.added) == 1
    assert store.scalar("SELECT min(equiv_f1) FROM steps") == 1.0
    assert store.dicts("SELECT equiv_score, spelling_gap FROM runs") == [{"equiv_score": 100.0, "spelling_gap": 0.0}]


def test_triage_filters_by_equiv_f1_and_spelling_gap(store):
    from lab.triage import SliceSpec, refresh_step_flags, slice_steps
    from lab.ui.triage.filters import inputs_from_spec, spec_from_inputs

    refresh_step_flags(store)
    df = store.query("SELECT step_key, command_f1, equiv_f1 FROM steps")
    gapped = set(df[df.equiv_f1 - df.command_f1 >= 0.05].step_key)
    assert gapped  # task-000/0 at least
    listed = slice_steps(store, SliceSpec(spelling_gap_min=0.05, order_by="spelling_gap", descending=True))
    assert set(listed.step_key) == gapped
    assert list(listed.spelling_gap) == sorted(listed.spelling_gap, reverse=True)
    high = slice_steps(store, SliceSpec(equiv_f1_min=0.5, equiv_f1_max=0.9))
    assert set(high.step_key) == set(df[(df.equiv_f1 >= 0.5) & (df.equiv_f1 <= 0.9)].step_key)
    spec = SliceSpec(equiv_f1_min=0.2, spelling_gap_min=0.01)
    assert SliceSpec.from_query(spec.to_query()) == spec
    assert spec_from_inputs(*inputs_from_spec(spec)) == spec
    with pytest.raises(Exception, match="equiv_f1_min"):
        SliceSpec(equiv_f1_min=0.9, equiv_f1_max=0.1).validate()


def test_results_plot_and_columns_show_equiv_next_to_f1(store):
    from lab.store import queries
    from lab.figures.plots import PLOTS

    fig = PLOTS["equiv_vs_f1"](store, False)
    scatter = [t for t in fig.data if t.type == "scatter" and t.mode == "markers"]
    bars = [t for t in fig.data if t.type == "bar"]
    run = store.dicts("SELECT score, equiv_score, spelling_gap FROM runs WHERE steps = 10")[0]
    assert list(scatter[0].x) == [run["score"]] and list(scatter[0].y) == [run["equiv_score"]]
    assert bars[0].x[-1] == run["spelling_gap"]
    assert "not the published score" in fig.layout.title.text
    board = queries.leaderboard(store, order="spelling_gap")
    assert {"equiv_score", "spelling_gap"} <= set(board.columns)
    assert board.iloc[0]["spelling_gap"] == max(r["spelling_gap"] for r in store.dicts("SELECT spelling_gap FROM runs"))
