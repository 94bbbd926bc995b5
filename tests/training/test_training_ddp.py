"""A real 2-process DDP run (torch.distributed.run, gloo on CPU): the main process evaluates, the other waits
for it at the next gradient all-reduce, and nothing hangs."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers_servers import free_port
from tests.paths import EXCERPT, REPO
from tests.training.helpers_training import SAVE_STEPS, MAX_STEPS

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
SAVES = list(range(SAVE_STEPS, MAX_STEPS + 1, SAVE_STEPS))


def _run(tiny_model_dir, tmp_path, *extra: str) -> list[dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "LAB_RESULTS": str(tmp_path / "lab")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), str(REPO / "tests" / "training" / "ddp_train.py"),
           str(tiny_model_dir), str(tmp_path / "ddp-out"), str(tmp_path / "runs"), str(tmp_path / "report"), *extra]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((tmp_path / "report" / f"rank-{r}.json").read_text()) for r in (0, 1)]


def test_two_processes_evaluate_on_the_main_one_only(tiny_model_dir, tmp_path):
    ranks = _run(tiny_model_dir, tmp_path)
    assert [r["main"] for r in ranks] == [True, False] and {r["world_size"] for r in ranks} == {2}
    assert ranks[0]["evaluated"] == SAVES and ranks[1]["evaluated"] == []
    scores = {h["step"] for h in ranks[0]["log_history"] if "tb2lite/score" in h}
    assert scores == set(SAVES) and not any("tb2lite/score" in h for h in ranks[1]["log_history"])
    assert ranks[0]["param_sums"] == ranks[1]["param_sums"]  # the ranks stayed in step
    assert ranks[0]["budget_s"] == 480.0  # ddp_timeout 600 less the 120 s margin: the other rank never times out
    assert sorted(p.name for p in (tmp_path / "runs").glob("*.json")) == [
        f"ddp-out-checkpoint-{s}.json" for s in SAVES]


def test_beside_training_only_the_main_process_queues(tiny_model_dir, tmp_path):
    """background=True on two ranks: the main process queues both saves and starts the one worker; the other
    rank has no series, no worker, no job; both ranks stay in step and the results are the main one's."""
    ranks = _run(tiny_model_dir, tmp_path, "background")
    assert ranks[0]["evaluated"] == SAVES and ranks[1]["evaluated"] == []
    assert ranks[0]["worker"] == 1 and ranks[1]["worker"] is None and ranks[1]["jobs"] is None
    assert ranks[0]["jobs"] == [[s, "done"] for s in SAVES]
    assert ranks[0]["param_sums"] == ranks[1]["param_sums"]
    scores = {h["step"] for h in ranks[0]["log_history"] if "tb2lite/score" in h}
    assert scores == set(SAVES) and not any("tb2lite/score" in h for h in ranks[1]["log_history"])
    assert sorted(p.name for p in (tmp_path / "runs").glob("*.json")) == [f"ddp-out-checkpoint-{s}.json" for s in SAVES]
