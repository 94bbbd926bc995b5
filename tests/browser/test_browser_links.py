"""Real browser: links open views and views name their links. Each tab opened from its link (Compare at a step
with named columns, Results with a baseline and a series, Triage with a slice and a pair, Engines, Batch); the
address bar follows j/k and a baseline picked, back and reload keep the place; hostile parameters (10,000
characters, HTML, path traversal, unknown tabs) leave one escaped line and a working page; on a public
deployment a link to the owner's run outside the data folders opens the default view with one line."""
from __future__ import annotations

import re
import subprocess
import sys
from urllib.parse import quote

import pytest

from lab.settings import Settings
from tests.browser.helpers_page import lab_page
from tests.browser.test_browser_compare import CHROMIUM, shot_dir
from tests.helpers_app import app_process, lab_env
from tests.helpers_servers import serve_lab
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT, REPO
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]
RUNS = (("alpha", 1), ("beta", 2), ("sft-checkpoint-1", 1), ("sft-checkpoint-2", 3))
SLOW = 60_000  # ms: every move goes through the queue twice (the view, then its link) on a loaded machine
PWN = '<img src=x onerror="window.pwned=1">'


def write_runs(results) -> None:
    for name, offset in RUNS:
        write_stored_run(results / "runs" / f"{name}.json", name, offset)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("browser-links")
    results = make_results_dir(root)
    write_runs(results)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, ["reference"])
    ctx.pool.wait()
    with serve_lab(ctx) as (_, url):
        yield url, ctx


def box(page, elem_id: str):
    return page.locator(f"#{elem_id} textarea, #{elem_id} input").first


def selected_tab(page, name: str):
    return page.get_by_role("tab", name=name, selected=True)


