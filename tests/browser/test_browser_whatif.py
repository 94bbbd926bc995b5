"""Real browser: edit the terminal screen in Compare's what-if panel, re-run it on two engines
(reference and a tiny sampled transformers model), see each marked what-if answer beside the
original, replay the saved edit on one engine, and find it all in the what-if tables only."""
from __future__ import annotations

import json
import re
from urllib.parse import urljoin

import pytest

from lab.engines import Sampling
from lab.settings import Settings
from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT
from tests.browser.test_browser_compare import ARGS, CHROMIUM, shot_dir

def first_shell_prompt() -> str:
    """The excerpt's first `user@host:/app#` prompt (read from ../shared, never written here)."""
    found = re.search(r"\\n([\w-]+@[\w.-]+:/app#)", EXCERPT.read_text(encoding="utf-8"))  # after a JSON "\n"
    assert found, f"no shell prompt in {EXCERPT}"
    return found.group(1)


pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]
NEW_SCREEN = "ls\n" * 50


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_model_dir):
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("browser-whatif")
    settings = Settings(results_dir=root / "results", runs_dir=root / "results" / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT), public=False)
    ctx = create_context(settings, ["reference", f"transformers:{tiny_model_dir}?device=cpu"])
    ctx.pool.wait()
    tiny = next(e for e in ctx.engine_entries() if e.kind == "transformers")
    assert tiny.state == "ready", tiny.error
    tiny.engine.default_sampling = Sampling(temperature=1.0, max_tokens=24, seed=7)  # seeded: reproducible
    with serve_lab(ctx) as (_, url):
        yield url, ctx, tiny.name
    ctx.pool.close_all()
    ctx.store.close()


def test_edit_screen_rerun_on_two_engines(served, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, ctx, tiny = served
    expect.set_options(timeout=60_000)  # the shared CI machine runs the tiny model slowly
    runs_before = ctx.query("SELECT count(*) AS n FROM steps").iloc[0]["n"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1300})
        page.set_default_timeout(60_000)
        page.goto(url)
        expect(page.locator('#lab-columns [data-engine="reference"]')).to_be_visible()
        page.get_by_text("What-if: edit this step's context and re-run it").click()
        text = page.locator("#lab-whatif-text textarea")
        prompt = first_shell_prompt()
        expect(text).to_have_value(f"Current Terminal Screen:\n{prompt}\n")  # task-000/0's screen
        text.fill(NEW_SCREEN)
        page.get_by_role("button", name="Re-run edited step on all engines").click()

        out = page.locator("#lab-whatif-out")
        blocks = out.locator(".lab-whatif-engine:not([data-state=running])")
        expect(blocks).to_have_count(2)
        ref = out.locator('[data-whatif-engine="reference"]')
        model = out.locator(f'[data-whatif-engine="{tiny}"]')
        for block in (ref, model):
            expect(block.locator('[data-side="original"] .lab-whatif-tag')).to_have_text("original")
            expect(block.locator('[data-side="whatif"] .lab-whatif-tag')).to_contain_text("WHAT-IF · edited screen")
            expect(block.locator(".lab-dl-add").first).to_contain_text("+ls")  # the prompt diff
        expect(ref).to_contain_text("answers from data")
        expect(ref.locator('[data-side="whatif"] [data-metric="F1"] b')).to_have_text("1.0000")
        original_raw = model.locator('[data-side="original"] .lab-raw').inner_text()
        whatif_raw = model.locator('[data-side="whatif"] .lab-raw').inner_text()
        assert whatif_raw and original_raw != whatif_raw  # the model answered the edited prompt differently
        expect(model.locator(".lab-whatif-diff")).to_contain_text(f"-{prompt}")
        # the originals the re-run generated now fill Compare's own columns too (never the what-if answer)
        main_raw = page.locator('#lab-columns .lab-col[data-engine*="tiny"] .lab-raw')
        expect(main_raw).to_have_text(original_raw)

        # the saved edit is offered for this step; replay it on the reference engine from the page
        edit_id = ctx.query("SELECT edit_id FROM whatif_edits").iloc[0]["edit_id"]
        page.locator("#lab-whatif-engine input").click()
        page.get_by_role("option", name="reference").click()
        page.locator("#lab-whatif-saved input").click()
        page.get_by_role("option", name=f"{edit_id} · screen").click()
        page.get_by_role("button", name="Replay saved edit on engine").click()
        expect(out.locator('[data-whatif-engine="reference"]')).to_have_count(2)
        expect(out.locator(f'[data-whatif="{edit_id}"]')).to_have_count(3)
        # export as JSON lines: a download link to the file appears
        page.get_by_role("button", name="Export what-ifs (JSONL)").click()
        link = page.locator("#lab-whatif-file a").first
        expect(link).to_have_attribute("href", re.compile(r"whatifs\.jsonl$"))
        href = link.get_attribute("href")
        assert href.startswith("/lab-exports/") and "/tmp" not in href  # the lab's route: a token and a name
        lines = page.request.get(urljoin(page.url, href)).text().splitlines()
        assert [json.loads(line)["edit_id"] for line in lines] == [edit_id]
        assert len(json.loads(lines[0])["results"]) == 3
        path = shot_dir(tmp_path) / "compare-whatif.png"
        page.screenshot(path=str(path), full_page=True)
        browser.close()
    assert path.stat().st_size > 10_000
    rows = ctx.query("SELECT engine_name, answers_from_data FROM whatif_results ORDER BY result_id")
    assert sorted(map(tuple, rows.values.tolist())) == [("reference", True), ("reference", True), (tiny, False)]
    assert ctx.query("SELECT count(*) AS n FROM steps").iloc[0]["n"] == runs_before  # never mixed into runs
