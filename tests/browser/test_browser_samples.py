"""Real browser: "Sample N on all engines" in Compare shows each engine's F1 strip and collapsed answers."""
from __future__ import annotations

from pathlib import Path

import pytest

from lab.data import load_replay
from lab.resultfiles.files import write_result_file
from lab.settings import Settings
from tests.conftest import BROWSER_EXPECT_MS
from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT
from tests.browser.test_browser_compare import ARGS, CHROMIUM, shot_dir
from tests.ui.test_samples_ui import sampled_result, shaky

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_model_dir):
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("browser-samples")
    runs = root / "results" / "runs"
    write_result_file(runs / "shaky.json", sampled_result(load_replay(str(EXCERPT)).steps, "shaky", shaky))
    settings = Settings(results_dir=root / "results", runs_dir=runs, db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, [f"stored:{runs / 'shaky.json'}",
                                    f"transformers:{tiny_model_dir}?device=cpu&max_tokens=8&name=tiny"])
    ctx.pool.wait()
    with serve_lab(ctx) as (_, url):
        yield url, ctx


def test_sample_n_on_all_engines_in_the_browser(served):
    from playwright.sync_api import expect, sync_playwright

    url, _ = served
    expect.set_options(timeout=60_000)  # the shared test machine is slow; sampling takes seconds
    try:
        run_page(url)
    finally:
        expect.set_options(timeout=BROWSER_EXPECT_MS)  # the suite's default (conftest)


def run_page(url: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1400})
        page.set_default_timeout(60_000)
        page.goto(url)
        panel = page.locator("#lab-samples")
        # the stored run's samples show at once; the tiny model has none yet
        expect(panel.locator('[data-engine="shaky"]')).to_contain_text("stored samples")
        expect(panel.locator('[data-engine="tiny"]')).to_have_count(0)
        page.locator("#lab-samples-n input").fill("4")
        page.locator("#lab-samples-temperature textarea").fill("1.0")
        page.locator("#lab-sample").click()
        tiny = panel.locator('[data-engine="tiny"]')
        expect(tiny).to_contain_text("4 samples")
        expect(tiny).to_contain_text("seeds 0–3")
        expect(tiny.locator(".lab-dot")).to_have_count(4)
        counts = [int(t.rstrip("×")) for t in tiny.locator(".lab-count").all_inner_texts()]
        assert sum(counts) == 4 and counts == sorted(counts, reverse=True)
        expect(panel.locator('[data-engine="shaky"] .lab-count').first).to_have_text("2×")
        page.screenshot(path=str(shot_dir(Path(".")) / "compare-samples.png"), full_page=True)
        # another step: the stored samples follow, the tiny model's samples belong to the first step
        page.locator("#lab-next").click()
        expect(page.locator("#lab-context")).to_contain_text("step: 1 (turn")
        expect(panel.locator('[data-engine="tiny"]')).to_have_count(0)
        expect(panel.locator('[data-engine="shaky"]')).to_contain_text("stored samples")
        browser.close()
