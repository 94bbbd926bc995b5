"""Who is asking: the Gradio session and client of the request being handled (the workspace's
visitors' engines, lab.visitors, are counted by them)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lab.workspace import LabContext


def current_client() -> str | None:
    """The client of the request being handled (the TCP peer, or what a trusted proxy forwarded;
    an IPv6 address as its /64: lab.ui.shell.proxies), or None."""
    try:
        from gradio.context import LocalContext
    except ImportError:
        return None
    from lab.ui.shell.proxies import client_key

    request = LocalContext.request.get(None)
    client = getattr(request, "client", None) if request is not None else None
    return client_key(getattr(client, "host", None) if client is not None else None)


def current_session() -> str | None:
    """The Gradio session of the request being handled, or None outside a request."""
    try:
        from gradio.context import LocalContext
    except ImportError:  # the CLI never imports Gradio
        return None
    request = LocalContext.request.get(None)
    return getattr(request, "session_hash", None) if request is not None else None


def serve_requests(ctx: LabContext) -> None:
    """Let the workspace ask Gradio who is asking: in public mode each visitor's engines are its own."""
    ctx.current_session, ctx.current_client = current_session, current_client
