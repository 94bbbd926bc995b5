"""Real browser: every difference the lab shows comes with its interval. Results (a baseline picked: each row's Δ
score, its interval and verdict; rows without per-step data say so), Triage (baseline vs candidate: the run-level
header and the tasks that carry the difference; a checkpoint series the base model joins, its table and plot with
the reference-NLL axis) and Compare (two stored runs as columns: the run-level Δ above the per-step F1s)."""
from __future__ import annotations

import re
from contextlib import contextmanager

import pytest

from lab.settings import Settings
from tests.browser.test_browser_compare import ARGS, CHROMIUM, shot_dir
from tests.helpers_paired import reference_file, variant, write
from tests.helpers_servers import serve_lab
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The lab over a baseline run, a better one, and a training run's two checkpoints (with reference
    likelihoods) beside the base model named checkpoint-0."""
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("browser-paired")
    results = make_results_dir(root)
    runs = results / "runs"
    write(runs, "base", variant("base", seed=1))
    write(runs, "better", variant("better", shift=0.08, seed=2))
    for step, shift in ((100, 0.03), (200, 0.05)):
        ckpt = variant(f"checkpoint-{step}", shift=shift, seed=step, model_path=f"/train/myrun/checkpoint-{step}")
        write(runs, f"checkpoint-{step}", ckpt)
        write(runs, f"checkpoint-{step}.reference", reference_file(ckpt, 2.0 - step / 400, seed=step))
    origin = variant("base-model", seed=3, model_path="/models/base-model")  # replayed with ?name=checkpoint-0
    origin["engine_spec"] = "transformers:/models/base-model?name=checkpoint-0"
    write(runs, "checkpoint-0", origin)
    write(runs, "checkpoint-0.reference", reference_file(origin, 2.0, seed=3))
    settings = Settings(results_dir=results, runs_dir=runs, db_path=root / "lab.duckdb", cache_dir=root / "cache",
                        replay_path=str(EXCERPT))
    ctx = create_context(settings, [])
    if ctx.equiv_filler is not None:
        ctx.equiv_filler.wait(timeout=300)
    with serve_lab(ctx) as (_, url):
        yield url, ctx
    ctx.pool.close_all()


@contextmanager
def lab_page(url: str, height: int):
    """A Chromium page on the lab (a loaded 2-core machine: generous timeouts)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1700, "height": height})
        page.set_default_timeout(90_000)
        page.goto(url)
        try:
            yield page
        finally:
            browser.close()


def pick(page, box: str, text: str) -> None:
    """Choose the option of a Gradio dropdown whose label starts with `text`."""
    field = page.locator(f"{box} input").first
    field.click()
    field.fill(text)
    page.get_by_role("option", name=re.compile("^" + re.escape(text))).first.click()


def test_results_rows_against_a_baseline(served, tmp_path):
    from playwright.sync_api import expect

    url, ctx = served
    out = shot_dir(tmp_path)
    with lab_page(url, 1200) as page:
        page.get_by_role("tab", name="Results").click()
        table = page.locator("#lab-leaderboard")
        expect(table).to_contain_text("per-step rank (95 %)")
        expect(table).to_contain_text("no per-step data")  # the published rows: a figure, never an interval
        pick(page, "#lab-lb-baseline", "base · ")
        expect(table).to_contain_text("Δ score vs baseline [95 %]")
        page.locator("#lab-lb-filter textarea, #lab-lb-filter input").first.fill("better")
        expect(page.locator("#lab-lb-count")).to_contain_text("1 row ")
        row = table.locator("tbody tr").first
        expect(row).to_contain_text(re.compile(r"\+\d+\.\d\d \[\+\d+\.\d\d, \+\d+\.\d\d\]"))
        expect(row).to_contain_text("better")
        expect(page.locator("#lab-lb-stats-note")).to_contain_text("simultaneous over")
        page.screenshot(path=str(out / "results-baseline.png"), full_page=True)


