"""What a public deployment (SPACE_ID or LAB_PUBLIC=1) lets visitors do, and the server limits.

Visitors browse, compare, filter and export. They cannot write to results/ or the results
store (no batch runs; tags, notes and saved slices only with LAB_PUBLIC_ANNOTATIONS=1, series
placements only with LAB_PUBLIC_SERIES=1: lab.security.visitor_writes), cannot upload, and the
engines they add are theirs alone (lab.visitors). The owner's local lab is unchanged.
"""
from __future__ import annotations

import logging
import threading
import time

import gradio as gr

from lab.settings import env, Settings
from lab.ui.shell.session import current_session
from lab.visitors import public_limit
from lab.workspace import LabContext

log = logging.getLogger(__name__)

BATCH_OFF = (
    "Batch runs are off on this public deployment: they would write into the shared results. "
    "Run the lab locally (python app.py) or use python -m lab replay."
)

SWEEP_OFF = (
    "Cluster sweeps are off on this public deployment: they would use the owner's Ray cluster and write "
    "into the shared results. Run the lab locally with LAB_RAY_ADDRESS, or use python -m lab sweep."
)


def batch_allowed(settings: Settings) -> bool:
    """Batch runs write result files and import them: the owner's local lab only."""
    return not settings.public


def sweep_allowed(settings: Settings) -> bool:
    """Cluster sweeps use the owner's Ray cluster and write runs: the owner's local lab only."""
    return not settings.public


def watch_sessions(demo: gr.Blocks, ctx: LabContext) -> None:
    """When a visitor's browser tab closes, or its session makes no request for the idle limit
    (public_limits.yaml), unload the engines only that session held."""
    if ctx.sessions is not None:
        demo.unload(lambda: ctx.end_session(current_session()))
        start_idle_sweeper(ctx)


def start_idle_sweeper(ctx: LabContext) -> threading.Thread:
    """A daemon thread that unloads idle visitor sessions' engines every `sweep_every_s` seconds
    (a script that never opens a heartbeat cannot hold engine slots forever)."""
    every = max(0.2, public_limit("sweep_every_s"))

    def sweep() -> None:
        while True:
            time.sleep(every)
            for session in ctx.sessions.idle_sessions():
                try:
                    ctx.end_session(session)
                except Exception:  # noqa: BLE001 - the sweeper must outlive one bad unload
                    log.exception("unloading idle session %s", session)

    thread = threading.Thread(target=sweep, name="lab-idle-sessions", daemon=True)
    thread.start()
    return thread


def queue_options(settings: Settings) -> dict:
    """demo.queue() options: at most 8 events at once per handler; on a public deployment the
    queue is bounded too, so a flood of requests is refused instead of slowing everybody."""
    options: dict = {"default_concurrency_limit": int(env("LAB_CONCURRENCY", 8))}
    if settings.public:
        options["max_size"] = int(env("LAB_QUEUE_MAX", 64))
    return options


# Gradio's queue looks for new events every 1 ms while it has none, and for progress to send every 10 ms:
# about 9 % of a core for a lab nobody uses, on a Space's shared CPU too. Every 20 ms and 100 ms: about 2 %
# (bench/bench_idle_lab.py); an event then waits at most 20 ms more to start.
QUEUE_IDLE_POLL_SEC = 0.02
QUEUE_PROGRESS_POLL_SEC = 0.1


def queue_app(demo: gr.Blocks, options: dict | None = None) -> gr.Blocks:
    """`demo.queue(**options)` with the queue's idle polling at QUEUE_IDLE_POLL_SEC (see there); returns demo.
    Where a Gradio version names those intervals otherwise, its own stay."""
    demo.queue(**(options or {}))
    queue = demo._queue
    if hasattr(queue, "sleep_when_free"):
        queue.sleep_when_free = max(queue.sleep_when_free, QUEUE_IDLE_POLL_SEC)
    if hasattr(queue, "progress_update_sleep_when_free"):
        queue.progress_update_sleep_when_free = max(queue.progress_update_sleep_when_free, QUEUE_PROGRESS_POLL_SEC)
    return demo


def launch_limits(settings: Settings | None = None) -> dict:
    """launch() options: the upload route accepts at most LAB_MAX_UPLOAD; by default 1 MB
    locally and nothing at all on a public deployment (a limit of -1 bytes refuses empty and
    1-byte files too). The lab has no upload component, so nothing legitimate is refused."""
    public = (settings or Settings()).public
    limits: dict = {"max_file_size": env("LAB_MAX_UPLOAD") or (-1 if public else "1mb")}
    if public and not env("LAB_MAX_UPLOAD"):
        from starlette.middleware import Middleware

        limits["app_kwargs"] = {"middleware": [Middleware(RefuseUploads)]}  # empty files too
    return limits


class RefuseUploads:
    """ASGI middleware of a public deployment: every POST to an upload route gets 413, whatever its size."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") == "http" and scope.get("method") == "POST" and scope.get("path", "").rstrip("/").endswith("/upload"):
            from starlette.responses import PlainTextResponse

            await PlainTextResponse("uploads are off on this public deployment", status_code=413)(scope, receive, send)
            return
        await self.app(scope, receive, send)
