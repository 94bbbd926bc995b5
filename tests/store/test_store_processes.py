"""Several processes share one results store (issue 9, defect 14).

Real processes only: the lab (`python app.py`, a real Gradio server on 127.0.0.1), the CLI
(`python -m lab results …`, `python -m lab replay …`), a second lab on the same folder, and a
real Chromium looking at both. Before the fix the first app held the DuckDB file for its whole
life: the CLI got "Could not set lock on file" and the second app started with Results and
Triage dead.
"""
from __future__ import annotations

import time

import pytest

from lab.errors import LabError
from lab.settings import Settings
from lab.store import open_store
from tests.helpers_app import app_process, lab_env, run_lab_cli
from tests.paths import EXCERPT
from tests.browser.test_browser_compare import ARGS, CHROMIUM
from tests.helpers_store import make_results_dir
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.mark.slow  # about 4 s on two cores: the full run, not the fast loop
def test_store_releases_the_file_between_operations(tmp_path):
    """The store opens the file per burst of work and closes it when idle; reads are cached until
    any process changes the file; another process meanwhile gets its turn."""
    results = make_results_dir(tmp_path)
    settings = Settings(results_dir=results, db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "c")
    store = open_store(settings)
    store.connector.linger = 0.3  # (default 10 s)
    deadline = time.monotonic() + 5
    while store.connector.is_open and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not store.connector.is_open  # idle: the lock is released
    first = store.scalar("SELECT count(*) FROM leaderboard")
    opens = store.connector.opens
    assert store.scalar("SELECT count(*) FROM leaderboard") == first and store.connector.opens == opens  # cached
    store.close()
    out = run_lab_cli(["results", "--results", str(results), "--db", str(settings.db_path), "sql",
                       "SELECT count(*) AS n FROM runs"])
    assert out.returncode == 0, out.stderr
    write_stored_run(results / "runs" / "late.json", "late")
    out = run_lab_cli(["results", "--results", str(results), "--db", str(settings.db_path), "import",
                       str(results / "runs" / "late.json")])
    assert out.returncode == 0 and "1 added" in out.stdout, out.stdout + out.stderr
    # another process wrote: this process's cached answer is stale and must not be served
    assert store.scalar("SELECT count(*) FROM runs WHERE display_name = 'late'") == 1


def test_busy_store_waits_then_says_so(tmp_path):
    """A process that cannot get the file within its timeout gets a one-line LabError (no
    traceback); a patient one waits until the other process lets go."""
    import subprocess
    import sys

    from lab.store.connection import Connector

    results = make_results_dir(tmp_path)
    settings = Settings(results_dir=results, db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "c")
    open_store(settings).close()
    code = ("import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); print('held', flush=True); "
            "time.sleep(6); con.close()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(settings.db_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        quick = Connector(settings.db_path, timeout=0.5)
        with pytest.raises(LabError, match="stayed busy"):
            with quick.cursor():
                pass
        patient = Connector(settings.db_path, timeout=30)
        with patient.cursor() as cur:  # waits for the other process to let go
            assert cur.execute("SELECT count(*) FROM leaderboard").fetchone()[0] == 116
        patient.close()
    finally:
        proc.wait(timeout=30)


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium")
def test_app_cli_replay_and_second_app_share_the_store(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    results = make_results_dir(tmp_path)
    write_stored_run(results / "runs" / "altered.json", "altered")
    env = lab_env(LAB_RESULTS=str(results))
    args = ["--results", str(results), "--replay", str(EXCERPT), "--engine", "reference"]
    with app_process(args, tmp_path / "app1.log", env) as (url1, _):
        # the CLI works on the same store while the app runs
        sql = run_lab_cli(["results", "--results", str(results), "sql", "SELECT display_name FROM runs"], env)
        assert sql.returncode == 0 and "altered" in sql.stdout, sql.stdout + sql.stderr
        # a CLI replay writes its run into results/runs/ and imports it into the shared store
        rep = run_lab_cli(["replay", "--replay", str(EXCERPT), "--engine", "reference", "--limit", "6",
                           "--name", "cli-run"], env)
        assert rep.returncode == 0, rep.stdout + rep.stderr
        assert "imported into the results database as run" in rep.stdout, rep.stdout + rep.stderr
        assert (results / "runs" / "cli-run.json").exists()
        run_id = rep.stdout.rsplit("as run ", 1)[1].split()[0]
        named = run_lab_cli(["results", "--results", str(results), "sql",
                             f"SELECT display_name FROM runs WHERE run_id = '{run_id}'"], env)
        display = named.stdout.splitlines()[1].strip()
        with app_process(args, tmp_path / "app2.log", env) as (url2, _):
            expect.set_options(timeout=30_000)  # two labs and a browser on a small shared machine
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
                for url in (url1, url2):
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    page.set_default_timeout(30_000)
                    page.goto(url)
                    expect(page.locator("#lab-columns")).to_contain_text("reference")
                    page.get_by_role("tab", name="Results").click()
                    expect(page.locator("#lab-lb-count")).to_contain_text("118 rows")  # 116 + 2 runs
                    page.locator("#lab-lb-filter textarea, #lab-lb-filter input").first.fill(display)
                    expect(page.locator("#lab-leaderboard")).to_contain_text(run_id)
                    page.get_by_role("tab", name="Triage").click()
                    expect(page.locator("body")).not_to_contain_text("Results database unavailable")
                    expect(page.locator("body")).not_to_contain_text("not open")
                    page.close()
                browser.close()
        log2 = (tmp_path / "app2.log").read_text(errors="replace")
        assert "results database not open" not in log2 and "Traceback" not in log2, log2[-2000:]
    assert "Traceback" not in (tmp_path / "app1.log").read_text(errors="replace")


def test_an_idle_holder_lets_a_waiting_process_in(tmp_path):
    """A process that holds the file idle (long linger) closes it as soon as another process waits."""
    results = make_results_dir(tmp_path)
    settings = Settings(results_dir=results, db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "c")
    store = open_store(settings)
    store.connector.linger = 120.0
    assert store.scalar("SELECT count(*) FROM legacy_leaderboard") > 0 and store.connector.is_open
    out = run_lab_cli(["results", "--results", str(results), "--db", str(settings.db_path), "sql",
                       "SELECT count(*) AS n FROM leaderboard"], lab_env(LAB_DB_TIMEOUT="20"))
    assert out.returncode == 0 and out.stdout.splitlines()[1].strip() == "116", out.stdout + out.stderr
    assert not store.connector.is_open and not store.connector.waiting_marker.exists()
    assert store.scalar("SELECT count(*) FROM leaderboard") == 116  # and reopens on the next read
    store.close()
