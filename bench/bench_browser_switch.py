"""Step switches in Compare, measured where the user is: Chromium (Playwright), 4 stored columns,
from the key press (j) to the new step's columns painted (two animation frames after they change).

    python bench/bench_browser_switch.py [--switches N] [--replay PATH]

Prints p50 / p95 / max in ms and how many bytes the server sent per switch (the queue's SSE data).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.settings import Settings  # noqa: E402
from tests.helpers_servers import serve_lab  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402
from tests.test_ui_handlers import write_stored_run  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
        "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
        "--disable-backgrounding-occluded-windows"]
PAINTED = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--switches", type=int, default=26)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from lab.ui.app import create_context

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = root / "results" / "runs"
        specs = []
        for i in range(4):
            write_stored_run(runs / f"stored{i}.json", f"stored{i}", offset=i)
            specs.append(f"stored:{runs / f'stored{i}.json'}")
        settings = Settings(results_dir=root / "results", runs_dir=runs, db_path=root / "lab.duckdb",
                            cache_dir=root / "cache", replay_path=args.replay)
        ctx = create_context(settings, specs)
        ctx.pool.wait()
        keys = ctx.step_keys()
        sent: list[int] = []
        with serve_lab(ctx) as (_, url), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1600, "height": 1200})
            page.set_default_timeout(30_000)
            page.on("requestfinished", lambda r: sent.append(r.sizes()["responseBodySize"])
                    if "/queue/data" in r.url else None)
            page.goto(url)
            page.wait_for_function("() => document.querySelectorAll('#lab-columns .lab-col').length >= 4")
            page.locator("body").click(position={"x": 5, "y": 5})
            times = []
            for n in range(1, min(args.switches, len(keys) - 1) + 1):
                task, step = keys[n].split("/")
                marker = f"step: {step} (turn"
                t0 = time.perf_counter()
                page.keyboard.press("j")
                page.wait_for_function(
                    "([task, marker]) => { const c = document.querySelector('#lab-context');"
                    " return c && c.textContent.includes(marker) && c.textContent.includes(task)"
                    " && document.querySelectorAll('#lab-columns .lab-col').length >= 4; }",
                    arg=[task, marker], polling="raf")
                page.evaluate(PAINTED)
                times.append((time.perf_counter() - t0) * 1000)
            browser.close()
        ctx.pool.close_all()
    times.sort()
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    print(f"switches: {len(times)} · p50 {statistics.median(times):.0f} ms · p95 {p95:.0f} ms · max {times[-1]:.0f} ms")
    if sent:
        print(f"queue/data responses: {len(sent)} · median {statistics.median(sent) / 1024:.1f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
