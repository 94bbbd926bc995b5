"""A page of the lab in the tests' Chromium (Debian's build, headless): launched, sized, given its patience and
opened at the lab's URL."""
from __future__ import annotations

from tests.browser.test_browser_compare import ARGS, CHROMIUM


def lab_page(playwright, url: str, width: int = 1400, height: int = 1000, timeout_ms: int = 30_000):
    """(browser, page) with the page at `url`; the caller closes the browser."""
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(timeout_ms)
    page.goto(url)
    return browser, page


def lab_side_story(ctx, page=None) -> str:
    """What the lab itself holds when a page does not show what a test waits for: the answers being generated,
    the answers cached, each engine's state, the page's toasts and every thread's stack (the lab runs in the
    test's process). Printed by a failing test, so that a rare failure says where it stood."""
    import sys
    import threading
    import traceback

    from lab.ui.compare.inflight import inflight_of

    lines = ["--- the lab's side ---"]
    jobs = inflight_of(ctx)._jobs
    lines.append(f"answers being generated: {sorted(jobs)}")
    lines.append(f"answers cached: {sorted(map(str, list(ctx.views._data)))}")
    for row in ctx.pool.status() if ctx.pool is not None else []:
        server = row.get("server") or {}
        lines.append(f"engine {row['name']}: {row['state']} {row.get('error') or ''} server={server.get('state')} "
                     f"pid={server.get('pid')} tail={server.get('tail')}")
    if page is not None:
        try:
            lines.append(f"toasts: {page.locator('.toast-body').all_inner_texts()}")
        except Exception as exc:  # noqa: BLE001 - a diagnosis must not hide the failure it explains
            lines.append(f"toasts: unreadable ({exc})")
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame, limit=12))
        lines.append(f"thread {names.get(ident, ident)}:\n{stack}")
    return "\n".join(lines)
