"""Real browser: Results tab (56/116 toggle, a plot) and a click on a lab run that opens it in Compare."""
from __future__ import annotations

import re

import pytest

from lab.settings import Settings
from tests.paths import EXCERPT
from tests.browser.test_browser_compare import ARGS, CHROMIUM, shot_dir
from tests.helpers_store import make_results_dir
from tests.helpers_servers import serve_lab
from tests.ui.test_ui_handlers import write_stored_run
from tests.helpers_runs import LONG_NAMES, write_run_without
from tests.browser.helpers_browser_boxes import boxes, inside

N_RUNS = 2 + len(LONG_NAMES)

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The lab with the shipped leaderboards and imported lab runs (one with all steps, three with
    long alike names, one without the replay's first task); only `reference` loaded."""
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("browser-results")
    results = make_results_dir(root)
    write_stored_run(results / "runs" / "altered.json", "altered")
    for i, name in enumerate(LONG_NAMES):  # file stems as long as the names: the Compare columns' names too
        write_stored_run(results / "runs" / f"{name.split('/')[-1]}.json", name, offset=i + 1)
    write_run_without(results / "runs" / "late-only.json", "late-only", "task-000")  # starts at task-001
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, ["reference"])
    ctx.pool.wait()
    if ctx.equiv_filler is not None:  # the runs' equiv columns filled before any page asks the store
        ctx.equiv_filler.wait(timeout=300)
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
        page.set_default_timeout(90_000)  # a loaded 2-core CI machine
        page.goto(url)
        expect(page.locator("#lab-columns")).to_contain_text("reference", timeout=180_000)  # a loaded CI machine
        page.get_by_role("tab", name="Results").click()
        count = page.locator("#lab-lb-count")
        expect(count).to_contain_text(f"{116 + N_RUNS} rows")  # 116 published + the lab runs
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
        expect(count).to_contain_text(f"{116 + N_RUNS} rows")
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
    # issue 27 item 9: a name the picker no longer lists (an Unload's answer beat a queued timer tick)
    # reaches the handler, which answers in one line, never Gradio's "not in the list of choices" error
    table_html = client.predict("ghost-engine", api_name="/unload_engine")[0]
    assert "reference" in table_html


