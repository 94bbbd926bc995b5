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
