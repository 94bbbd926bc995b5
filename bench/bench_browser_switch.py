"""Step switches in Compare, measured where the user is: Chromium (Playwright), 4 stored columns,
from the key press (j) to the new step's columns painted, timed inside the page (keydown to the
frame drawn after the new context and columns are in the DOM).

    python bench/bench_browser_switch.py [--switches N] [--replay PATH]

Prints p50 / p95 / max in ms and how many bytes the server sent per switch (the queue's SSE data).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers_servers import serve_lab  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402
from bench.record import Record  # noqa: E402
from bench.stored_lab import stored_lab  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
        "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
        "--disable-backgrounding-occluded-windows"]
# Timed inside the page: from the key's keydown event to the frame painted after the new step's context
# and columns are in the DOM (a frame callback, then a task queued from it: that frame has been drawn).
WATCH = """() => {
  const s = window.__labSwitch = {t0: 0, done: null, task: '', marker: '',
    expect(task, marker) { s.task = task; s.marker = marker; s.done = null; s.t0 = 0; }};
  document.addEventListener('keydown', () => { if (!s.t0) s.t0 = performance.now(); }, true);
  const check = () => {
    const c = document.querySelector('#lab-context');
    if (!s.t0 || s.done !== null || !c || !c.textContent.includes(s.marker) || !c.textContent.includes(s.task)) return;
    if (document.querySelectorAll('#lab-columns .lab-col').length < 4) return;
    s.done = -1;
    requestAnimationFrame(() => setTimeout(() => { s.done = performance.now() - s.t0; }, 0));
  };
  new MutationObserver(check).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--switches", type=int, default=26)
    args = parser.parse_args()
    record = Record("bench_browser_switch", packages=("gradio", "playwright"))
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ctx = stored_lab(root, args.replay, 4, "stored")
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
            page.evaluate(WATCH)
            times = []
            for n in range(1, min(args.switches, len(keys) - 1) + 1):
                task, step = keys[n].split("/")
                page.evaluate("([task, marker]) => window.__labSwitch.expect(task, marker)", [task, f"step: {step} (turn"])
                page.keyboard.press("j")
                page.wait_for_function("() => window.__labSwitch.done > 0", polling="raf")
                times.append(page.evaluate("() => window.__labSwitch.done"))
                page.wait_for_timeout(300)  # let the follow-up events (heatmap, panels) settle before the next press
            browser.close()
        ctx.pool.close_all()
    times.sort()
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    print(f"switches: {len(times)} · p50 {statistics.median(times):.0f} ms · p95 {p95:.0f} ms · max {times[-1]:.0f} ms")
    if sent:
        print(f"queue/data responses: {len(sent)} · median {statistics.median(sent) / 1024:.1f} KiB")
    record.setting(columns="4 stored", switches=len(times), replay=Path(args.replay).name)
    record.figure("key press (j) to the new step's columns painted, p50", statistics.median(times), "ms")
    record.figure("key press (j) to the new step's columns painted, p95", p95, "ms")
    record.figure("key press (j) to the new step's columns painted, max", times[-1], "ms")
    if sent:
        record.figure("server data per switch (queue/data responses)", statistics.median(sent) / 1024, "KiB",
                      note="median")
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
