"""Real browser, real servers: two managed `transformers serve` engines on the tiny model side by
side in the lab. One server is killed with SIGKILL: the page still answers, its column shows the
crash with its log lines, the other engine still generates; Restart brings it back; Unload
leaves no process. Also: stopping a real `python app.py` with SIGTERM leaves no server."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from lab.engines.servers.config import log_file_name
from lab.settings import Settings
from tests.browser.helpers_page import lab_side_story
from tests.helpers_servers import free_port, serve_lab, wait_http
from tests.paths import EXCERPT, REPO
from tests.engines.test_engines_servers import gone

CHROMIUM = Path("/usr/bin/chromium")
ROOT = REPO
pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def served_specs(model: Path) -> list[str]:
    return [f"transformers-serve:{model}?device=cpu&max_tokens=4&name=tiny-{n}" for n in ("a", "b")]


def test_two_managed_servers_crash_restart_unload_in_the_browser(tiny_model_dir, tmp_path, monkeypatch):
    from playwright.sync_api import expect, sync_playwright

    from lab.serve import create_context

    monkeypatch.setenv("LAB_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings = Settings(results_dir=tmp_path / "results", runs_dir=tmp_path / "results" / "runs",
                        db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    spec_a, spec_b = served_specs(tiny_model_dir)
    ctx = create_context(settings, [spec_a, spec_b])
    try:
        assert ctx.pool.wait(timeout=400)
        a, b = ctx.pool.get("tiny-a").server, ctx.pool.get("tiny-b").server
        assert [a.state, b.state] == ["ready", "ready"]
        assert b.started_at >= a.started_at + a.ready_after_s  # one at a time, each until it answers
        assert (tmp_path / "logs" / log_file_name("tiny-a")).exists() and (tmp_path / "logs" / log_file_name("tiny-b")).exists()
        with serve_lab(ctx) as (_, url), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            page = browser.new_page(viewport={"width": 1600, "height": 1200})
            page.set_default_timeout(60_000)
            page.goto(url)
            col_a = page.locator(f'.lab-col[data-engine="{spec_a}"]')
            col_b = page.locator(f'.lab-col[data-engine="{spec_b}"]')
            page.locator("#lab-generate").click()
            try:
                expect(col_a).to_have_attribute("data-state", "ready", timeout=120_000)
                expect(col_b).to_have_attribute("data-state", "ready", timeout=120_000)
            except AssertionError:
                print(lab_side_story(ctx, page))  # a rare failure (seen once in CI): where the lab stood
                raise

            # the Engines tab lists both servers with their port and PID
            page.get_by_role("tab", name="Engines").click()
            table = page.locator("#lab-engine-table")
            expect(table.locator('tr[data-engine="tiny-a"] td[data-pid]')).to_have_text(str(a.pid))
            expect(table.locator('tr[data-engine="tiny-b"] td[data-port]')).to_have_text(str(b.port))

            killed = a.pid
            os.kill(killed, signal.SIGKILL)
            crashed = table.locator('tr[data-engine="tiny-a"]')
            expect(crashed.locator("[data-state]")).to_have_text("crashed", timeout=30_000)  # the timer refreshes
            expect(crashed).to_contain_text("stopped: exit code -9 (SIGKILL)")
            expect(crashed).to_contain_text(str(tmp_path / "logs" / log_file_name("tiny-a")))

            # Compare: next step, Generate; the crashed column says so with its log lines, the other answers
            page.get_by_role("tab", name="Compare").click()
            page.locator("#lab-next").click()
            expect(col_a).to_have_attribute("data-state", "crashed")
            expect(col_a).to_contain_text("engine server crashed")
            expect(col_a.locator(".lab-error-text")).to_contain_text("stopped: exit code -9 (SIGKILL)")
            log_line = a.tail(12)[-1].strip()
            assert log_line
            expect(col_a.locator(".lab-error-text")).to_contain_text(log_line[:40])
            expect(col_b).to_have_attribute("data-state", "pending")
            page.locator("#lab-generate").click()
            expect(col_b).to_have_attribute("data-state", "ready", timeout=120_000)
            expect(col_a).to_have_attribute("data-state", "crashed")

            # Restart brings it back on a new process; then it answers again
            page.get_by_role("tab", name="Engines").click()
            page.locator("#lab-unload-which input").click()
            page.get_by_role("option", name="tiny-a").click()
            page.locator("#lab-restart").click()
            expect(crashed.locator("[data-state]")).to_have_text("ready", timeout=300_000)
            assert a.pid != killed and a.state == "ready"
            page.get_by_role("tab", name="Compare").click()
            page.locator("#lab-next").click()
            expect(col_a).to_have_attribute("data-state", "pending")  # the new step shown: Generate answers it
            page.locator("#lab-generate").click()
            expect(col_a).to_have_attribute("data-state", "ready", timeout=120_000)

            # Unload stops the whole process group
            page.get_by_role("tab", name="Engines").click()
            page.locator("#lab-unload-which input").click()
            page.get_by_role("option", name="tiny-b").click()
            b_pids = b.process_ids()
            page.locator("#lab-unload").click()
            expect(table.locator('tr[data-engine="tiny-b"]')).to_have_count(0)
            assert b_pids and all(gone(pid) for pid in b_pids)
            page.screenshot(path=str(tmp_path / "engines.png"), full_page=True)
            browser.close()
    finally:
        ctx.pool.close_all()
    assert gone(killed) and all(gone(pid) for pid in [a.pid])


def test_sigterm_to_the_app_leaves_no_server(tiny_model_dir, tmp_path):
    port = free_port()
    env = {**os.environ, "LAB_LOG_DIR": str(tmp_path / "logs"), "HF_HUB_OFFLINE": "1", "LAB_CACHE_DIR": str(tmp_path)}
    app = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port), "--results", str(tmp_path / "results"),
         "--engine", f"transformers-serve:{tiny_model_dir}?device=cpu&name=tiny"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/", 120, app)
        deadline = time.monotonic() + 300
        servers: list[psutil.Process] = []
        while time.monotonic() < deadline and not servers:
            servers = [c for c in psutil.Process(app.pid).children(recursive=True) if "serve" in " ".join(c.cmdline())]
            time.sleep(0.5)
        assert servers, "the app started no transformers serve"
        log = tmp_path / "logs" / log_file_name("tiny")
        while time.monotonic() < deadline and "Uvicorn running" not in (log.read_text() if log.exists() else ""):
            time.sleep(0.5)
        app.send_signal(signal.SIGTERM)
        app.wait(60)  # the app exits (TimeoutExpired otherwise)
        assert all(gone(s.pid, timeout=20) for s in servers), "a server outlived the app"
    finally:
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
