"""equiv_f1 filled after the import (issue 17: imports as fast as before equiv_f1).

Real DuckDB files and real processes: an import leaves the run's equiv columns pending; the fill
gives exactly what the import computed before (lab.store.equiv_columns on the file's steps); two
processes never fill one run twice; a process killed mid-fill leaves the run pending, and the
next opening fills it; the app's tables and plots say "equiv pending" meanwhile.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from bench.synthetic import make_results
from lab.resultfiles.files import scorer_for
from lab.settings import Settings
from lab.store import import_path, open_store, run_id_of
from lab.scoring.aggregate import aggregate_scores
from lab.store.equiv_columns import replay_equiv_contexts, run_equiv_fields, with_equiv_columns
from lab.store.equiv_fill import fill_pending, pending_run_ids
from lab.store.records import steps_table
from tests.paths import EXCERPT, REPO, TB2LITE
from tests.helpers_store import make_results_dir, write_json

PUBLISHED = TB2LITE / "published" / "llada21_flash_transformers_sample10_suffix_len256.json"
EQUIV_STEP = ("equiv_precision", "equiv_recall", "equiv_f1", "equiv_cwd", "equiv_skipped")
EQUIV_RUN = ("avg_equiv_f1", "equiv_score", "spelling_gap")
# filled: done, or needs_replay for the synthetic runs (steps the excerpt lacks with a relative `cd`)
FILLED = {"done", "needs_replay"}

pytestmark = pytest.mark.skipif(not PUBLISHED.exists(), reason=f"published file missing at {PUBLISHED}")


def _settings(tmp_path: Path) -> Settings:
    return Settings(results_dir=tmp_path / "results", db_path=tmp_path / "lab.duckdb", replay_path=str(EXCERPT),
                    cache_dir=tmp_path / "cache")


@pytest.fixture()
def incoming(tmp_path) -> Path:
    """The published 10-step file and four synthetic 60-step runs, outside the results folder."""
    make_results_dir(tmp_path)
    folder = tmp_path / "incoming"
    folder.mkdir()
    shutil.copy(PUBLISHED, folder / PUBLISHED.name)
    for i, result in enumerate(make_results(n_runs=4, n_steps=60, seed=7)):
        write_json(folder / f"synthetic{i}.json", result)
    return folder


def expected_equiv(folder: Path, contexts: dict) -> dict[str, dict]:
    """run_id -> {"steps": {step_key: equiv columns}, "run": equiv fields}: the synchronous
    computation the importer did before the fill existed, straight from the files."""
    out = {}
    for path in sorted(folder.glob("*.json")):
        content = path.read_bytes()
        result = json.loads(content)
        run_id = run_id_of(content)
        table = with_equiv_columns(steps_table(run_id, result["per_step"], path.name), contexts, scorer_for(result))
        steps = {r["step_key"]: {k: r[k] for k in EQUIV_STEP} for r in table.to_pylist()}
        aggregate = result.get("aggregate") or aggregate_scores(result["per_step"], scorer_for(result))
        out[run_id] = {"steps": steps, "run": run_equiv_fields(table, round(100 * aggregate["avg_command_f1"], 2))}
    return out


def stored_equiv(con) -> dict[str, dict]:
    """The same shape read from a store (a duckdb connection or cursor)."""
    out = {}
    for run_id, *fields in con.execute(f"SELECT run_id, {', '.join(EQUIV_RUN)} FROM runs").fetchall():
        rows = con.execute(f"SELECT step_key, {', '.join(EQUIV_STEP)} FROM steps WHERE run_id = ?", [run_id]).fetchall()
        out[run_id] = {"steps": {r[0]: dict(zip(EQUIV_STEP, r[1:])) for r in rows}, "run": dict(zip(EQUIV_RUN, fields))}
    return out


def states(db: Path) -> dict[str, str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("SELECT run_id, equiv_state FROM runs").fetchall())
    finally:
        con.close()


def test_pending_after_import_then_the_fill_gives_exactly_the_synchronous_values(tmp_path, incoming):
    with open_store(_settings(tmp_path), defer_equiv=True) as store:
        report = import_path(store, incoming)
        assert report.ok and len(report.added) == 5
        assert store.rows("SELECT DISTINCT equiv_state FROM runs") == [("pending",)]
        assert store.scalar("SELECT count(*) FROM steps WHERE equiv_f1 IS NOT NULL OR equiv_cwd IS NOT NULL") == 0
        assert store.scalar("SELECT count(*) FROM results_all WHERE source = 'run' AND equiv_score IS NOT NULL") == 0
        harness = store.query("SELECT run_id, step_key, command_f1 FROM steps ORDER BY run_id, step_key")
        assert len(pending_run_ids(store)) == 5
        assert fill_pending(store) == 5
        assert fill_pending(store) == 0  # nothing left: nothing done twice
        # done, or needs_replay: synthetic steps the excerpt lacks, with a relative `cd` (no number for them)
        assert set(store.rows("SELECT DISTINCT equiv_state FROM runs")) <= {("done",), ("needs_replay",)}
        with store.connector.cursor() as cur:
            got = stored_equiv(cur)
        assert harness.equals(store.query("SELECT run_id, step_key, command_f1 FROM steps ORDER BY run_id, step_key"))
        contexts = store.equiv_contexts
    assert contexts  # the excerpt gives working directories (`cd` targets are resolved)
    want = expected_equiv(incoming, contexts)
    assert got == want  # exactly: same floats, same cwd, per step and per run
    assert any((s["equiv_f1"] or 0) > 0 for r in got.values() for s in r["steps"].values())


def test_a_cli_import_fills_before_it_exits_and_a_second_process_does_not_refill(tmp_path, incoming):
    settings = _settings(tmp_path)
    open_store(settings).close()
    env = {**os.environ, "LAB_REPLAY": str(EXCERPT), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "lab", "results", "--results", str(settings.results_dir), "--db",
                          str(settings.db_path), "import", str(incoming)], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and "5 added" in out.stdout, out.stdout + out.stderr
    assert set(states(settings.db_path).values()) <= FILLED  # the CLI did not leave them pending
    con = duckdb.connect(str(settings.db_path), read_only=True)
    before = stored_equiv(con)
    con.close()
    code = textwrap.dedent(f"""
        import lab.store.equiv_fill as fill
        from lab.settings import Settings
        from lab.store import open_store
        calls = []
        real = fill.with_equiv_columns
        fill.with_equiv_columns = lambda *a, **k: calls.append(1) or real(*a, **k)
        open_store(Settings(results_dir={str(settings.results_dir)!r}, db_path={str(settings.db_path)!r},
                            replay_path={str(EXCERPT)!r})).close()
        print("computed", len(calls))
    """)
    second = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and second.stdout.split() == ["computed", "0"], second.stdout + second.stderr
    con = duckdb.connect(str(settings.db_path), read_only=True)
    assert stored_equiv(con) == before == expected_equiv(incoming, replay_equiv_contexts(settings))
    con.close()


FILL_SCRIPT = """
import sys
from lab.settings import Settings
from lab.store import open_store
from lab.store.equiv_fill import fill_pending
store = open_store(Settings(results_dir=sys.argv[1], db_path=sys.argv[2], replay_path=sys.argv[3]), sync=False,
                   defer_equiv=True)
