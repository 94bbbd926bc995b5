"""Real browser: a lab started with no replay offers the download, and Compare works right after it."""
from __future__ import annotations

import pytest

from lab.settings import Settings
from tests.browser.test_browser_compare import ARGS, CHROMIUM, shot_dir
from tests.helpers_servers import serve_lab

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium")


@pytest.fixture
def served_without_replay(tmp_path, replay_server):
    from lab.serve import create_context

    base_url, hits = replay_server
    settings = Settings(results_dir=tmp_path / "results", db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=None,
                        replay_url=f"{base_url}/replay_full.jsonl")
    ctx = create_context(settings, ["reference"])
    ctx.pool.wait()
    assert ctx.replay is None, "no replay configured and nothing cached"
    with serve_lab(ctx) as (_, url):
        yield url, settings, hits


def test_download_button_loads_the_replay_into_compare(served_without_replay, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, settings, hits = served_without_replay
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(20_000)
        page.goto(url)
        expect(page.get_by_text("No replay data configured")).to_be_visible()
        expect(page.get_by_text("--replay", exact=False).first).to_be_visible()
        page.get_by_role("button", name="Download the public replay file").click()
        # the first step of the downloaded replay is shown with the reference column filled in
        expect(page.locator("#lab-context")).to_contain_text("task-000")
        ref_col = page.locator('#lab-columns .lab-col[data-engine="reference"]')
        expect(ref_col.locator('[data-metric="F1"] b')).to_have_text("1.0000")
        expect(page.get_by_text("No replay data configured")).to_be_hidden()
        expect(page.locator("#lab-header")).to_contain_text("14 steps")  # the header follows the download
        # step 0: the screen the model saw is the initial terminal state inside the task message
        expect(page.locator("#lab-context")).to_contain_text("initial state, inside the task message")
        page.screenshot(path=str(shot_dir(tmp_path) / "download.png"), full_page=False)
        # without a restart: a reload shows no banner and no button, and Batch lists the replay's tasks
        page.reload()
        expect(page.locator("#lab-context")).to_contain_text("task-000")
        expect(page.get_by_text("No replay data configured")).to_be_hidden()
        expect(page.get_by_role("button", name="Download the public replay file")).to_be_hidden()
        page.get_by_role("tab", name="Batch").click()
        expect(page.locator("#lab-batch-no-replay")).to_be_hidden()
        page.locator("#lab-batch-tasks input").first.click()
        expect(page.locator("ul[role='listbox']").first).to_contain_text("task-000")
        browser.close()
    assert "/replay_full.jsonl" in hits
    assert (settings.cache_dir / "replay_full.jsonl").is_file(), "the download is cached for the next start"