@pytest.mark.browser
@pytest.mark.slow
def test_a_run_opens_at_its_first_step_and_long_names_stay_distinct(served, tmp_path):
    """Issue 27, items 8 and 7: a run without the replay's first task opens at its own first step;
    long alike run names are shortened to distinct labels (full name on hover) in Compare's F1
    bars, the Results plots' legends and axes and Triage's histogram, and nothing overflows."""
    from playwright.sync_api import expect, sync_playwright

    url, ctx = served
    out = shot_dir(tmp_path)
    late_first = next(s.key for s in ctx.replay.steps if s.task_id != "task-000")
    long_ids = [ctx.query("SELECT run_id FROM runs WHERE display_name = ?", [n])["run_id"][0] for n in LONG_NAMES]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.set_default_timeout(90_000)
        page.goto(url)
        expect(page.locator("#lab-columns")).to_contain_text("reference", timeout=180_000)  # a loaded CI machine
        page.get_by_role("tab", name="Results").click()
        page.locator("#lab-lb-filter textarea, #lab-lb-filter input").first.fill("late-only")
        expect(page.locator("#lab-lb-count")).to_contain_text("1 row ")
        page.locator("#lab-leaderboard").get_by_text("late-only [partial", exact=False).locator("visible=true").first.click()
        expect(page.get_by_role("tab", name="Compare")).to_have_attribute("aria-selected", "true", timeout=180_000)
        task, idx = late_first.split("/")
        expect(page.locator("#lab-task input")).to_have_value(re.compile(rf"^{task}\b"), timeout=120_000)
        expect(page.locator("#lab-step input")).to_have_value(re.compile(rf"^step {idx}\b"))
        late = page.locator('#lab-columns .lab-col[data-engine*="late-only"]')
        expect(late).to_be_visible()
        expect(late).not_to_contain_text("not in this run")

        for run_id in long_ids:
            ctx.add_stored_run(run_id)
        expect(page).to_have_url(re.compile(r"\?tab=compare&"))  # the address bar follows the view opened
        page.reload()  # and a reload keeps the place
        stems = [n.split("/")[-1] for n in LONG_NAMES]
        for stem in stems:
            expect(page.locator(f'#lab-f1 .lab-bar-name[title="{stem}"]')).to_be_visible()
        names = page.locator("#lab-f1 .lab-bar-name[title]")
        shown = names.all_inner_texts()
        titles = [names.nth(i).get_attribute("title") for i in range(names.count())]
        assert set(stems) <= set(titles) and len(set(shown)) == len(shown), shown
        assert all(len(t) < len(f) for t, f in zip(shown, titles) if f in stems)  # shortened, full on hover
        panel = boxes(page, "#lab-f1")[0]
        for sel in (".lab-bar-row", ".lab-bar-name", ".lab-bar-val", ".lab-bar-lat"):
            assert all(inside(b, panel) for b in boxes(page, f"#lab-f1 {sel}")), sel  # no overflow
        assert page.evaluate("""() => [...document.querySelectorAll('#lab-f1 .lab-bar-name')]
                                  .every(e => e.scrollWidth <= e.clientWidth + 1)""")
        page.locator("#lab-f1").screenshot(path=str(out / "compare-f1-long-names.png"))

        page.get_by_role("tab", name="Results").click()
        plot = page.locator("#lab-results-plot .js-plotly-plot")
        # the module's lab runs, and any an earlier test of the module added (its batch writes `reference`)
        n_runs = int(ctx.query("SELECT count(*) AS n FROM runs")["n"][0])
        assert n_runs >= N_RUNS
        for name in ("by_bucket", "equiv_vs_f1"):
            page.locator("#lab-plot-pick input").click()
            page.get_by_role("option", name=name, exact=True).click()
            expect(plot.locator(".gtitle")).to_contain_text("by replay position" if name == "by_bucket" else "equiv F1")
            page.locator("#lab-results-plot").screenshot(path=str(out / f"results-{name}-long-names.png"))
            svg = boxes(page, "#lab-results-plot .main-svg")[0]
            if name == "by_bucket":
                legend = plot.locator(".legend .legendtext").all_text_contents()
                runs_shown = [t for t in legend if ", partial " in t]  # the lab runs (published rows: the rest)
                assert len(runs_shown) == n_runs and len(set(legend)) == len(legend), legend
                assert all(inside(b, svg) for b in boxes(page, "#lab-results-plot .legend .legendtext"))
                assert any("checkpoint-200" in t for t in legend) and not any(n in t for n in LONG_NAMES for t in legend)
            else:
                ticks = plot.locator(".yaxislayer-above .y2tick text").all_text_contents()
                assert len(ticks) == n_runs and len(set(ticks)) == n_runs, ticks
                scatter = boxes(page, "#lab-results-plot .draglayer .xy .nsewdrag")[0]
                for tick in boxes(page, "#lab-results-plot .yaxislayer-above .y2tick text"):
                    assert tick["y"] >= scatter["y"] + scatter["height"]  # beside its own bars, not the points
                values = plot.locator(".bars .bartext").all_text_contents()
                assert len(values) == n_runs and all(v.startswith("+") for v in values)  # the gap panel is never blank

        page.get_by_role("tab", name="Triage").click()
        hist = page.locator("#triage-f1-plot .js-plotly-plot")
        expect(hist.locator(".legend .legendtext").first).to_be_visible()
        legend = hist.locator(".legend .legendtext").all_text_contents()
        assert len(legend) >= n_runs and len(set(legend)) == len(legend), legend
        frame = boxes(page, "#triage-f1-plot .main-svg")[0]
        assert all(inside(b, frame) for b in boxes(page, "#triage-f1-plot .legend .legendtext"))
        page.locator("#triage-f1-plot").screenshot(path=str(out / "triage-histogram-long-names.png"))
        browser.close()


@pytest.mark.browser
@pytest.mark.slow
def test_engines_table_keeps_port_and_pid_on_screen_and_reference_needs_no_prompt(served, tmp_path):
    """Issue 27 item 9: a long unbreakable error / log line wraps inside its cell (the port and PID
    columns stay on screen); the reference column's prompt panel shows no template error."""
    from playwright.sync_api import expect, sync_playwright

    url, ctx = served
    out = shot_dir(tmp_path)
    missing = "/tmp/" + "no-such-run-" * 14 + ".json"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(90_000)
        page.goto(url)
        ref = page.locator('#lab-columns .lab-col[data-engine="reference"]')
        expect(ref).to_be_visible(timeout=180_000)
        expect(ref.locator(".lab-details summary").first).to_contain_text("not sent")
        assert "template error" not in ref.inner_text() and ref.locator(".lab-warn").count() == 0
        page.get_by_role("tab", name="Engines").click()
        page.locator("#lab-spec textarea, #lab-spec input").first.fill(f"stored:{missing}")
        page.locator("#lab-add-engine").click()
        row = page.locator("#lab-engine-table tr", has_text="no such result file")
        expect(row).to_be_visible()
        table = boxes(page, "#lab-engine-table .lab-engines")[0]
        frame = boxes(page, "#lab-engine-table")[0]
        assert table["x"] + table["width"] <= frame["x"] + frame["width"] + 1, (table, frame)
        for cell in boxes(page, "#lab-engine-table td[data-port]") + boxes(page, "#lab-engine-table td[data-pid]"):
            assert 0 <= cell["x"] and cell["x"] + cell["width"] <= 1280
        page.locator("#lab-engine-table").screenshot(path=str(out / "engines-long-error.png"))
        browser.close()
    name = next(e.name for e in ctx.engine_entries() if e.spec.endswith(missing))
    ctx.remove_engine(name)
