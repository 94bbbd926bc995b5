"""Start and stop real local servers for tests (loopback only)."""
from __future__ import annotations

import http.server
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx


@contextmanager
def http_on_loopback(handler: type, port: int = 0) -> Iterator[str]:
    """A real threaded HTTP server on 127.0.0.1 (`port`, default a free one) with `handler`; yields its base
    URL and shuts it down on exit."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Poll `url` until it answers 200, the process dies, or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode} before {url} answered")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def stop_process(proc: subprocess.Popen) -> None:
    """Terminate the process group we started, then kill it if it lingers."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


@contextmanager
def transformers_serve_process(model_dir: Path | str, log_path: Path, timeout: float = 120.0,
                               env: dict[str, str] | None = None):
    """Run `transformers serve MODEL --host 127.0.0.1 --port N --device cpu`; yield (base URL, process).
    MODEL: a folder, or a Hub id found in the cache (`env` adds to the server's environment, e.g. HF_HOME).

    The model is pinned (FORCE_MODEL), so requests for another model get a 400."""
    exe = shutil.which("transformers") or str(Path(sys.executable).with_name("transformers"))
    port = free_port()
    cmd = [exe, "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--log-level", "info"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/health", timeout, proc)
        yield base, proc
    finally:
        stop_process(proc)


@contextmanager
def transformers_serve(model_dir: Path | str, log_path: Path, timeout: float = 120.0, env: dict[str, str] | None = None):
    """Run `transformers serve` on the model (see transformers_serve_process); yield its base URL."""
    with transformers_serve_process(model_dir, log_path, timeout, env) as (base, _proc):
        yield base


@contextmanager
def serve_lab(ctx, queue: dict | None = None):
    """Build the lab's Blocks for `ctx` and serve them on a free 127.0.0.1 port; yields (demo, url). `queue`:
    demo.queue() options (default Gradio's: one event of each handler at a time; `python app.py` passes
    lab.ui.shell.public.queue_options)."""
    from lab.ui.app import build_app, launch_options
    from lab.ui.shell.public import queue_app

    demo = build_app(ctx)
    port = free_port()
    queue_app(demo, queue).launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                                  **launch_options())
    try:
        yield demo, f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


def server_memory_gib(engine) -> float:
    """Resident memory (GiB) of a managed server's processes: its API server, vLLM's engine core and workers."""
    import psutil

    total = 0
    for pid in engine.server.process_ids():
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    return total / 2**30
