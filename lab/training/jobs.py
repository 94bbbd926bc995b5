"""The evaluations of one training run's series, on disk: what is queued, running, done, failed or skipped.

A folder per series inside the training's output folder (`OUTPUT/tb2lite-eval/SERIES/`, options.yaml
`state_folder`) holds:

- `plan.json`: what every evaluation of the series replays and where its files go (lab.training.plan);
- `jobs/STEP-KIND.json`: one evaluation of a checkpoint (KIND `save`, or `subset` and `full` with
  `subset_tasks`): its status, why, its files, its numbers;
- `worker.json`: the worker's pid, the job it is on and its last heartbeat; `worker.log`: its output;
- `ended.json`: the training ended (its last global step), so the series is complete;
- `judgement.json`: the series judgement on the subset (lab.training.finalists).

Every file is written whole (a temporary file, then a rename), so a reader, a killed writer or a killed
training never leaves half a file; a finished evaluation is in its job file the moment it is done, and
`python -m lab training finish` continues from what the files say.
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from lab.errors import LabError
from lab.training.options import training_defaults

QUEUED, RUNNING, DONE, FAILED, SKIPPED = "queued", "running", "done", "failed", "skipped"
FINISHED = (DONE, FAILED, SKIPPED)
KINDS = ("save", "subset", "full")


@dataclass
class Job:
    """One checkpoint's evaluation (module docstring)."""

    step: int
    kind: str                          # save | subset | full
    folder: str                        # the checkpoint folder it reads
    spec: str | None = None            # the transformers SPEC that loads it (a vLLM job: the worker's server)
    training: dict = field(default_factory=dict)
    status: str = QUEUED
    reason: str | None = None          # why it failed or was skipped (one line)
    stem: str | None = None            # the checkpoint's file stem, chosen when it first ran
    result_path: str | None = None
    reference_path: str | None = None
    metrics: dict = field(default_factory=dict)
    store_line: str | None = None
    attempts: int = 0
    queued_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    seconds: float | None = None
    server: dict | None = None          # the vLLM server it ran on: pid, servers started so far, load seconds

    @property
    def id(self) -> str:
        return f"{self.step:09d}-{self.kind}"

    @property
    def error(self) -> str | None:
        """Why it failed (None unless it failed)."""
        return self.reason if self.status == FAILED else None

    @property
    def label(self) -> str:
        """`checkpoint-200` (`checkpoint-200, whole replay` for a finalist's full job)."""
        return f"checkpoint-{self.step}" + (", whole replay" if self.kind == "full" else "")

    @classmethod
    def from_dict(cls, data: dict) -> "Job":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def write_json(path: Path, data: Any, durable: bool = True) -> None:
    """Write `data` to `path` whole: a temporary file beside it, flushed (`durable`: to the disk), then renamed
    over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any:
    """The JSON in `path`; a LabError naming the file when it is not readable JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LabError(f"{path}: cannot read the evaluation state ({type(exc).__name__}: {exc})") from None


