"""Real browser: open the lab in Chromium, step through the excerpt, compare reference with a stored run."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from lab.settings import Settings
from tests.paths import EXCERPT, REPO
from tests.helpers_servers import serve_lab
from tests.ui.test_ui_handlers import write_stored_run

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("browser")
    runs = root / "results" / "runs"
    stored = write_stored_run(runs / "altered.json", "altered")
    settings = Settings(results_dir=root / "results", runs_dir=runs, db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, ["reference", f"stored:{runs / 'altered.json'}"])
    ctx.pool.wait()
    with serve_lab(ctx) as (_, url):
        yield url, stored, ctx


def row_ref_units(ctx, key: str) -> list[str]:
    """The reference command units of step `key` (what the heatmap's x axis lists, up to its cut)."""
    from lab.runs.pipeline import parse_reference

    return parse_reference(ctx.replay.by_key[key]).command_units[:120]


def shot_dir(tmp_path: Path) -> Path:
    out = Path(os.environ.get("LAB_TEST_OUTPUT", REPO / "test-output"))
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_compare_reference_with_stored_run(served, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, stored, ctx = served
    target = ctx.step_keys()[2]  # task-000/2: the stored run added an extra unit there
    row = next(r for r in stored["per_step"] if f"{r['task_id']}/{r['step_idx']}" == target)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1300})
        page.set_default_timeout(20_000)
        page.goto(url)
        columns = page.locator("#lab-columns")
        expect(columns.locator('[data-engine="reference"]')).to_be_visible()
        # keyboard shortcut j (next) twice, then check the step shown
        page.locator("body").click(position={"x": 5, "y": 5})
        for _ in range(2):
            page.keyboard.press("j")
            page.wait_for_timeout(400)
        expect(page.locator("#lab-context")).to_contain_text(f"step: {target.split('/')[1]} (turn")
        ref_col = columns.locator('.lab-col[data-engine="reference"]')
        stored_col = columns.locator(".lab-col").filter(has_text="altered")
        expect(ref_col.locator('[data-metric="F1"] b')).to_have_text("1.0000")
        expect(stored_col.locator('[data-metric="F1"] b')).to_have_text(f"{row['command_f1']:.4f}")
        expect(stored_col.locator(".lab-extra")).to_contain_text("echo done")  # the unmatched extra unit
        expect(page.locator("#lab-f1")).to_contain_text("largest gap")
        expect(page.locator("#lab-heatmap .js-plotly-plot")).to_be_visible()
        # the heatmap follows the step in its own event, after the columns: it shows this step's units
        heat_side = "() => { const p = document.querySelector('#lab-heatmap .js-plotly-plot');" \
                    " return p && p.data && p.data[0] && p.data[0].x ? p.data[0].x.length : -1; }"
        page.wait_for_function(f"() => ({heat_side})() === {len(row_ref_units(ctx, target))}")
        # previous step with the button, then back
        page.locator("#lab-prev").click()
        expect(page.locator("#lab-context")).to_contain_text("step: 1 (turn 2 of")
        page.wait_for_function(f"() => ({heat_side})() === {len(row_ref_units(ctx, ctx.step_keys()[1]))}")
        page.locator("#lab-next").click()
        expect(page.locator("#lab-context")).to_contain_text(f"step: {target.split('/')[1]} (turn")
        path = shot_dir(tmp_path) / "compare.png"
        page.screenshot(path=str(path), full_page=True)
        browser.close()
    assert path.stat().st_size > 10_000
