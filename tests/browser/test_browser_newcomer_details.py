"""Real browser, issue 41's smaller items as a newcomer meets them: a lab started with `--replay` on the
14-step excerpt and a Ray address, while a terminal runs `python -m lab replay --replay … --limit 2` into its
runs folder (a real CLI process importing into the same store).

- two engines with the same F1 are a tie, not a gap ("largest gap 0.0000: x vs x");
- Triage does not say "equiv needs the replay" on the rows of that run: the lab and the CLI both have it;
- the run's coverage is against the replay it was made on: 2/14 steps, not 2/303;
- baseline vs candidate shows the reference-NLL columns without scrolling;
- no element id of the lab is on the page twice (the Ray panel's `lab-sweep` was);
- a lab with no replay says in its first line how to point at a local file (--replay PATH, LAB_REPLAY), and so
  does a download that fails offline."""
from __future__ import annotations

import pytest

from lab.settings import Settings
from lab.triage import SliceSpec
from tests.browser.helpers_page import lab_page
from tests.browser.test_browser_compare import CHROMIUM, shot_dir
from tests.helpers_app import lab_env, run_lab_cli
from tests.helpers_servers import free_port, serve_lab
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]
# every id the lab gives an element (Gradio's elem_id): the page holds each once
DUPLICATE_IDS_JS = """() => { const seen = {};
  document.querySelectorAll('[id^="lab-"], [id^="triage-"]').forEach(e => { seen[e.id] = (seen[e.id] || 0) + 1; });
  return Object.keys(seen).filter(k => seen[k] > 1); }"""


def _options(page, box: str) -> str:
    page.locator(f"{box} input").first.click()
    text = page.locator("ul[role='listbox']").first.inner_text()
    page.keyboard.press("Escape")
    return text


def _pick(page, box: str, text: str) -> None:
    """Choose the option of dropdown `box` that contains `text`."""
    page.locator(f"{box} input").first.click()
    page.locator("ul[role='listbox'] li[role='option']").filter(has_text=text).first.click()
    page.wait_for_timeout(300)


def test_a_cli_run_beside_the_lab_in_the_browser(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from lab.serve import create_context

    results = make_results_dir(tmp_path)
    write_stored_run(results / "runs" / "altered.json", "altered")
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=results / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=str(EXCERPT), ray_address="127.0.0.1:1")
    ctx = create_context(settings, ["reference"])
    ctx.pool.wait()
    out = shot_dir(tmp_path)
    try:
        with serve_lab(ctx) as (_, url), sync_playwright() as p:
            # a terminal beside the running lab: two steps of the excerpt into the lab's own runs folder
            done = run_lab_cli(["replay", "--replay", str(EXCERPT), "--engine", "reference", "--name", "cli-ref",
                                "--limit", "2"], env=lab_env(LAB_RESULTS=str(results)))
            assert done.returncode == 0, done.stderr[-2000:]
            assert "imported into the results database" in done.stdout
            run = ctx.query("SELECT run_id FROM runs WHERE path = 'runs/cli-ref.json'")["run_id"].iloc[0]
            ctx.add_engine(f"stored:{results / 'runs' / 'cli-ref.json'}", wait=True)

            browser, page = lab_page(p, url, 1400, 1000, 30_000)
            # the reference and the stored copy of its answers: the same F1, no gap between them
            expect(page.locator('#lab-columns .lab-col[data-engine="reference"] [data-metric="F1"] b')).to_have_text(
                "1.0000")
            f1 = page.locator("#lab-f1")
            expect(f1.locator("[data-tie]")).to_have_text("no gap: the 2 engines tie at 1.0000")
            expect(f1).not_to_contain_text("largest gap")
            assert f1.locator(".lab-best, .lab-worst").count() == 0
            assert page.evaluate(DUPLICATE_IDS_JS) == []

            # Triage on the CLI's run: a selection limited on purpose, equiv computed with that replay's screens
            page.goto(f"{url}?{SliceSpec(run_ids=[run]).to_query()}")
            page.get_by_role("tab", name="Triage").click()
            expect(page.locator("#triage-summary")).to_contain_text("2 steps")
            runs = _options(page, "#triage-runs")
            mine = next(line for line in runs.splitlines() if run in line)
            assert mine.endswith("limited to 2 steps"), mine  # --limit 2: whole for its selection, not partial
            table = page.locator("#triage-table")
            expect(table).to_contain_text("task-000/0")  # its first unit is `cd myproject`: a relative cd
            expect(table).not_to_contain_text("equiv needs")
            assert page.evaluate(DUPLICATE_IDS_JS) == []

            # baseline vs candidate: the NLL columns are on the screen without scrolling the table
            page.get_by_text("Baseline vs candidate").click()
            _pick(page, "#triage-baseline", "altered · ")
            _pick(page, "#triage-candidate", run)
            page.get_by_role("radio", name="all", exact=True).first.check()
            page.get_by_role("button", name="Compare runs").click()
            diff = page.locator("#triage-diff-table")
            expect(diff).to_contain_text("task-000/1")
            for column in ("baseline_ref_nll", "candidate_ref_nll", "ref_nll_delta"):
                header = diff.locator("th").filter(has_text=column).first
                box = header.bounding_box()
                assert box is not None and box["x"] + box["width"] <= 1400, f"{column} is off-screen: {box}"
            page.screenshot(path=str(out / "triage-baseline-nll.png"), full_page=False)

            for tab in ("Engines", "Batch", "Results"):
                page.get_by_role("tab", name=tab).click()
                page.wait_for_timeout(500)
                assert page.evaluate(DUPLICATE_IDS_JS) == [], tab
            expect(page.locator("#lab-sweep")).to_have_count(1)
            browser.close()
    finally:
        ctx.pool.close_all()


def test_no_replay_says_how_to_use_a_local_file_in_its_first_line(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from lab.serve import create_context

    offline = f"http://127.0.0.1:{free_port()}/replay_full.jsonl"  # nothing listens: a download fails at once
    settings = Settings(results_dir=tmp_path / "results", db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "cache",
                        replay_path=None, replay_url=offline)
    ctx = create_context(settings, ["reference"])
    assert ctx.replay is None
    try:
        with serve_lab(ctx) as (_, url), sync_playwright() as p:
            browser, page = lab_page(p, url, 1400, 1000, 30_000)
            title = page.locator(".lab-notice b").first
            expect(title).to_contain_text("No replay data configured")
            expect(title).to_contain_text("--replay PATH")
            expect(title).to_contain_text("LAB_REPLAY=PATH")
            page.get_by_role("button", name="Download the public replay file").click()
            toast = page.locator(".toast-body").filter(has_text="Download failed")
            expect(toast).to_contain_text("--replay PATH")
            expect(toast).to_contain_text("LAB_REPLAY=PATH")
            page.screenshot(path=str(shot_dir(tmp_path) / "no-replay-offline.png"), full_page=False)
            browser.close()
    finally:
        ctx.pool.close_all()
