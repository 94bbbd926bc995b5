"""Engines, Batch and Results tabs: their handlers on a real lab (excerpt replay, DuckDB file, shipped CSVs)."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from lab.settings import Settings
from tests.paths import EXCERPT
from tests.helpers_store import make_results_dir
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A lab over a tmp results folder (shipped CSVs + two stored runs), reference + one stored engine."""
    from lab.serve import create_context
    from lab.ui.app import build_app

    root = tmp_path_factory.mktemp("tabs")
    results = make_results_dir(root)
    runs = results / "runs"
    write_stored_run(runs / "altered.json", "altered")
    write_stored_run(runs / "second.json", "second", offset=1)
    settings = Settings(results_dir=results, runs_dir=runs, db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, ["reference", f"stored:{runs / 'altered.json'}"])
    ctx.pool.wait()
    demo = build_app(ctx)
    yield ctx, demo
    ctx.pool.close_all()
    ctx.store.close()


# --- Engines -----------------------------------------------------------------------------------
def test_engines_add_fail_unload(lab):
    from lab.ui.engines.tab import add_engine_action, engine_status, unload_engine_action

    ctx, _ = lab
    states = {e.name: e.state for e in ctx.engine_entries()}
    assert states == {"reference": "ready", "altered": "ready"}

    bad = add_engine_action(ctx, "nosuchkind:whatever")
    assert not bad.ok and "nosuchkind" in bad.message and "Traceback" not in bad.message
    empty = add_engine_action(ctx, "   ")
    assert not empty.ok and "SPEC" in empty.message

    missing = Path(ctx.settings.runs_dir) / "missing.json"
    added = add_engine_action(ctx, f"stored:{missing}")
    assert added.ok, added.message
    ctx.pool.wait()
    entries = {e.name: e for e in ctx.engine_entries()}
    assert entries["missing"].state == "failed" and "missing.json" in entries["missing"].error
    assert entries["reference"].state == entries["altered"].state == "ready"  # the failure stays with it
    html, names, loading = engine_status(ctx)
    assert not loading and "failed" in html and "no such result file" in html
    assert 'class="lab-state-ready"' in html and "none" in html  # device column of the reference engine

    assert unload_engine_action(ctx, "missing").ok
    assert "missing" not in engine_status(ctx)[1]
    gone = unload_engine_action(ctx, "missing")
    assert not gone.ok and "missing" in gone.message
    assert not unload_engine_action(ctx, None).ok


def test_public_mode_refuses_model_engines(tmp_path, monkeypatch):
    from lab.serve import create_context
    from lab.ui.engines.tab import add_engine_action, loading_policy_html

    monkeypatch.delenv("LAB_ALLOW_ENGINES", raising=False)
    settings = Settings(results_dir=tmp_path / "results", db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "c",
                        replay_path=str(EXCERPT), public=True)
    assert settings.allow_engine_loading is False
    ctx = create_context(settings, open_db=False)
    try:
        refused = add_engine_action(ctx, "transformers:/models/tiny")
        assert not refused.ok and "disabled" in refused.message and "LAB_ALLOW_ENGINES=1" in refused.message
        outside = add_engine_action(ctx, f"stored:{tmp_path / 'elsewhere.json'}")
        assert not outside.ok and "outside the data folders" in outside.message
        assert add_engine_action(ctx, "reference").ok
        ctx.pool.wait()
        assert [(e.name, e.state) for e in ctx.engine_entries()] == [("reference", "ready")]
        assert "LAB_ALLOW_ENGINES=1" in loading_policy_html(ctx)
    finally:
        ctx.pool.close_all()

    monkeypatch.setenv("LAB_ALLOW_ENGINES", "1")
    assert Settings(results_dir=tmp_path, public=True).allow_engine_loading is True


def test_trust_remote_code_is_not_a_spec_option(lab):
    """trust_remote_code comes from a preset that needs it, never from what a visitor types."""
    from lab.ui.engines.tab import add_engine_action

    refused = add_engine_action(lab[0], "transformers:/models/tiny?trust_remote_code=true")
    assert not refused.ok and "trust_remote_code" in refused.message


# --- Batch -------------------------------------------------------------------------------------
def stored_steps(path: Path) -> list[str]:
    return [f"{r['task_id']}/{r['step_idx']}" for r in json.loads(path.read_text())["per_step"]]


