"""A boxed notice shared by every tab (no replay data, results database unavailable, ...)."""
from __future__ import annotations

from lab.ui.shell.html_text import esc


def render_notice(title: str, body_html: str, kind: str = "info") -> str:
    """A boxed notice (e.g. "no replay data configured"); `body_html` must already be safe HTML."""
    return f'<div class="lab-notice lab-notice-{esc(kind)}"><b>{esc(title)}</b><div>{body_html}</div></div>'