class JobBook:
    """The state folder of one series (module docstring)."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)

    # --- paths ---------------------------------------------------------------------------------------
    @property
    def plan_path(self) -> Path:
        return self.folder / "plan.json"

    @property
    def jobs_dir(self) -> Path:
        return self.folder / "jobs"

    @property
    def worker_path(self) -> Path:
        return self.folder / "worker.json"

    @property
    def log_path(self) -> Path:
        return self.folder / "worker.log"

    @property
    def lock_path(self) -> Path:
        return self.folder / "worker.lock"

    @property
    def ended_path(self) -> Path:
        return self.folder / "ended.json"

    @property
    def judgement_path(self) -> Path:
        return self.folder / "judgement.json"

    def exists(self) -> bool:
        return self.plan_path.is_file()

    # --- jobs ----------------------------------------------------------------------------------------
    def job_path(self, job: Job) -> Path:
        return self.jobs_dir / f"{job.id}.json"

    def save(self, job: Job) -> Job:
        write_json(self.job_path(job), asdict(job))
        return job

    def add(self, job: Job) -> Job:
        """Queue `job` (now), unless a job of that step and kind is there already (which is returned)."""
        path = self.job_path(job)
        if path.exists():
            return self.get(job.id) or job
        job.status, job.queued_at = QUEUED, time.time()
        return self.save(job)

    def get(self, job_id: str) -> Job | None:
        path = self.jobs_dir / f"{job_id}.json"
        return Job.from_dict(read_json(path)) if path.is_file() else None

    def jobs(self) -> list[Job]:
        """Every job, by step then kind (save, subset, full)."""
        if not self.jobs_dir.is_dir():
            return []
        out = [Job.from_dict(read_json(p)) for p in self.jobs_dir.glob("*.json")]
        return sorted(out, key=lambda j: (j.step, KINDS.index(j.kind) if j.kind in KINDS else 9))

    def mtimes(self) -> dict[str, float]:
        """job file name -> its modification time (what changed since the last look, without reading)."""
        try:
            return {e.name: e.stat().st_mtime for e in os.scandir(self.jobs_dir) if e.name.endswith(".json")}
        except FileNotFoundError:
            return {}

    def unfinished(self) -> list[Job]:
        return [j for j in self.jobs() if j.status not in FINISHED]

    # --- the series' other files ---------------------------------------------------------------------
    def plan(self) -> dict:
        if not self.plan_path.is_file():
            raise LabError(f"{self.folder}: no evaluation state of a training run here (no plan.json); give the "
                           "folder the training run's log names")
        return read_json(self.plan_path)

    def write_plan(self, plan: dict) -> None:
        write_json(self.plan_path, plan)

    def mark_ended(self, global_step: int) -> None:
        write_json(self.ended_path, {"global_step": int(global_step), "at": time.time()})

    def ended(self) -> bool:
        return self.ended_path.is_file()

    def begin(self) -> None:
        """Training runs (again: a run resumed from a checkpoint continues its series): the series is not ended."""
        self.ended_path.unlink(missing_ok=True)

    def heartbeat(self, pid: int, job_id: str | None, exited: bool = False) -> None:
        write_json(self.worker_path, {"pid": pid, "job": job_id, "at": time.time(), "exited": exited}, durable=False)

    def worker(self) -> dict | None:
        try:
            return read_json(self.worker_path) if self.worker_path.is_file() else None
        except LabError:
            return None

    def judgement(self) -> dict | None:
        return read_json(self.judgement_path) if self.judgement_path.is_file() else None

    def write_judgement(self, judgement: dict) -> None:
        write_json(self.judgement_path, judgement)


class Heartbeat:
    """A thread that writes the worker's pid, job and time into worker.json every few seconds (the callback
    reads it to tell a stuck worker from a busy one)."""

    def __init__(self, book: JobBook) -> None:
        self.book, self.job, self._over = book, None, threading.Event()
        self._thread = threading.Thread(target=self._beat, name="tb2lite-heartbeat", daemon=True)

    def _beat(self) -> None:
        every = float(training_defaults()["worker"]["heartbeat_s"])
        while not self._over.is_set():
            try:
                self.book.heartbeat(os.getpid(), self.job)
            except OSError:
                pass
            self._over.wait(every)

    def __enter__(self) -> "Heartbeat":
        if not self._thread.is_alive():
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._over.set()
        self._thread.join(timeout=5)
        try:
            self.book.heartbeat(os.getpid(), None, exited=True)
        except OSError:
            pass


def hold_lock(book: JobBook) -> int:
    """An fd holding the series' worker lock; a LabError naming the worker that holds it."""
    book.folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(book.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        held = (book.worker() or {}).get("pid")
        raise LabError(f"{book.folder}: a worker (pid {held}) is evaluating this series now; let it finish, or stop it "
                       "(kill PID) and run this again") from None
    return fd


def finish_command(folder: Path) -> str:
    """The one line that finishes a series' evaluations."""
    return f"python -m lab training finish {folder}"
