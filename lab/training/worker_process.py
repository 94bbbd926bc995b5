"""The training process's hold on its evaluation worker: start it, see that it lives and moves, start it again
(or say in one line that it is left alone), and stop it.

The worker is `python -m lab training worker STATE --follow --training-pid PID` in a session of its own
(a Ctrl-C meant for the training does not reach it), its stdin a pipe from the training: when the training
process ends, however it ends, the pipe closes and the worker stops at once, keeping what it finished
(`python -m lab training finish` continues). Its output goes to the state folder's worker.log.

It is the callback that watches it, at most once a second (options.yaml `worker.poll_s`): a worker that
exited while jobs are left is started again; one whose heartbeat is older than `worker.stuck_after_s`, or
whose job runs `worker.grace_s` past its budget, is killed, its job failed as stuck, and started again;
after `worker.restarts` starts it is left alone and the evaluations wait for the finishing command.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lab.training.jobs import FAILED, RUNNING, JobBook, finish_command
from lab.training.options import EvalOptions, training_defaults

LAB_ROOT = Path(__file__).resolve().parents[2]
# what torch.distributed.run gives each rank: the worker is no rank of the training's process group
DISTRIBUTED_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                   "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                   "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
                   "TORCH_NCCL_ASYNC_ERROR_HANDLING", "ACCELERATE_DYNAMO_BACKEND")


def worker_env(options: EvalOptions) -> dict[str, str]:
    """The training's environment, less its process-group variables, with the lab importable; a vLLM worker
    placed on `cuda:N` sees that GPU alone (vLLM takes the GPUs it sees)."""
    env = {k: v for k, v in os.environ.items() if k not in DISTRIBUTED_ENV and not k.startswith("TORCHELASTIC_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(LAB_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("TQDM_DISABLE", "1")  # no loading bars in worker.log
    if options.device and options.device.startswith("cuda:") and not options.in_memory:
        index = int(options.device.split(":", 1)[1])
        visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        env["CUDA_VISIBLE_DEVICES"] = visible[index] if index < len(visible) else str(index)
    return env


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WorkerProcess:
    """The worker of one series (module docstring)."""

    def __init__(self, book: JobBook, options: EvalOptions) -> None:
        self.book, self.options = book, options
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.given_up = False
        self.started_at: float | None = None
        self._log = None

    @property
    def settings(self) -> dict:
        return training_defaults()["worker"]

    def start(self) -> None:
        """Start the worker (the first time, or again)."""
        self.book.folder.mkdir(parents=True, exist_ok=True)
        if self._log is None:
            self._log = open(self.book.log_path, "ab", buffering=0)
        cmd = [sys.executable, "-m", "lab", "training", "worker", str(self.book.folder), "--follow",
               "--training-pid", str(os.getpid())]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
                                     cwd=os.getcwd(), env=worker_env(self.options), start_new_session=True,
                                     close_fds=True)
        self.starts += 1
        self.started_at = time.time()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self, has_work: bool) -> list[str]:
        """Look at the worker once (module docstring); the lines to say (restarted, stuck, left alone)."""
        if self.given_up:
            return []
        if self.proc is None:
            if has_work:
                self.start()
            return []
        code = self.proc.poll()
        if code is None:
            why = self._stuck()
            if why is None:
                return []
            self._kill()
            self._fail_running(f"stuck: {why}; the worker was stopped")
            return self._again(f"the evaluation worker was stuck ({why})")
        if not has_work:
            return []
        return self._again(f"the evaluation worker exited (code {code})")

    def _stuck(self) -> str | None:
        """Why the running worker counts as stuck, or None."""
        beat = self.book.worker() or {}
        now = time.time()
        if beat.get("pid") == self.proc.pid and now - float(beat.get("at", now)) > float(self.settings["stuck_after_s"]):
            return f"no heartbeat for {now - float(beat['at']):.0f} s"
        started = self.started_at
        if beat.get("pid") != self.proc.pid and started and now - started > float(self.settings["start_grace_s"]):
            return f"no heartbeat {now - started:.0f} s after it started"
        budget = self.options.time_budget_s
        if budget is not None:
            for job in self.book.jobs():
                if job.status == RUNNING and job.started_at and now - job.started_at > budget + float(self.settings["grace_s"]):
                    return f"{job.label} has run {now - job.started_at:.0f} s against a {budget:g} s budget"
        return None

    def _again(self, what: str) -> list[str]:
        limit = int(self.settings["restarts"])
        if self.starts > limit:
            self.given_up = True
            return [f"{what}; after {self.starts} starts the evaluations are left alone: finish them with "
                    f"{finish_command(self.book.folder)} (log: {self.book.log_path})"]
        self.start()
        return [f"{what}; started again ({self.starts - 1} of {limit}; log: {self.book.log_path})"]

    def _fail_running(self, why: str) -> None:
        for job in self.book.jobs():
            if job.status == RUNNING:
                job.status, job.reason, job.finished_at = FAILED, why, time.time()
                self.book.save(job)

    def _kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()

    def stop(self, wait_s: float | None = None) -> None:
        """Stop the worker: its stdin closed (it stops at once, keeping what it finished), SIGTERM after `wait_s`,
        SIGKILL after as long again."""
        if self.proc is None:
            return
        wait_s = float(self.settings["stop_wait_s"]) if wait_s is None else wait_s
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                try:
                    os.killpg(self.proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    break
            try:
                self.proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self.close_log()

    def close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
