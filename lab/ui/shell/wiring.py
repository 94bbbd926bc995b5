"""Wire module-level handlers to Gradio events: `bind(handler, ctx)` fixes the handler's first arguments
and keeps what Gradio reads from a handler's signature (a `gr.Request` or `gr.SelectData` parameter is
filled by Gradio, by its annotation), which `functools.partial` loses. A generator function stays one,
so Gradio streams what it yields."""
from __future__ import annotations

import functools
import inspect
import typing
from typing import Any, Callable

STATISTICS_QUEUE = "statistics"


def statistics_events() -> dict[str, Any]:
    """Event options of the handlers that show statistics (Results' table and plots, the series views): they
    share one Gradio concurrency group of `stats_handlers` (public_limits.yaml), so many visitors picking at
    once queue for it instead of all contending with everybody else's clicks for the interpreter."""
    from lab.visitors import public_limit

    return {"concurrency_id": STATISTICS_QUEUE, "concurrency_limit": max(1, int(public_limit("stats_handlers")))}


def bind(handler: Callable[..., Any], *first: Any) -> Callable[..., Any]:
    """`handler` with its first `len(first)` arguments fixed to `first`, as a function whose signature and
    (resolved) annotations are the rest of `handler`'s."""
    signature = inspect.signature(handler)
    rest = list(signature.parameters.values())[len(first):]
    hints = typing.get_type_hints(handler)

    if inspect.isgeneratorfunction(handler):  # Gradio streams what a generator function yields

        @functools.wraps(handler)
        def bound(*args: Any, **kwargs: Any) -> Any:
            yield from handler(*first, *args, **kwargs)
    else:

        @functools.wraps(handler)
        def bound(*args: Any, **kwargs: Any) -> Any:
            return handler(*first, *args, **kwargs)

    del bound.__wrapped__  # Gradio and inspect read the signature below, not the handler's
    bound.__signature__ = signature.replace(parameters=rest)
    bound.__annotations__ = {p.name: hints[p.name] for p in rest if p.name in hints}
    return bound
