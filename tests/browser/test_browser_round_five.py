"""Real browser: what a visitor saw of issue 40's page symptoms. A stored run whose model has a
reference-likelihood run holding a step with a 309-digit NLL per token, a step whose NLL is -0.0 (a
log-probability clamped to 0, negated) and a step recorded without one (NULLs, as a store written
before the importer refused them holds): Compare's column shows its answers and "1.000e+308", "0.000",
"not recorded" (it showed "generation failed · TypeError …" and hid the answers, the 309 digits, and
"-0.000"); no tooltip of the page names the server's path of the replay (the header already shortened
it); Results' and Triage's pages show no "None"."""
from __future__ import annotations

import json

import duckdb
import pytest

from lab.settings import Settings
from tests.browser.test_browser_compare import ARGS, CHROMIUM
from tests.helpers_servers import serve_lab
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT
from tests.store.test_store_nulls import reference_file
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]
HUGE = 1e308


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("browser-round-five")
    results = make_results_dir(root)
    runs = results / "runs"
    result = write_stored_run(runs / "m.json", "m")
    data = reference_file(result)
    data["per_step"][0].update(ref_tokens=1, ref_logprob=-HUGE, ref_logprob_mean=-HUGE, ref_nll_per_token=HUGE)
    data["per_step"][1].update(ref_tokens=4, ref_logprob=0.0, ref_logprob_mean=0.0, ref_nll_per_token=-0.0)
    (runs / "m.reference.json").write_text(json.dumps(data), encoding="utf-8")
    settings = Settings(results_dir=results, runs_dir=runs, db_path=root / "lab.duckdb", cache_dir=root / "cache",
                        replay_path=str(EXCERPT))
    ctx = create_context(settings, [])  # builds the store
    ctx.pool.close_all()
    ctx.store.close()
    third = f"{result['per_step'][2]['task_id']}/{result['per_step'][2]['step_idx']}"
    con = duckdb.connect(str(settings.db_path))  # what an older importer let in: a scored step without its NLL
    con.execute("UPDATE reference_steps SET ref_nll_per_token = NULL, ref_tokens = NULL WHERE step_key = ?", [third])
    con.close()
    ctx = create_context(settings, [f"stored:{runs / 'm.json'}"])
    ctx.pool.wait()
    with serve_lab(ctx) as (_, url):
        yield url, ctx
    ctx.pool.close_all()


def test_the_stored_columns_reference_nll_and_tooltips(served):
    from playwright.sync_api import expect, sync_playwright

    url, ctx = served
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1200})
        page.set_default_timeout(90_000)  # a loaded 2-core machine
        page.goto(url)
        column = page.locator("#lab-columns .lab-col").filter(has_text="stored answer")
        cell = column.locator('[data-metric="ref NLL/tok"] b')
        for shown in ("1.000e+308", "0.000", "not recorded"):
            expect(cell).to_have_text(shown)
            expect(column).not_to_contain_text("generation failed")
            expect(column.locator('[data-metric="F1"] b')).to_have_count(1)  # its answer is scored and shown
            titles = page.eval_on_selector_all("[title]", "els => els.map(e => e.getAttribute('title'))")
            assert not [t for t in titles if str(EXCERPT.parent) in t], titles
            page.locator("#lab-next").click()
        page.get_by_role("tab", name="Results").click()
        board = page.locator("#lab-leaderboard")
        expect(board).to_contain_text("m [partial")
        assert "None" not in board.inner_text()
        page.get_by_role("tab", name="Triage").click()
        page.wait_for_timeout(2000)
        assert "None" not in page.locator("#lab-tabs").inner_text()
        browser.close()
