"""Run `python app.py` as a real server process on 127.0.0.1 (for public-mode and multi-process tests)."""
from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from tests.helpers_servers import free_port, stop_process, wait_http

REPO = Path(__file__).resolve().parents[1]


def lab_env(**extra: str) -> dict[str, str]:
    """The environment for a lab process: no public-mode switches unless given in `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPACE_ID", "LAB_PUBLIC", "LAB_ALLOW_ENGINES",
                                                            "LAB_ENGINE_HOSTS", "LAB_PUBLIC_ANNOTATIONS")}
    env.update({"GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


@contextmanager
def app_process(args: list[str], log_path: Path, env: dict[str, str] | None = None, timeout: float = 120.0):
    """Start `python app.py --port N ARGS…`; yield (url, process); stop it (and its children) afterwards."""
    port = free_port()
    cmd = [sys.executable, str(REPO / "app.py"), "--host", "127.0.0.1", "--port", str(port), *args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env or lab_env(),
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_http(url, timeout, proc)
        yield url, proc
    finally:
        stop_process(proc)


def run_lab_cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 180.0) -> subprocess.CompletedProcess:
    """`python -m lab ARGS…` as a separate process (text output)."""
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=REPO, env=env or lab_env(), capture_output=True,
                          text=True, timeout=timeout)
