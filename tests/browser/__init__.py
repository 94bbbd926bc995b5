"""lab/ui through real Chromium (Playwright)."""
