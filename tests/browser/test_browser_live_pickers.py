"""Real browser: runs imported by another process while the app runs appear in every run picker after a reload
(Triage runs / baseline / candidate / flip runs, Compare's stored runs) with their coverage; `tinyB` keeps its name."""
from __future__ import annotations

import pytest

from lab.settings import Settings
from tests.helpers_app import lab_env, run_lab_cli
from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT
from tests.browser.test_browser_compare import ARGS, CHROMIUM, shot_dir
from tests.helpers_store import make_results_dir
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]


def _options(page, box: str) -> str:
    page.locator(f"{box} input").first.click()
    text = page.locator("ul[role='listbox']").first.inner_text()
    page.keyboard.press("Escape")
    return text


def test_runs_added_by_another_process_reach_every_picker(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from lab.serve import create_context

    results = make_results_dir(tmp_path)
    write_stored_run(results / "runs" / "altered.json", "altered")
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, [])
    out = shot_dir(tmp_path)
    try:
        with serve_lab(ctx) as (_, url), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.set_default_timeout(20_000)
            page.goto(url)
            page.get_by_role("tab", name="Triage").click()
            assert "tinyB" not in _options(page, "#triage-runs")

            new = write_stored_run(tmp_path / "elsewhere" / "tinyB.json", "tinyB", offset=1)
            done = run_lab_cli(["results", "--db", str(settings.db_path), "--results", str(results), "import",
                                str(tmp_path / "elsewhere" / "tinyB.json")], env=lab_env())
            assert done.returncode == 0, done.stderr
            n = len(new["per_step"])

            page.reload()
            page.get_by_role("tab", name="Triage").click()
            runs = _options(page, "#triage-runs")
            assert f"tinyB · " in runs and f"{n}/303 steps partial" in runs
            page.get_by_text("Baseline vs candidate").click()
            assert "tinyB" in _options(page, "#triage-baseline") and "tinyB" in _options(page, "#triage-candidate")
            page.get_by_text("Checkpoint flip table").click()
            assert "tinyB" in _options(page, "#triage-flip-runs")
            page.screenshot(path=str(out / "triage-live-pickers.png"), full_page=True)
            page.get_by_role("tab", name="Compare").click()
            assert "tinyB" in _options(page, "#lab-run-picker")
            page.get_by_role("tab", name="Results").click()
            expect(page.locator("#lab-lb-count")).to_contain_text("118 rows")
            expect(page.locator("#lab-leaderboard")).to_contain_text(f"tinyB [partial {n}/303]")
            browser.close()
    finally:
        ctx.pool.close_all()
