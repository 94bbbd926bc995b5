"""Real browser: fetch a published run from a loopback server in the Results tab, then pick it in
Compare's run picker; a step the run lacks says "not in this run"."""
from __future__ import annotations

import pytest

from lab.settings import Settings
from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT, TB2LITE
from tests.published_server import published_server
from tests.browser.test_browser_compare import ARGS, CHROMIUM, shot_dir
from tests.helpers_store import make_results_dir

SAMPLE = "llada21_flash_transformers_sample10_suffix_len256"
RUN_KEY = f"20260516T113608Z_llada21_flash_transformers_sample10_suffix_len256/{SAMPLE}"

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
    pytest.mark.skipif(not (TB2LITE / "published" / f"{SAMPLE}.json").exists(), reason="published files missing"),
]


@pytest.fixture()
def served(tmp_path, monkeypatch):
    from lab.serve import create_context

    results = make_results_dir(tmp_path)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=str(EXCERPT), public=False)
    with published_server() as (base, state):
        monkeypatch.setenv("LAB_PUBLISHED_BASE_URL", base)
        ctx = create_context(settings, ["reference"])
        ctx.pool.wait()
        with serve_lab(ctx) as (_, url):
            yield url, ctx, state
        ctx.pool.close_all()


def test_fetch_in_results_then_pick_in_compare(served, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, ctx, state = served
    expect.set_options(timeout=30_000)  # a shared, busy machine
    out = shot_dir(tmp_path)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.set_default_timeout(30_000)
        page.goto(url)
        expect(page.locator("#lab-columns")).to_contain_text("reference")

        page.get_by_role("tab", name="Results").click()
        page.locator("#lab-pub").get_by_text("Fetch published per-step runs").first.click()
        page.locator("#lab-pub-series input").fill("sample10")
        page.get_by_role("option", name=f"run: {RUN_KEY}").click()
        expect(page.locator("#lab-pub-size")).to_contain_text("1 runs")
        expect(page.locator("#lab-pub-size")).to_contain_text("0.04 MB")
        page.locator("#lab-pub-fetch").click()
        expect(page.locator("#lab-pub-status")).to_contain_text("1 runs imported")
        expect(page.locator("#lab-pub-have")).to_contain_text("1 published runs")
        page.screenshot(path=str(out / "published-fetch.png"), full_page=True)
        assert any(path.endswith(f"{SAMPLE}.json") for path, _ in state.requests)

        page.get_by_role("tab", name="Compare").click()
        page.locator("#lab-run-picker input").fill("LLaDA")
        page.get_by_role("option", name="published · 10 steps").first.click()
        page.locator("#lab-run-add").click()
        column = page.locator('#lab-columns .lab-col[data-engine^="stored:"]')
        expect(column).to_contain_text(SAMPLE)
        expect(column).to_have_attribute("data-state", "ready")  # task-000/0 is in the run

        for _ in range(10):  # to task-001/3, which the 10-step sample does not have
            shown = page.locator("#lab-step input").input_value()
            page.locator("#lab-next").click()
            expect(page.locator("#lab-step input")).not_to_have_value(shown)  # one step at a time, none lost
        expect(page.locator("#lab-step input")).to_have_value("step 3 · mid")
        expect(column).to_have_attribute("data-state", "absent")
        expect(column).to_contain_text("not in this run")
        page.screenshot(path=str(out / "published-compare.png"), full_page=True)
        browser.close()
    run = ctx.query("SELECT source, steps, score FROM runs WHERE path LIKE 'published/%'")
    assert list(run.itertuples(index=False, name=None)) == [("published", 10, 12.44)]