def test_batch_reference_on_one_task_lands_in_runs_and_duckdb(lab):
    from lab.ui.batch.tab import batch_updates, filter_steps, render_aggregate

    ctx, _ = lab
    task = ctx.replay.tasks[0]
    steps = filter_steps(ctx.replay.steps, [task], None, None)
    assert 0 < len(steps) < len(ctx.replay.steps) and {s.task_id for s in steps} == {task}
    snapshots = list(batch_updates(ctx, ["reference"], steps, threading.Event(), run_name="ref-task0"))
    final = snapshots[-1][0]
    assert final.done == final.total == len(steps) and final.state.startswith("done")
    path = Path(final.path)
    assert path.parent == Path(ctx.settings.runs_dir) and path.name == "ref-task0.json"
    assert sorted(stored_steps(path)) == sorted(s.key for s in steps)
    run = ctx.query("SELECT run_id, steps FROM runs WHERE run_id = ?", [final.run_id])
    assert len(run) == 1 and int(run.iloc[0]["steps"]) == len(steps)
    n = ctx.query("SELECT count(*) AS n FROM steps WHERE run_id = ?", [final.run_id]).iloc[0]["n"]
    assert int(n) == len(steps)
    flagged = ctx.query("SELECT count(*) AS n FROM step_flags WHERE run_id = ?", [final.run_id]).iloc[0]["n"]
    assert int(flagged) == len(steps), "a new run is ready for triage filters at once"
    html = render_aggregate(snapshots[-1])
    assert '<td data-field="f1">1.0000</td>' in html and '<td data-field="score">100.00</td>' in html
    assert f"{len(steps)}/{len(steps)}" in html


def test_batch_interrupt_then_resume_keeps_each_step_once(lab):
    from lab.ui.batch.tab import run_batch

    ctx, _ = lab
    steps = ctx.replay.steps
    stop = threading.Event()

    def stop_after_two(rows):
        if rows[0].done >= 2:
            stop.set()

    rows = run_batch(ctx, ["reference"], steps, run_name="ref-resume", stop=stop, on_update=stop_after_two,
                     chunk_size=2)
    assert rows[0].state.startswith("stopped") and 2 <= rows[0].done < len(steps)
    runs = Path(ctx.settings.runs_dir)
    partial = runs / "ref-resume.partial.jsonl"
    assert partial.exists() and not (runs / "ref-resume.json").exists()
    kept = rows[0].done

    seen: list[int] = []
    rows = run_batch(ctx, ["reference"], steps, run_name="ref-resume", stop=threading.Event(),
                     on_update=lambda r: seen.append(r[0].done), chunk_size=2)
    assert rows[0].state.startswith("done") and rows[0].done == len(steps)
    progress = [d for d in seen if d]
    assert progress[0] == kept and 1 not in progress  # resumed from the checkpoint, not from zero
    keys = stored_steps(runs / "ref-resume.json")
    assert len(keys) == len(set(keys)) == len(steps) and not partial.exists()
    n = ctx.query("SELECT count(*) AS n, count(DISTINCT step_key) AS k FROM steps WHERE run_id = ?", [rows[0].run_id])
    assert int(n.iloc[0]["n"]) == int(n.iloc[0]["k"]) == len(steps)


def test_batch_engine_not_ready_is_reported_not_raised(lab):
    from lab.ui.batch.tab import run_batch

    ctx, _ = lab
    rows = run_batch(ctx, ["nobody", "reference"], ctx.replay.steps[:1], run_name=None, stop=threading.Event())
    assert rows[0].state.startswith("failed") and "Engines tab" in rows[0].state
    assert rows[1].state.startswith("done")