print("filled", fill_pending(store), flush=True)
store.close()
"""


def test_two_processes_filling_at_once_fill_each_run_once(tmp_path):
    settings = _settings(tmp_path)
    make_results_dir(tmp_path)
    folder = tmp_path / "incoming"
    for i, result in enumerate(make_results(n_runs=6, n_steps=303, seed=3)):
        write_json(folder / f"run{i}.json", result)
    with open_store(settings, defer_equiv=True) as store:
        assert import_path(store, folder).ok
    assert set(states(settings.db_path).values()) == {"pending"}
    args = [str(settings.results_dir), str(settings.db_path), str(EXCERPT)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", FILL_SCRIPT, *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    counts = [int(out.split()[-1]) for out, _ in outs]
    assert sum(counts) == 6, counts  # every run filled exactly once between the two
    assert set(states(settings.db_path).values()) <= FILLED
    con = duckdb.connect(str(settings.db_path), read_only=True)
    got = stored_equiv(con)
    con.close()
    assert got == expected_equiv(folder, replay_equiv_contexts(settings))


KILLED_SCRIPT = """
import sys, time
import lab.store.equiv_fill as fill
from lab.settings import Settings
from lab.store import open_store

real = fill._write_steps
def write_then_hang(tx, run_id, filled):
    real(tx, run_id, filled)  # the steps' equiv columns are written, the transaction not committed
    print("mid-fill", flush=True)
    time.sleep(120)