def test_every_tab_opens_from_its_link_and_follows_the_view(served, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, ctx = served
    keys = ctx.step_keys()
    out = shot_dir(tmp_path)
    with sync_playwright() as p:
        # Compare at a step with two stored runs as columns, and a name that is no column: one line
        browser, page = lab_page(p, f"{url}?tab=compare&step={quote(keys[3], safe='')}&engines=alpha,beta,nosuch",
                                 height=1100, timeout_ms=SLOW)
        expect(page.locator("#lab-compare-link-note")).to_contain_text("'nosuch' is no engine column or stored run")
        expect(page.locator("#lab-columns")).to_contain_text("alpha")
        expect(page.locator("#lab-columns")).to_contain_text("beta")
        here = re.escape(quote(keys[3], safe=""))
        expect(page).to_have_url(re.compile(f"step={here}&engines=reference%2Calpha%2Cbeta$"))
        expect(box(page, "lab-compare-link")).to_have_value(page.url)
        page.screenshot(path=str(out / "links-compare.png"))
        # j moves the address bar; back returns to the step before; reload keeps it
        page.keyboard.press("j")
        expect(page).to_have_url(re.compile(f"step={re.escape(quote(keys[4], safe=''))}&"))
        page.go_back()
        expect(box(page, "lab-compare-link")).to_have_value(re.compile(f"step={here}&"))
        page.reload()
        expect(box(page, "lab-compare-link")).to_have_value(re.compile(f"step={here}&"))
        expect(page.locator("#lab-step input")).to_have_value(re.compile(f"^step {keys[3].split('/')[1]} "))
        # Results with a baseline and a series; picking another baseline moves the address bar
        page.goto(f"{url}?tab=results&baseline=alpha&series=sft")
        expect(selected_tab(page, "Results")).to_be_visible()
        expect(page.locator("#lab-lb-stats-note-box")).to_contain_text("baseline alpha")
        expect(page.locator("#lab-results-plot")).to_contain_text("sft:")
        expect(page).to_have_url(re.compile(r"\?tab=results&baseline=alpha&series=sft$"))
        page.screenshot(path=str(out / "links-results.png"), full_page=True)
        page.locator("#lab-lb-baseline input").click()
        page.get_by_role("option", name=re.compile("^beta ")).click()
        expect(page).to_have_url(re.compile(r"baseline=beta&series=sft$"))
        # Triage with the pair compared
        page.goto(f"{url}?tab=triage&f1_max=0.99&baseline=alpha&candidate=beta")
        expect(selected_tab(page, "Triage")).to_be_visible()
        expect(page.locator("#triage-diff-header")).to_contain_text("common steps")
        expect(box(page, "triage-share")).to_have_value(re.compile(r"tab=triage&f1_max=0\.99&baseline=alpha&candidate=beta$"))
        page.screenshot(path=str(out / "links-triage.png"))
        for tab, name in (("engines", "Engines"), ("batch", "Batch")):
            page.goto(f"{url}?tab={tab}")
            expect(selected_tab(page, name)).to_be_visible()
            expect(box(page, f"lab-{tab}-link")).to_have_value(f"{url}?tab={tab}")
        browser.close()


@pytest.mark.parametrize("query", [
    f"tab={quote(PWN)}&step={quote('<script>window.pwned=1</script>')}",
    f"tab=compare&engines={quote(PWN)},{quote('../../../../etc/passwd')},{quote('transformers:/etc')}",
    f"tab=compare&step={'x' * 10_000}&engines={'y' * 10_000}",
    f"tab=results&baseline={quote(PWN)}&series=..%2F..%2Fetc",
    f"tab=triage&baseline={quote(PWN)}&candidate=..%2F..%2Fx&text_regex=true&text=(",
])
def test_hostile_parameters_leave_one_escaped_line(served, query):
    from playwright.sync_api import expect, sync_playwright

    url, ctx = served
    engines = list(ctx.pool.names())
    with sync_playwright() as p:
        browser, page = lab_page(p, f"{url}?{query}", timeout_ms=SLOW)
        notes = page.locator(".lab-link-note, .toast-body")
        expect(notes.first).to_be_visible()
        expect(page.locator("#lab-columns")).to_contain_text("reference")  # the page works: Compare is drawn
        assert page.evaluate("window.pwned") is None
        assert page.locator(".lab-link-note img, .toast-body img").count() == 0
        assert all("Traceback" not in t for t in notes.all_inner_texts())
        browser.close()
    assert list(ctx.pool.names())[:len(engines)] == engines and all(
        not n.startswith(("transformers", "openai")) for n in ctx.pool.names())


def test_a_public_link_to_the_owners_private_run(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    results = make_results_dir(tmp_path)
    write_runs(results)
    secret = tmp_path / "elsewhere" / "secret.json"
    write_stored_run(secret, "secret", 3)
    env = lab_env(LAB_PUBLIC="1", LAB_DB=str(tmp_path / "lab.duckdb"), LAB_CACHE_DIR=str(tmp_path / "cache"))
    imported = subprocess.run([sys.executable, "-m", "lab", "results", "--results", str(results), "import", str(secret)],
                              cwd=REPO, env=lab_env(LAB_DB=str(tmp_path / "lab.duckdb")), capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    with app_process(["--results", str(results), "--replay", str(EXCERPT)], tmp_path / "app.log", env) as (url, _):
        with sync_playwright() as p:
            browser, alice = lab_page(p, f"{url}?tab=compare&engines=alpha", timeout_ms=SLOW)
            expect(alice.locator("#lab-columns")).to_contain_text("alpha")
            expect(alice).to_have_url(re.compile(r"engines=alpha$"))
            shared = alice.url
            bob = browser.new_context().new_page()  # another visitor
            bob.set_default_timeout(SLOW)
            bob.goto(shared.replace("engines=alpha", "engines=alpha,secret"))
            expect(bob.locator("#lab-compare-link-note")).to_contain_text(
                "'secret' is no engine column or stored run this lab shows you")
            expect(bob.locator("#lab-columns")).to_contain_text("alpha")  # the run anyone may open: bob's own column
            expect(bob.locator("#lab-columns")).not_to_contain_text("secret")
            bob.screenshot(path=str(shot_dir(tmp_path) / "links-public.png"))
            browser.close()
