"""The DuckDB store itself: creation from results/, restarts, schema rebuild, threads, injection safety."""
from __future__ import annotations

import threading

import pytest

from lab.errors import LabError
from lab.store import open_store, schema_version
from lab.store import queries as q
from tests.helpers_store import make_results_dir


@pytest.fixture(scope="module")
def store_paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    return root / "lab.duckdb", make_results_dir(root)


def test_first_open_builds_tables_from_shipped_csvs(store_paths):
    db, results = store_paths
    assert not db.exists()
    with open_store(db, results) as store:
        assert db.exists()
        assert store.scalar("SELECT count(*) FROM leaderboard") == 116
        assert store.scalar("SELECT count(*) FROM leaderboard WHERE in_first_56") == 56
        ranks = store.query("SELECT rank FROM leaderboard WHERE in_first_56 ORDER BY row_no")["rank"].tolist()
        assert ranks == list(range(1, 57))
        assert store.scalar("SELECT count(*) FROM leaderboard WHERE NOT in_first_56 AND rank IS NULL") == 60
        assert store.scalar("SELECT count(*) FROM tblite") == 8
        assert store.scalar("SELECT count(*) FROM legacy_leaderboard") == 31
        assert store.scalar("SELECT count(*) FROM legacy_leaderboard WHERE comparable") == 0
        assert store.scalar("SELECT count(*) FROM leaderboard_groups") == 36
        assert store.scalar("SELECT max(version) FROM schema_version") == schema_version()


def test_published_values_are_typed_and_marked(store_paths):
    db, results = store_paths
    with open_store(db, results) as store:
        top = store.query("SELECT * FROM leaderboard WHERE rank = 1").iloc[0]
        assert top["model_id"] == "LLM-OS-Models/Qwen3.5-2B-Terminal-SFT-2Epoch-FullFT-SameCount"
        assert top["score"] == pytest.approx(39.52) and top["avg_command_f1"] == pytest.approx(0.3952)
        assert top["sec_per_step"] == pytest.approx(0.081) and top["valid_json_pct"] == pytest.approx(82.2)
        assert top["epochs"] == 2 and top["training_method"] == "SFT"
        marked = store.query("SELECT score, score_text FROM leaderboard WHERE score_marked ORDER BY row_no")
        assert marked["score_text"].tolist() == ["48.19*", "42.46*", "40.29*", "~33*"]
        assert marked["score"].tolist() == [48.19, 42.46, 40.29, 33.0]
        # score = 100 x F1 on every row
        assert store.scalar("SELECT count(*) FROM leaderboard WHERE abs(score - 100 * avg_command_f1) > 0.006") == 0
        cli_gym = store.query("SELECT * FROM tblite WHERE model_id = 'allenai/qwen35-9b-cli-gym'").iloc[0]
        assert (cli_gym["tb_lite"], cli_gym["tb_lite_spread"], cli_gym["tb21"], cli_gym["tb21_spread"]) == (50.7, 5.9, 25.1, 1.4)


def test_store_survives_restart_and_keeps_other_tables(store_paths):
    db, results = store_paths
    with open_store(db, results) as store:
        store.execute("CREATE TABLE IF NOT EXISTS notes_test (run_id VARCHAR, note VARCHAR)")
        store.execute("INSERT INTO notes_test VALUES (?, ?)", ["abc", "kept"])
    with open_store(db, results) as store:
        assert store.scalar("SELECT note FROM notes_test WHERE run_id = ?", ["abc"]) == "kept"
        assert store.scalar("SELECT count(*) FROM leaderboard") == 116


def test_older_schema_version_triggers_rebuild(store_paths, tmp_path):
    db, results = store_paths
    ddl = tmp_path / "extra.sql"
    ddl.write_text("CREATE TABLE IF NOT EXISTS extra_marks (step_key VARCHAR);\n", encoding="utf-8")
    with open_store(db, results) as store:
        store.ensure_schema(ddl)
        store.execute("INSERT INTO extra_marks VALUES ('task-000/0')")
        store.execute("DELETE FROM leaderboard WHERE row_no > 10")  # damage that only a rebuild repairs
        store.execute("UPDATE schema_version SET version = version - 1")
    with open_store(db, results) as store:
        assert store.stored_version() == schema_version()
        assert store.scalar("SELECT count(*) FROM leaderboard") == 116
        assert store.scalar("SELECT count(*) FROM extra_marks") == 1  # others' tables survive a rebuild
    with open_store(db, results) as store:  # unchanged version: no rebuild
        store.execute("DELETE FROM leaderboard WHERE row_no = 116")
    with open_store(db, results) as store:
        assert store.scalar("SELECT count(*) FROM leaderboard") == 115
        from lab.store import rebuild

        rebuild(store)
        assert store.scalar("SELECT count(*) FROM leaderboard") == 116


def test_filter_values_never_change_the_sql(store_paths):
    db, results = store_paths
    with open_store(db, results) as store:
        hostile = "x' OR '1'='1'; DROP TABLE leaderboard; --"
        assert q.checkpoint_series(store, hostile).empty
        assert q.slice_pair(store, hostile, hostile).empty
        assert q.step_across_runs(store, hostile, [hostile]).empty
        assert q.run_steps(store, "' OR 1=1 --").empty
        assert store.query("SELECT * FROM leaderboard WHERE model_label = ?", [hostile]).empty
        with pytest.raises(LabError, match="cannot sort"):
            q.leaderboard(store, order="score; DROP TABLE leaderboard")
        with pytest.raises(LabError, match="unknown query"):
            q.run_query(store, "leaderboard; DROP TABLE runs")
        assert store.scalar("SELECT count(*) FROM leaderboard") == 116


def test_queries_from_many_threads(store_paths):
    db, results = store_paths
    with open_store(db, results) as store:
        answers, errors = [], []

        def work() -> None:
            try:
                for _ in range(10):
                    answers.append(len(q.leaderboard(store, first56_only=True, include_runs=False)))
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert answers == [56] * 60


def test_named_query_parameters_are_checked(store_paths):
    db, results = store_paths
    with open_store(db, results) as store:
        with pytest.raises(LabError, match="missing: run_id"):
            store.query(q.query_sql("run_steps"), {})
        first56 = q.leaderboard(store, first56_only=True, include_runs=False)
        assert len(first56) == 56 and first56["score"].is_monotonic_decreasing
        assert len(q.leaderboard(store, first56_only=False, include_runs=False)) == 116
        by_name = q.leaderboard(store, include_runs=False, order="name")
        assert by_name["name"].tolist() == sorted(by_name["name"].tolist())
