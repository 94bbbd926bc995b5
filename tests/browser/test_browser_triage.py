"""Real browser: a shared slice link → filter → tag a step → export the slice as CSV (screenshot saved)."""
from __future__ import annotations

import csv
import io

import httpx
import pytest

from lab.settings import Settings
from lab.triage import SliceSpec, annotations_for
from tests.browser.test_browser_compare import ARGS, CHROMIUM, shot_dir
from tests.triage.test_triage_common import EXCERPT, write_results
from tests.helpers_servers import serve_lab

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("browser-triage")
    write_results(root / "results" / "runs")
    settings = Settings(results_dir=root / "results", runs_dir=root / "results" / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings)
    with serve_lab(ctx) as (_, url):
        yield url, ctx


def test_filter_tag_and_export_in_the_browser(served, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, ctx = served
    run = ctx.store.query("SELECT run_id FROM runs WHERE model = 'perturbed'")["run_id"][0]
    spec = SliceSpec(run_ids=[run], valid_json=False)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 2000})
        page.set_default_timeout(30_000)
        page.goto(f"{url}?{spec.to_query()}")  # the shared link: filters are read on page load
        page.get_by_role("tab", name="Triage").click()
        expect(page.locator("#triage-summary")).to_contain_text("2 steps")
        table = page.locator("#triage-table")
        expect(table).to_contain_text("invalid_json")
        expect(table).to_contain_text("truncated")
        expect(page.locator("#triage-share textarea, #triage-share input").first).to_have_value(
            f"{url}?tab=triage&{spec.to_query()}")  # the view's link names its tab too
        # narrow the slice in the UI: text search over commands and raw output
        page.locator("#triage-text textarea, #triage-text input").first.fill("unfinished")
        page.locator("#triage-apply").click()
        expect(page.locator("#triage-summary")).to_contain_text("1 steps")
        # select the step and tag it
        table.get_by_text("task-000/0", exact=True).locator("visible=true").first.click()
        expect(page.locator("#triage-selected")).to_contain_text("task-000/0")
        page.locator("#triage-tag textarea, #triage-tag input").first.fill("broken-json")
        page.locator("#triage-note textarea, #triage-note input").first.fill("closing brace missing")
        page.locator("#triage-author textarea, #triage-author input").first.fill("browser-test")
        page.locator("#triage-add-tag").click()
        expect(page.locator("#triage-badges")).to_contain_text("broken-json")
        # export the slice as CSV and download it through its link (the lab's export route)
        page.locator("#triage-export-csv").click()
        link = page.locator("#triage-export-file a").first
        expect(link).to_be_visible()
        href = link.get_attribute("href")
        assert href.startswith("/lab-exports/") and href.endswith("/triage-slice.csv")  # no path on the server
        path = shot_dir(tmp_path) / "triage.png"
        page.screenshot(path=str(path), full_page=True)
        browser.close()
    notes = annotations_for(ctx.store, run, "task-000/0")
    assert [(a.tag, a.note, a.author) for a in notes] == [("broken-json", "closing brace missing", "browser-test")]
    body = httpx.get(href if href.startswith("http") else url.rstrip("/") + href, timeout=10).text
    rows = list(csv.DictReader(io.StringIO(body)))
    assert [(r["step_key"], r["tags"]) for r in rows] == [("task-000/0", "broken-json")]
    assert path.stat().st_size > 10_000