fill._write_steps = write_then_hang
store = open_store(Settings(results_dir=sys.argv[1], db_path=sys.argv[2], replay_path=sys.argv[3]), sync=False,
                   defer_equiv=True)
fill.fill_pending(store)
"""


def test_kill_9_mid_fill_leaves_the_run_pending_and_the_next_opening_fills_it(tmp_path, incoming):
    settings = _settings(tmp_path)
    with open_store(settings, defer_equiv=True) as store:
        assert import_path(store, incoming).ok
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_SCRIPT, str(settings.results_dir), str(settings.db_path),
                             str(EXCERPT)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "mid-fill", proc.stderr.read() if proc.poll() is not None else ""
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert set(states(settings.db_path).values()) == {"pending"}  # nothing half filled and marked done
    con = duckdb.connect(str(settings.db_path), read_only=True)
    assert con.execute("SELECT count(*) FROM steps WHERE equiv_f1 IS NOT NULL").fetchall() == [(0,)]
    con.close()
    with open_store(settings) as store:  # any later opening (not deferred) fills what was left
        assert {r[0] for r in store.rows("SELECT DISTINCT equiv_state FROM runs")} <= FILLED
        with store.connector.cursor() as cur:
            got = stored_equiv(cur)
        contexts = store.equiv_contexts
    assert got == expected_equiv(incoming, contexts)


def test_a_store_of_schema_4_opens_and_gets_its_equiv_columns(tmp_path):
    settings = _settings(tmp_path)
    results = make_results_dir(tmp_path)
    shutil.copy(PUBLISHED, results / PUBLISHED.name)
    open_store(settings).close()
    con = duckdb.connect(str(settings.db_path))
    con.execute("ALTER TABLE runs DROP COLUMN equiv_state")  # (the view results_all goes first)
    con.close()
    con = duckdb.connect(str(settings.db_path))
    con.execute("UPDATE schema_version SET version = 4")
    con.close()
    with open_store(settings) as store:  # rebuilt from results/ (the schema-version migration)
        from lab.store import schema_version

        assert store.scalar("SELECT max(version) FROM schema_version") == schema_version()
        assert store.rows("SELECT equiv_state, equiv_score IS NOT NULL FROM runs") == [("done", True)]


# -- what the app shows meanwhile --------------------------------------------------------------------

@pytest.fixture()
def pending_ctx(tmp_path):
    """A lab context whose store holds the published run with its equiv columns pending (no filler)."""
    from lab.workspace import LabContext

    results = make_results_dir(tmp_path)
    shutil.copy(PUBLISHED, results / PUBLISHED.name)
    store = open_store(_settings(tmp_path), defer_equiv=True)
    ctx = LabContext(settings=_settings(tmp_path), store=store)
    yield ctx
    store.close()


def test_results_table_count_and_plot_say_equiv_pending_then_show_the_values(pending_ctx):
    from lab.ui.results.tab import count_html, draw_plot, leaderboard_frame

    ctx = pending_ctx
    df = leaderboard_frame(ctx, False)
    run = df[df["source"] == "run"].iloc[0]
    assert run["equiv_score"] == run["spelling_gap"] == "equiv pending"
    assert "equiv pending for 1 run" in count_html(df, False)
    fig = draw_plot(ctx, "equiv_vs_f1", False)
    shown = fig.layout.title.text + " ".join(a.text for a in fig.layout.annotations)
    assert "equiv pending" in shown and not [t for t in fig.data if t.type == "bar"]
    sorted_df = leaderboard_frame(ctx, False, sort="spelling_gap")
    assert "equiv pending" in set(sorted_df["spelling_gap"])

    assert fill_pending(ctx.store) == 1
    df = leaderboard_frame(ctx, False)
    run = df[df["source"] == "run"].iloc[0]
    want = ctx.store.dicts("SELECT equiv_score, spelling_gap FROM runs")[0]
    assert (run["equiv_score"], run["spelling_gap"]) == (want["equiv_score"], want["spelling_gap"]) and want["spelling_gap"] > 0
    assert "equiv pending" not in count_html(df, False)
    fig = draw_plot(ctx, "equiv_vs_f1", False)
    assert "equiv pending" not in fig.layout.title.text and [t for t in fig.data if t.type == "bar"]


def test_triage_page_says_equiv_pending_and_which_filters_skip_those_steps(pending_ctx):
    from lab.triage import SliceSpec, refresh_step_flags
    from lab.ui.triage.handlers import slice_page

    ctx = pending_ctx
    refresh_step_flags(ctx.store)  # (the tab does it when it lists its choices)
    df, line, _ = slice_page(ctx, SliceSpec(), 1)
    assert len(df) == 10 and set(df["equiv_f1"]) == set(df["spelling_gap"]) == {"equiv pending"}
    assert "equiv pending for 1 run" in line and "skip" not in line
    _, line, _ = slice_page(ctx, SliceSpec(equiv_f1_min=0.5, order_by="spelling_gap"), 1)
    assert "the equiv filters skip their steps" in line and "the equiv sort puts them last" in line
    fill_pending(ctx.store)
    df, line, _ = slice_page(ctx, SliceSpec(), 1)
    assert "equiv pending" not in line and df["equiv_f1"].map(lambda v: isinstance(v, float)).all()


def test_the_app_context_fills_in_the_background(tmp_path):
    from lab.serve import create_context

    results = make_results_dir(tmp_path)
    shutil.copy(PUBLISHED, results / PUBLISHED.name)
    ctx = create_context(_settings(tmp_path), [])
    try:
        assert ctx.store.defer_equiv and ctx.store.equiv_filler is ctx.equiv_filler
        assert ctx.equiv_filler.wait(120) and ctx.equiv_filler.error is None
        assert ctx.store.rows("SELECT equiv_state, equiv_score IS NOT NULL FROM runs") == [("done", True)]
        write_json(results / "runs" / "late.json", json.loads(PUBLISHED.read_text(encoding="utf-8")) | {"model_short": "late"})
        run_id = ctx.import_run(results / "runs" / "late.json")  # as Batch does: back at once, equiv pending
        assert ctx.store.scalar("SELECT equiv_state FROM runs WHERE run_id = ?", [run_id]) in ("pending", "done")
        assert ctx.equiv_filler.wait(120)
        assert ctx.store.scalar("SELECT equiv_state FROM runs WHERE run_id = ?", [run_id]) == "done"
    finally:
        ctx.equiv_filler.stop()
        ctx.pool.close_all()
        ctx.store.close()


def test_a_run_whose_rules_fail_is_marked_failed_once_and_shown_so(pending_ctx, monkeypatch):
    import lab.store.equiv_fill as fill
    from lab.ui.results.tab import count_html, leaderboard_frame

    def odd_input(*args, **kwargs):
        raise ValueError("a rule met input it cannot handle")

    monkeypatch.setattr(fill, "with_equiv_columns", odd_input)
    ctx = pending_ctx
    assert fill_pending(ctx.store) == 1 and fill_pending(ctx.store) == 0  # marked, never retried in a loop
    assert ctx.store.rows("SELECT equiv_state, equiv_score FROM runs") == [("failed", None)]
    assert ctx.store.scalar("SELECT count(*) FROM steps WHERE equiv_f1 IS NOT NULL") == 0
    df = leaderboard_frame(ctx, False)
    run = df[df["source"] == "run"].iloc[0]
    assert run["equiv_score"] == run["spelling_gap"] == "equiv failed"
    assert "equiv pending" not in count_html(df, False)
