"""`python -m lab replay --engine transformers-serve:TINY` starts the server, replays, stops it;
at temperature 0 its answers equal the in-process `transformers:` engine's on the same model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from lab.engines.servers.config import log_file_name

from tests.paths import EXCERPT, REPO

ROOT = REPO


def serve_processes(model: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if " serve " in cmd and str(model) in cmd:
            found.append(proc)
    return found


@pytest.mark.slow  # the CLI starts a managed `transformers serve`
def test_cli_replay_on_a_managed_server_matches_in_process_transformers(tiny_model_dir, tmp_path):
    out = tmp_path / "runs"
    env = {**os.environ, "LAB_LOG_DIR": str(tmp_path / "logs"), "HF_HUB_OFFLINE": "1", "LAB_CACHE_DIR": str(tmp_path)}
    specs = [f"transformers-serve:{tiny_model_dir}?device=cpu&max_tokens=6&name=served",
             f"transformers:{tiny_model_dir}?device=cpu&max_tokens=6&name=inproc"]
    cmd = [sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--limit", "3", "--out", str(out)]
    for spec in specs:
        cmd += ["--engine", spec]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not serve_processes(tiny_model_dir), "the CLI left its server running"
    served = json.loads(next(out.glob("served*.json")).read_text())
    inproc = json.loads(next(out.glob("inproc*.json")).read_text())
    rows = served["per_step"]
    assert len(rows) == 3 and all(r["error"] is None for r in rows)
    assert all(r["latency_s"] > 0 for r in rows)  # per request
    assert len({r["latency_s"] for r in rows}) == 3  # not one chunk time copied to every step
    assert [r["raw_output"] for r in rows] == [r["raw_output"] for r in inproc["per_step"]]
    assert "serve" in " ".join(served["sampling"]["server_argv"])
    assert (tmp_path / "logs" / log_file_name("served")).read_text().count("lab starts:") == 1
