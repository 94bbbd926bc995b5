"""Real browser: a Generate still streaming never paints its step over the step the user moved to.
A slow in-process engine (tiny model, long answers) is generating step 1 when `next` is pressed;
after its answer lands the page still shows step 2, and going back to step 1 shows that answer."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from lab.settings import Settings
from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def test_moving_on_while_generate_streams_keeps_the_new_step(tiny_model_dir, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from lab.serve import create_context

    settings = Settings(results_dir=tmp_path / "results", runs_dir=tmp_path / "results" / "runs",
                        db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    # long enough to be still streaming when Next is pressed (400 tokens took 1.7 s on an idle worker, and the
    # move then met the stream's last output; that boundary: tests/ui/test_ui_handlers.py), and to be seen
    # running by the browser on a loaded machine (1,500 tokens once took 5.3 s and no poll met a running paint)
    spec = f"transformers:{tiny_model_dir}?max_tokens=4000&name=slow"
    ctx = create_context(settings, ["reference", spec])
    try:
        assert ctx.pool.wait(timeout=300)
        first, second = ctx.step_keys()[:2]
        with serve_lab(ctx) as (_, url), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            page = browser.new_page(viewport={"width": 1600, "height": 1200})
            page.set_default_timeout(60_000)
            page.goto(url)
            col = page.locator('#lab-columns .lab-col[data-engine*="name=slow"]')
            expect(col).to_have_attribute("data-state", "pending")
            page.locator("#lab-generate").click()
            expect(col).to_have_attribute("data-state", "running")
            page.locator("#lab-next").click()
            expect(page.locator("#lab-context")).to_contain_text(f"step: {second.split('/')[1]}")
            expect(col).to_have_attribute("data-state", "pending")

            deadline = time.monotonic() + 240
            while ("slow", first) not in ctx.views and time.monotonic() < deadline:
                time.sleep(0.2)
            assert ("slow", first) in ctx.views, "the slow engine never answered step 1"
            page.wait_for_timeout(2_000)  # what a stale stream would have painted by now
            expect(page.locator("#lab-context")).to_contain_text(f"step: {second.split('/')[1]}")
            expect(col).to_have_attribute("data-state", "pending")

            page.locator("#lab-prev").click()  # the answer was kept: step 1 shows it without a new Generate
            expect(page.locator("#lab-context")).to_contain_text(f"step: {first.split('/')[1]}")
            expect(col).to_have_attribute("data-state", "ready")
            browser.close()
    finally:
        ctx.pool.close_all()
        ctx.store.close()