def test_triage_pair_header_tasks_and_a_series_with_its_base(served, tmp_path):
    from playwright.sync_api import expect

    url, ctx = served
    out = shot_dir(tmp_path)
    with lab_page(url, 2400) as page:
        page.get_by_role("tab", name="Triage").click()
        page.get_by_text("Baseline vs candidate").click()
        pick(page, "#triage-baseline", "base · ")
        pick(page, "#triage-candidate", "better · ")
        page.get_by_role("button", name="Compare runs").click()
        header = page.locator("#triage-pair")
        expect(header).to_have_attribute("data-verdict", "better")
        expect(header).to_contain_text("303 common steps of 50 tasks")
        expect(header.locator('tr[data-metric="score"]')).to_contain_text(re.compile(r"\[\+\d"))
        tasks = page.locator("#triage-diff-tasks")
        expect(tasks).to_contain_text("contribution")
        expect(tasks).to_contain_text("task-0")
        page.screenshot(path=str(out / "triage-pair.png"), full_page=True)

        page.get_by_text("Checkpoint flip table and series view").click()
        pick(page, "#lab-series-run", "base-model · ")
        page.locator("#lab-series-name textarea, #lab-series-name input").first.fill("myrun")
        page.locator("#lab-series-at input").first.fill("0")
        page.locator("#lab-series-place").click()
        plot = page.locator("#lab-series-plot .js-plotly-plot")
        expect(plot).to_be_visible()
        expect(plot).to_contain_text("reference NLL per token")  # its own axis, titled
        expect(plot).to_contain_text(re.compile(r"step \d+ over step \d+"))
        series = page.locator("#lab-series-table")
        expect(series).to_contain_text("first point")
        expect(series).to_contain_text("step 0")
        expect(series).to_contain_text("late")
        expect(page.locator("#lab-series-note")).to_contain_text("simultaneous over the 2 later checkpoints")
        page.screenshot(path=str(out / "triage-series.png"), full_page=True)


def test_compare_shows_the_run_level_difference_above_the_step(served, tmp_path):
    from playwright.sync_api import expect

    url, ctx = served
    out = shot_dir(tmp_path)
    with lab_page(url, 1400) as page:
        expect(page.locator("#lab-step input")).not_to_have_value("")
        for name in ("base · ", "better · "):
            pick(page, "#lab-run-picker", name)
        page.locator("#lab-run-add").click()
        delta = page.locator("#lab-run-delta")
        expect(delta).to_be_visible()
        expect(delta).to_contain_text("better")
        expect(delta.locator('tr[data-metric="score"]')).to_contain_text(re.compile(r"\[\+\d"))
        bars = page.locator("#lab-f1 .lab-bar-row").first
        expect(bars).to_be_visible()
        assert delta.bounding_box()["y"] < bars.bounding_box()["y"]  # the verdict sits above the per-step F1s
        page.locator("#lab-next").click()  # another step: the run-level block stays
        expect(page.locator("#lab-run-delta")).to_contain_text("better")
        page.screenshot(path=str(out / "compare-pair.png"), full_page=True)


def test_compare_baseline_picker_names_the_baseline_in_the_block(served, tmp_path):
    """Issue 56 item 2: with three stored columns the block has a baseline picker (the stored columns, the first
    picked), the title names the baseline; picking another compares every other column, the former baseline
    too, against it, and the page keeps its pick on the next step."""
    from playwright.sync_api import expect

    url, ctx = served
    out = shot_dir(tmp_path)
    with lab_page(url, 1400) as page:
        expect(page.locator("#lab-step input")).not_to_have_value("")
        for name in ("base · ", "better · ", "myrun (checkpoint-100) · "):
            pick(page, "#lab-run-picker", name)
        page.locator("#lab-run-add").click()
        title = page.locator("#lab-run-delta .lab-pair-title")
        expect(title).to_contain_text("whole runs against the baseline base (95 %, simultaneous over 2 comparisons")
        picker = page.locator("#lab-run-baseline")
        expect(picker).to_be_visible()
        expect(picker.locator("input").first).to_have_value("base")
        pick(page, "#lab-run-baseline", "better")
        expect(title).to_contain_text("whole runs against the baseline better (95 %")
        base_id = ctx.query("SELECT run_id FROM runs WHERE model_short = 'base'")["run_id"][0]
        expect(page.locator(f'#lab-run-delta li[data-run="{base_id}"]')).to_contain_text("Δ score −")
        step = page.locator("#lab-step input").first
        before = step.input_value()
        page.locator("#lab-next").click()
        expect(step).not_to_have_value(before)  # another step painted, the block with it
        expect(title).to_contain_text("whole runs against the baseline better")
        expect(picker.locator("input").first).to_have_value("better")
        page.screenshot(path=str(out / "compare-baseline-picker.png"), full_page=True)
