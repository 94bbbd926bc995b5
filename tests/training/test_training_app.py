"""A running `python app.py` shows a training run's checkpoints as they are saved, without a restart.

The lab runs as a real process on a results folder; a tiny training run with TB2LiteCallback writes into
that folder and imports each checkpoint into the shared store while the lab runs; Chromium, on the page
opened before training began, finds both checkpoints in Results and their series in the checkpoint plot
after selecting the tab again.
"""
from __future__ import annotations

import pytest

from tests.browser.test_browser_compare import ARGS, CHROMIUM
from tests.helpers_app import app_process, lab_env
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT
from tests.training.helpers_training import train_tiny

pytestmark = [pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium")]


def test_a_running_lab_shows_checkpoints_as_they_are_saved(tiny_model_dir, tmp_path, monkeypatch):
    from playwright.sync_api import expect, sync_playwright

    from lab.training import TB2LiteCallback

    results = make_results_dir(tmp_path)
    env = lab_env(LAB_RESULTS=str(results))
    with app_process(["--results", str(results), "--replay", str(EXCERPT), "--engine", "reference"],
                     tmp_path / "app.log", env) as (url, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(90_000)
        page.goto(url)
        expect(page.locator("#lab-columns")).to_contain_text("reference", timeout=180_000)
        page.get_by_role("tab", name="Results").click()
        count = page.locator("#lab-lb-count")
        expect(count).to_contain_text("116 rows")  # the published rows: no run yet

        monkeypatch.setenv("LAB_RESULTS", str(results))  # the callback writes into the lab's own folder
        callback = TB2LiteCallback(str(EXCERPT), tasks=["task-000"], limit=1, max_tokens=8)
        train_tiny(tiny_model_dir, tmp_path / "sft-app", [callback])
        assert all("imported into the results database" in (o.store_line or "") for o in callback.outcomes.values())

        page.get_by_role("tab", name="Triage").click()
        page.get_by_role("tab", name="Results").click()  # the tab reads the store again when selected
        expect(count).to_contain_text("118 rows")
        page.locator("#lab-lb-filter textarea, #lab-lb-filter input").first.fill("sft-app-checkpoint")
        table = page.locator("#lab-leaderboard")
        expect(table).to_contain_text("sft-app-checkpoint-2")
        expect(table).to_contain_text("sft-app-checkpoint-4")
        page.locator("#lab-lb-filter textarea, #lab-lb-filter input").first.fill("")
        page.locator("#lab-plot-pick input").click()
        page.get_by_role("option", name="checkpoint_series", exact=True).click()
        plot = page.locator("#lab-results-plot .js-plotly-plot")
        # one series in the store: its score by checkpoint, under it each point's Δ from the first, then P(best)
        expect(plot.locator(".scatterlayer .point")).to_have_count(4)
        traces = page.evaluate("""() => { const gd = document.querySelector('#lab-results-plot .js-plotly-plot');
                                  return gd.calcdata.map(c => [c[0].trace.meta, c.map(p => p.x)]); }""")
        assert traces == [["score", [2, 4]], ["delta", [2, 4]], ["p_best", [2, 4]]], traces
        expect(plot).to_contain_text("sft-app")
        page.screenshot(path=str(tmp_path / "training-series.png"), full_page=True)
        browser.close()
    log = (tmp_path / "app.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-2000:]
