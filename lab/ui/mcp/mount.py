"""Mount the tools on the lab's Blocks (`python app.py --mcp`): one API endpoint each, named and described for
Gradio's MCP server, which lists exactly these. On a public deployment every call goes through the per-client
gate (lab.ui.mcp.gate); the tools only read, as a visitor may."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import gradio as gr

from lab.errors import LabError
from lab.ui.mcp.answers import refusal
from lab.ui.mcp.gate import ToolGate
from lab.ui.mcp.tools import TOOLS
from lab.ui.shell.session import current_client
from lab.ui.shell.wiring import bind
from lab.workspace import LabContext

TOOL_NAMES = tuple(t.__name__ for t in TOOLS)


def tool(handler: Callable[..., str], ctx: LabContext, gate: ToolGate | None) -> Callable[..., str]:
    """`handler` bound to the lab, with its name, description and typed arguments, behind `gate` (None: none)."""
    bound = bind(handler, ctx)

    @functools.wraps(bound)
    def call(*args: Any, **kwargs: Any) -> str:
        if gate is None:
            return bound(*args, **kwargs)
        try:
            with gate.enter(current_client()):
                return bound(*args, **kwargs)
        except LabError as exc:
            return refusal(str(exc))

    call.__dict__.pop("__wrapped__", None)
    call.__signature__ = inspect.signature(bound).replace(return_annotation=str)
    return call


def mount_tools(ctx: LabContext) -> list[str]:
    """Inside the Blocks: one endpoint per tool (not queued: a call runs with its client's own request, so the
    gate counts the client who asked). Returns their API names."""
    gate = ToolGate() if ctx.settings.public else None
    for handler in TOOLS:
        gr.api(tool(handler, ctx, gate), api_name=handler.__name__, queue=False)
    return list(TOOL_NAMES)


def tools_only(demo: gr.Blocks, names: tuple[str, ...] = TOOL_NAMES) -> None:
    """Leave only the tools in the API's listing, which is what the MCP server offers and lets an agent call
    (the page's own events stay callable as before: undocumented, not private)."""
    for fn in demo.fns.values():
        if fn.api_name not in names and fn.api_visibility == "public":
            fn.api_visibility = "undocumented"
