"""The workspace's store door (`LabContext.store_session`) and what goes through it: a closed store says why in
one line, the block holds the store against the other tabs, and a link's run name once read is kept (a
cachetools LRU map) and answered while the store is busy."""
from __future__ import annotations

import threading

import pytest

from lab.errors import LabError
from lab.settings import Settings
from lab.ui.shell.run_refs import run_of, run_ref
from lab.workspace import LabContext
from tests.helpers_store import make_results_dir, result_from_rows, write_json

ROWS = [{"task_id": "task-000", "step_idx": i, "pred_command_units": ["ls -la"], "ref_command_units": ["ls -al"],
         "command_precision": 0.5, "command_recall": 0.5, "command_f1": 0.5, "first_cmd_exact": 0.0} for i in range(2)]


def settings_in(root) -> Settings:
    results = make_results_dir(root)
    return Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                    cache_dir=root / "cache", replay_path=None)


@pytest.fixture()
def ctx(tmp_path) -> LabContext:
    settings = settings_in(tmp_path)
    write_json(settings.results_dir / "a.json", result_from_rows(ROWS, "org/model-a"))
    lab = LabContext(settings)
    lab.open_store()
    assert lab.store is not None, lab.store_error
    return lab


def test_a_closed_store_says_why_in_one_line(tmp_path):
    lab = LabContext(settings_in(tmp_path), store_error="the results database is locked by another lab")
    with pytest.raises(LabError, match="^the results database is locked by another lab$"):
        with lab.store_session():
            pass
    with pytest.raises(LabError, match="locked by another lab"):
        run_of(lab, "model-a")
    assert run_ref(lab, "abc123") == "abc123"  # a link still names the run, by its id
    with pytest.raises(LabError, match="^the results database is not open$"):
        LabContext(settings_in(tmp_path / "other")).query("SELECT 1")


def test_the_session_holds_the_store_against_other_readers(ctx):
    order: list[str] = []

    def other_tab() -> None:
        ctx.query("SELECT count(*) FROM runs")
        order.append("other tab read")

    with ctx.store_session() as store:
        assert store is ctx.store
        reader = threading.Thread(target=other_tab)
        reader.start()
        reader.join(timeout=0.5)
        assert reader.is_alive()  # waits for the block
        order.append("block done")
    reader.join(timeout=30)
    assert order == ["block done", "other tab read"]


def test_a_runs_link_name_is_kept_and_answered_while_the_store_is_busy(ctx):
    run_id = str(ctx.query("SELECT run_id FROM runs")["run_id"][0])
    name = str(ctx.query("SELECT display_name FROM runs")["display_name"][0])
    assert run_ref(ctx, run_id) == name and run_of(ctx, name) == run_id
    answers: list[str] = []
    with ctx.store_session():  # another tab holds the store: the name kept answers without it
        looker = threading.Thread(target=lambda: answers.append(run_ref(ctx, run_id)))
        looker.start()
        looker.join(timeout=30)
        assert not looker.is_alive()
    assert answers == [name]
