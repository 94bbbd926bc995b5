"""Links that open a view: the page's own address (the base every shared link starts from)."""
from __future__ import annotations

import gradio as gr


def page_url(request: gr.Request) -> str:
    """The page's own address without its query (the browser's Referer; the queue URL is not it)."""
    referer = (request.headers or {}).get("referer") if hasattr(request, "headers") else None
    return str(referer or request.base_url).split("?")[0]