# --- Results -----------------------------------------------------------------------------------
def test_leaderboard_scope_filter_sort(lab):
    from lab.ui.batch.tab import run_batch
    from lab.ui.results.tab import count_html, leaderboard_frame

    ctx, _ = lab
    # a whole run of the excerpt made here: the test must not lean on the Batch tests before it, which the fast
    # loop's workers (`-n 2`, tests of one module on either) may run elsewhere or later
    rows = run_batch(ctx, ["reference"], ctx.replay.steps, run_name="ref-whole", stop=threading.Event())
    assert rows[0].state.startswith("done")
    first56 = leaderboard_frame(ctx, True)
    assert len(first56) == 56 and set(first56["source"]) == {"published"}
    everything = leaderboard_frame(ctx, False)
    published = everything[everything["source"] == "published"]
    names = {str(n).split(" [partial ")[0] for n in everything["name"]}
    assert len(published) == 116 and {"altered", "second"} <= names
    # runs on the 14-step excerpt: marked, never bare; partial against their own replay (issue 41), and a whole
    # run of it says it is one of a 14-step replay, not of the 303 steps
    runs = everything[everything["source"] == "run"]
    assert all(("[partial " in n and c < 1) or (n.endswith(" [14-step replay]") and c == 1)
               for n, c in zip(runs["name"], runs["coverage"])), runs[["name", "coverage"]]
    # named by its engine ("reference"), with its file's name beside it where other reference runs exist
    assert any(n in ("reference [14-step replay]", "reference [ref-whole] [14-step replay]") for n in runs["name"]), (
        runs[["name", "coverage"]], ctx.query("SELECT display_name, steps, total_steps, partial, path FROM runs"))
    assert 'data-rows="56"' in count_html(first56, True)

    lfm = leaderboard_frame(ctx, False, "lfm")
    assert 0 < len(lfm) < len(everything) and all("lfm" in n.lower() for n in lfm["name"])
    assert len(leaderboard_frame(ctx, False, "no-such-model-anywhere")) == 0

    by_speed = leaderboard_frame(ctx, True, sort="sec_per_step")
    speeds = [float(v) for v in by_speed["sec_per_step"] if v != ""]
    assert speeds == sorted(speeds) and len(speeds) > 40
    by_score = leaderboard_frame(ctx, True, sort="score")
    scores = [float(v) for v in by_score["score"] if v != ""]
    assert scores == sorted(scores, reverse=True)


def test_every_plot_draws_data(lab):
    from lab.ui.results.tab import draw_plot, plot_registry

    ctx, _ = lab
    names = list(plot_registry())
    assert len(names) >= 5
    for name in names:
        for first56 in (False, True):
            fig = draw_plot(ctx, name, first56)
            points = sum(len(t.x) if getattr(t, "x", None) is not None else len(getattr(t, "y", None) or [])
                         for t in fig.data)
            assert fig.data and points > 0, f"plot {name} (first56={first56}) has no data"


def test_clicking_a_lab_run_opens_it_in_compare(lab):
    from lab.ui.results.tab import leaderboard_frame, selected_run_id

    ctx, demo = lab
    df = leaderboard_frame(ctx, False, "second")
    assert list(df["source"]) == ["run"]
    run_id = selected_run_id(df, [0, 1], list(df.iloc[0]))
    assert run_id and selected_run_id(leaderboard_frame(ctx, True), [0, 1], None) is None  # published row
    out = demo.open_in_compare([run_id], None)
    assert out[0]["selected"] == "compare"
    columns_html = out[4]
    assert 'data-engine="stored:' in columns_html and "second.json" in columns_html
    assert "second" in [e.name for e in ctx.engine_entries()]
    again = demo.open_in_compare([run_id], None)  # a second click does not add a second column
    assert again[4].count("second.json") == columns_html.count("second.json")


def test_compare_shows_tags_of_stored_runs(lab):
    from lab.triage import add_annotation
    from lab.ui.compare.handlers import step_outputs

    ctx, _ = lab
    path = Path(ctx.settings.runs_dir) / "altered.json"
    run_id = ctx.stored_run_id(path)
    assert run_id
    key, other = ctx.step_keys()[3], ctx.step_keys()[4]
    add_annotation(ctx.store, run_id, key, "wrong-dir", note="cd into the wrong folder", author="test")
    shown = step_outputs(ctx, key).columns_html
    column = shown[shown.index(f'data-engine="stored:{path}"'):]
    assert 'class="triage-tag"' in column.split('class="lab-col"')[0] and "wrong-dir" in column
    assert "cd into the wrong folder" in shown
    assert "wrong-dir" not in step_outputs(ctx, other).columns_html


def test_batch_on_a_stored_run_never_overwrites_its_source(lab):
    from lab.ui.batch.tab import run_batch

    ctx, _ = lab
    source = Path(ctx.settings.runs_dir) / "altered.json"
    before = source.read_bytes()
    rows = run_batch(ctx, ["altered"], ctx.replay.steps[:2], stop=threading.Event())
    assert rows[0].state.startswith("done") and Path(rows[0].path).name == "altered-replay.json"
    assert source.read_bytes() == before


def test_startup_messages_say_what_was_loaded(lab, tmp_path):
    from lab.serve import opening_message, startup_report

    ctx, _ = lab
    assert opening_message(Settings(results_dir=tmp_path, db_path=tmp_path / "new.duckdb")).startswith("building")
    assert opening_message(ctx.settings).startswith("opening")
    report = startup_report(ctx)
    runs = int(ctx.query("SELECT count(*) AS n FROM runs").iloc[0]["n"])
    assert report[0].startswith(f"results: {runs} runs with ")
