"""One equiv_f1 per step, whatever order the replay became known in (issue 27 item 6): a store
imported without the replay says "equiv needs the replay" for a step whose `cd` is relative (it
stored 0.5189 against Compare's 0.5763 before), and fills it from the replay once one is known
(`results import --replay`, any opening with a replay, the app learning of one), equal to what
Compare computes. Real parts: the CLI as separate processes, a real DuckDB file, the real excerpt
and published run, Compare's real column code and the app's real Results/Triage code."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from lab.settings import Settings
from lab.store import open_store
from lab.store.equiv_fill import fill_pending
from tests.helpers_app import lab_env, run_lab_cli
from tests.paths import EXCERPT, TB2LITE
from tests.helpers_store import make_results_dir

PUBLISHED = TB2LITE / "published" / "llada21_flash_transformers_sample10_suffix_len256.json"
KEY = "task-000/0"  # `cd /app/myproject` against `cd myproject`, the screen at /app
pytestmark = pytest.mark.skipif(not PUBLISHED.exists(), reason=f"published file missing at {PUBLISHED}")


def compare_equiv(path: Path) -> float:
    """Compare's equiv F1 of the stored run's answer to KEY (its column, as the app draws it)."""
    from lab.data import load_replay
    from lab.engines.registry import create_engine
    from lab.runs.pipeline import run_steps
    from lab.ui.compare.step_view import engine_view_from_result

    step = load_replay(str(EXCERPT)).by_key[KEY]
    engine = create_engine(f"stored:{path}")
    engine.load()
    try:
        result = run_steps(engine, [step])[0]
    finally:
        engine.close()
    return engine_view_from_result(engine.spec, engine.name, result).equiv.f1


def stored(db: Path) -> tuple[dict, str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        step = con.execute("SELECT equiv_f1, equiv_cwd, equiv_skipped, command_f1 FROM steps WHERE step_key = ?",
                           [KEY]).fetchone()
        state = con.execute("SELECT equiv_state FROM runs").fetchone()[0]
    finally:
        con.close()
    return dict(zip(("equiv_f1", "equiv_cwd", "equiv_skipped", "command_f1"), step)), state


@pytest.mark.slow
def test_cli_import_without_the_replay_says_so_and_with_it_gives_compares_value(tmp_path):
    results = make_results_dir(tmp_path)
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    path = incoming / PUBLISHED.name
    shutil.copy(PUBLISHED, path)
    db = tmp_path / "lab.duckdb"
    env = {k: v for k, v in lab_env(LAB_CACHE_DIR=str(tmp_path / "cache")).items() if k != "LAB_REPLAY"}
    base = ["results", "--db", str(db), "--results", str(results), "import"]
    out = run_lab_cli([*base, str(path)], env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    step, state = stored(db)
    assert step["equiv_f1"] is None and step["equiv_skipped"] == "equiv needs the replay", step
    assert state == "needs_replay"

    out = run_lab_cli([*base, "--replay", str(EXCERPT), str(path)], env=env)  # the file itself is unchanged
    assert out.returncode == 0 and "unchanged" in out.stdout, out.stdout + out.stderr
    step, state = stored(db)
    want = compare_equiv(path)
    assert step["equiv_f1"] == want > step["command_f1"] and step["equiv_cwd"] == "/app", (step, want)
    assert step["equiv_skipped"] is None and state in ("done", "needs_replay")


@pytest.mark.slow
def test_the_app_fills_from_a_replay_that_becomes_known_and_shows_one_value(tmp_path):
    from lab.triage import SliceSpec, refresh_step_flags
    from lab.workspace import LabContext
    from lab.ui.results.tab import leaderboard_frame
    from lab.ui.triage.handlers import slice_page

    results = make_results_dir(tmp_path)
    shutil.copy(PUBLISHED, results / PUBLISHED.name)
    settings = Settings(results_dir=results, db_path=tmp_path / "lab.duckdb", replay_path=None,
                        cache_dir=tmp_path / "cache")
    store = open_store(settings, defer_equiv=True)
    ctx = LabContext(settings=settings, store=store)
    try:
        fill_pending(store)
        refresh_step_flags(store)
        run = leaderboard_frame(ctx, False).query("source == 'run'").iloc[0]
        assert run["equiv_score"] == "equiv needs the replay"
        page, _, _ = slice_page(ctx, SliceSpec(), 1)
        assert page.set_index("step_key").loc[KEY, "equiv_f1"] == "equiv needs the replay"

        settings.replay_path = str(EXCERPT)  # the replay becomes known (as after a download)
        ctx.replay_known()
        assert store.scalar("SELECT equiv_state FROM runs") == "pending"
        fill_pending(store)
        want = compare_equiv(results / PUBLISHED.name)
        page, _, _ = slice_page(ctx, SliceSpec(), 1)
        assert page.set_index("step_key").loc[KEY, "equiv_f1"] == want
        assert store.scalar("SELECT equiv_f1 FROM steps WHERE step_key = ?", [KEY]) == want
    finally:
        store.close()

    with open_store(settings) as again:  # a restart with the replay changes nothing: one value
        assert again.scalar("SELECT equiv_f1 FROM steps WHERE step_key = ?", [KEY]) == want


@pytest.mark.slow
def test_a_run_another_process_filled_without_the_replay_is_filled_again_by_the_app(tmp_path):
    """Issue 41: a lab started with --replay showed "equiv needs the replay" on the rows of a run a terminal
    imported meanwhile (that process had no replay). Its Triage view has the app's filler compute them again
    with the replay; a `python -m lab replay --replay …` into the lab's runs folder fills them with it at once."""
    from lab.triage import SliceSpec
    from lab.serve import create_context
    from lab.ui.shell.equiv_status import NOT_IN_REPLAY
    from lab.ui.triage.handlers import slice_page

    results = make_results_dir(tmp_path)
    settings = Settings(results_dir=results, db_path=results / "lab.duckdb", replay_path=str(EXCERPT),
                        cache_dir=tmp_path / "cache")
    ctx = create_context(settings)
    env = {k: v for k, v in lab_env(LAB_CACHE_DIR=str(tmp_path / "cache")).items() if k != "LAB_REPLAY"}
    try:
        incoming = tmp_path / "incoming" / PUBLISHED.name
        incoming.parent.mkdir()
        shutil.copy(PUBLISHED, incoming)
        out = run_lab_cli(["results", "--db", str(settings.db_path), "--results", str(results), "import",
                           str(incoming)], env=env)
        assert out.returncode == 0, out.stdout + out.stderr
        run = ctx.query("SELECT run_id FROM runs WHERE path LIKE '%incoming%' OR path LIKE '%llada%'")["run_id"][0]
        assert ctx.query("SELECT equiv_skipped FROM steps WHERE step_key = ?", [KEY]).iloc[0, 0] is not None
        page, _, _ = slice_page(ctx, SliceSpec(run_ids=[run]), 1)
        cells = page.set_index("step_key")["equiv_f1"]
        assert cells[KEY] == "equiv pending"  # in this lab's replay: being filled again, not "needs the replay"
        assert not cells.astype(str).str.startswith("equiv needs").any()
        assert ctx.equiv_filler.wait(120)
        page, _, _ = slice_page(ctx, SliceSpec(run_ids=[run]), 1)
        assert page.set_index("step_key").loc[KEY, "equiv_f1"] == compare_equiv(incoming)

        # a CLI replay with --replay into the lab's runs folder: filled with that replay by the CLI itself
        done = run_lab_cli(["replay", "--replay", str(EXCERPT), "--engine", "reference", "--name", "cli-ref",
                            "--limit", "1"], env={**env, "LAB_RESULTS": str(results)})
        assert done.returncode == 0 and "imported into the results database" in done.stdout, done.stderr
        cli = ctx.query("SELECT s.equiv_f1, s.equiv_skipped FROM steps s JOIN runs r USING (run_id) "
                        "WHERE r.path = 'runs/cli-ref.json' AND s.step_key = ?", [KEY])
        assert cli.iloc[0]["equiv_f1"] == 1.0 and cli.iloc[0]["equiv_skipped"] is None
        assert NOT_IN_REPLAY.startswith("equiv needs this step's screen")
    finally:
        ctx.pool.close_all()
        ctx.store.close()
