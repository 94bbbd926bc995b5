"""Real browser, real servers (issue 41 item 2): a Compare column must not stay at "engine loading…".

A lab answers one step slowly on an in-process engine (a long generation of the tiny model) while a second
engine, a real managed `transformers serve`, is added in the Engines tab and takes its time to start.
Before, the Generate still streaming kept the new column at "engine loading…" (its columns were read once,
when the press began) and a second press was dropped until the first ended: the server saw no request.
Now the stream reads the engines' states each time it paints, a press while it streams answers the engine
that became ready, and a reloaded page shows the answer still being generated as in progress, then as
answered. Chromium, the lab served in this process, the server a real process the lab starts."""
from __future__ import annotations

import time

import pytest

from lab.engines.servers.config import log_file_name
from lab.settings import Settings
from lab.ui.shell.public import queue_options
from tests.browser.helpers_page import lab_page
from tests.browser.test_browser_compare import CHROMIUM, shot_dir
from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
    pytest.mark.timeout(1200),
]
# the tiny random model never ends its turn: 20,000 new tokens take minutes on a CPU, longer than the server
# takes to start; the test cancels it once it has seen what it needs
SLOW = "transformers:{model}?device=cpu&max_tokens=20000&batch_size=1&name=slow"
LATE = "transformers-serve:{model}?device=cpu&max_tokens=4&name=late"


def wait_until(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout:.0f} s"
        time.sleep(0.5)


def test_a_server_ready_while_generate_streams_is_answered(tiny_model_dir, tmp_path, monkeypatch):
    from playwright.sync_api import expect, sync_playwright

    from lab.serve import create_context

    monkeypatch.setenv("LAB_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings = Settings(results_dir=tmp_path / "results", runs_dir=tmp_path / "results" / "runs",
                        db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    slow_spec, late_spec = SLOW.format(model=tiny_model_dir), LATE.format(model=tiny_model_dir)
    ctx = create_context(settings, [slow_spec])
    out = shot_dir(tmp_path)
    try:
        assert ctx.pool.wait(timeout=300) and ctx.pool.state("slow") == "ready"
        # served as `python app.py` serves it: several events of one handler at once (queue_options)
        with serve_lab(ctx, queue=queue_options(settings)) as (_, url), sync_playwright() as p:
            browser, page = lab_page(p, url, 1500, 1100, 60_000)
            slow = page.locator(f'.lab-col[data-engine="{slow_spec}"]')
            late = page.locator(f'.lab-col[data-engine="{late_spec}"]')
            expect(slow).to_have_attribute("data-state", "pending")
            page.locator("#lab-generate").click()
            expect(slow).to_have_attribute("data-state", "running")

            # a managed server added meanwhile: it starts in the background, the first Generate still streams
            page.get_by_role("tab", name="Engines").click()
            page.locator("#lab-spec textarea, #lab-spec input").first.fill(late_spec)
            page.locator("#lab-add-engine").click()
            page.get_by_role("tab", name="Compare").click()
            expect(late).to_have_attribute("data-state", "loading")
            wait_until(lambda: ctx.pool.state("late") == "ready", 600, "the transformers serve engine started")
            assert ctx.pool.get("slow").live_progress().snapshot() is not None, "the slow answer ended too soon"
            # the stream shows the engine as it is now, without a press: ready, not generated yet
            expect(late).to_have_attribute("data-state", "pending", timeout=15_000)
            # a press while the first Generate streams: the ready engine answers, the slow one keeps going
            page.locator("#lab-generate").click()
            expect(late).to_have_attribute("data-state", "ready", timeout=180_000)
            expect(slow).to_have_attribute("data-state", "running")
            server_log = (tmp_path / "logs" / log_file_name("late")).read_text(errors="replace")
            assert "/v1/completions" in server_log, server_log[-2000:]  # the server got the request
            page.screenshot(path=str(out / "compare-late-server.png"), full_page=False)

            # a reload: the answer still being generated (for no page now) shows as in progress, the other as
            # answered; then the page follows it until it ends
            page.reload()
            expect(slow).to_have_attribute("data-state", "running")
            expect(slow).to_contain_text("generating…")
            expect(slow).to_contain_text("tokens so far", timeout=15_000)
            expect(late).to_have_attribute("data-state", "ready")
            # the tab shown again reads it again
            page.get_by_role("tab", name="Engines").click()
            page.get_by_role("tab", name="Compare").click()
            expect(slow).to_have_attribute("data-state", "running")
            ctx.pool.get("slow").cancel()  # the answer ends (cut): the reloaded page sees it end, unasked
            expect(slow).not_to_have_attribute("data-state", "running", timeout=60_000)
            browser.close()
    finally:
        try:
            ctx.pool.get("slow").cancel()
        except Exception:  # noqa: BLE001 - already gone
            pass
        ctx.pool.close_all()
