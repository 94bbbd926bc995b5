"""Real browser: Results tab (56/116 toggle, a plot) and a click on a lab run that opens it in Compare."""
from __future__ import annotations

import pytest

from lab.settings import Settings
from tests.paths import EXCERPT
from tests.test_browser_compare import ARGS, CHROMIUM, shot_dir
from tests.test_store_common import make_results_dir
from tests.helpers_servers import serve_lab
from tests.test_ui_handlers import write_stored_run

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The lab with the shipped leaderboards and one imported lab run; only `reference` loaded."""
    from lab.ui.app import create_context

    root = tmp_path_factory.mktemp("browser-results")
    results = make_results_dir(root)
    write_stored_run(results / "runs" / "altered.json", "altered")
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, ["reference"])
    ctx.pool.wait()
    with serve_lab(ctx) as (_, url):
        yield url, ctx
    ctx.pool.close_all()


def test_results_toggle_plot_and_open_run(served, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, ctx = served
    out = shot_dir(tmp_path)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.set_default_timeout(20_000)
        page.goto(url)
        expect(page.locator("#lab-columns")).to_contain_text("reference")
        page.get_by_role("tab", name="Results").click()
        count = page.locator("#lab-lb-count")
        expect(count).to_contain_text("117 rows")  # 116 published + the lab run
        expect(page.locator("#lab-results-plot .js-plotly-plot")).to_be_visible()  # drawn on opening the tab

        page.get_by_label("56 (2026-05-08 snapshot)").check()
        expect(count).to_contain_text("56 rows")
        expect(page.locator("#lab-leaderboard")).not_to_contain_text("altered")

        page.locator("#lab-plot-pick input").click()
        page.get_by_role("option", name="precision_recall").click()
        plot = page.locator("#lab-results-plot .js-plotly-plot")
        expect(plot).to_be_visible()
        expect(plot.locator(".gtitle")).to_contain_text("precision vs recall")
        expect(plot.locator(".scatterlayer .point").first).to_be_attached()
        page.screenshot(path=str(out / "results.png"), full_page=True)

        page.get_by_label("all 116 + lab runs").check()
        expect(count).to_contain_text("117 rows")
        page.locator("#lab-lb-filter textarea, #lab-lb-filter input").first.fill("altered")
        expect(count).to_contain_text("1 row ")
        page.locator("#lab-leaderboard").get_by_text(f"altered [partial {len(ctx.replay.steps)}/303]", exact=True).locator("visible=true").first.click()
        expect(page.get_by_role("tab", name="Compare")).to_have_attribute("aria-selected", "true")
        stored_col = page.locator('#lab-columns .lab-col[data-engine^="stored:"]')
        expect(stored_col).to_contain_text("altered")
        expect(page.locator('#lab-columns .lab-col[data-engine="reference"]')).to_be_visible()
        page.screenshot(path=str(out / "results-open-compare.png"), full_page=True)
        browser.close()
    assert "altered" in [e.name for e in ctx.engine_entries()]
    assert (out / "results.png").stat().st_size > 10_000


def test_http_batch_and_engine_endpoints(served):
    """The Batch and Engines handlers through Gradio's HTTP API (after the browser flow: it adds a run)."""
    from gradio_client import Client

    url, ctx = served
    client = Client(url, verbose=False)
    task = ctx.replay.tasks[-1]
    html = client.predict(["reference"], [task], [], [], True, "http-run", api_name="/run_batch")
    n = len(ctx.replay.steps_for_task(task))
    assert f"{n}/{n}" in html and "saved http-run.json" in html and '<td data-field="f1">1.0000</td>' in html
    assert (ctx.settings.runs_dir / "http-run.json").exists()

    table_html = client.predict("nosuchkind:x", api_name="/add_engine")[0]
    assert "reference" in table_html and "nosuchkind" not in table_html  # refused with a toast, table unchanged
