"""The callback's side of a series' evaluations: the jobs it queues, the worker it keeps, the results it hands
to the trainer's log as they arrive, and the wait at the end of training.

At a save the callback only writes the job and returns. At most once a second (options.yaml `worker.poll_s`)
it looks at the jobs' files: a finished job not yet handed on goes to the trainer's log at its save's global
step, and the worker is checked (lab.training.worker_process). At the end of training it marks the series
ended, waits up to `wait_at_end_s` for what is queued (and, with a subset, for the whole replays the series
judgement asks for), handing each result on as it lands, and then says in one line what is left and the
command that finishes it; the worker goes on while the training's process runs.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from lab.training.jobs import DONE, FAILED, FINISHED, SKIPPED, Job, JobBook, finish_command
from lab.training.options import EvalOptions, training_defaults
from lab.training.worker_process import WorkerProcess

logger = logging.getLogger("lab.training")
Deliver = Callable[[Job], None]


def finalists_pending(book: JobBook, subset: dict | None, jobs: list[Job] | None = None) -> bool:
    """With a subset: the series has ended and its judgement has not yet seen every checkpoint evaluated on it."""
    if not subset or not book.ended():
        return False
    done = sorted(j.step for j in (book.jobs() if jobs is None else jobs) if j.kind == "subset" and j.status == DONE)
    judged = sorted((book.judgement() or {}).get("judged", []))
    return bool(done) and done != judged


class SeriesState:
    """One training run's series, as the callback keeps it (module docstring)."""

    def __init__(self, book: JobBook, options: EvalOptions, subset: dict | None) -> None:
        self.book, self.options, self.subset = book, options, subset
        self.worker = WorkerProcess(book, options)
        self.delivered: set[str] = {j.id for j in book.jobs() if j.status in FINISHED}  # (an earlier run's)
        self._mtimes: dict[str, float] = {}
        self._jobs: dict[str, Job] = {}  # job id -> as its file last read (read again when its time changes)
        self._looked = 0.0

    def refresh(self) -> list[Job]:
        """Read the job files whose time changed; the jobs (all of them, as now on disk)."""
        now = self.book.mtimes()
        for name in sorted(n for n, t in now.items() if self._mtimes.get(n) != t):
            job = self.book.get(name.removesuffix(".json"))
            if job is not None:
                self._jobs[job.id] = job
        self._mtimes = now
        return list(self._jobs.values())

    def has_work(self) -> bool:
        jobs = self.refresh()
        return any(j.status not in FINISHED for j in jobs) or finalists_pending(self.book, self.subset, jobs)

    def queue(self, job: Job) -> Job:
        return self.book.add(job)

    def record(self, job: Job) -> None:
        """A job the callback evaluated itself (in the training's turn): written and already handed on."""
        self.book.save(job)
        self.delivered.add(job.id)

    def arrivals(self) -> list[Job]:
        """Finished jobs not handed on yet."""
        out = [j for j in self.refresh() if j.status in FINISHED and j.id not in self.delivered]
        self.delivered.update(j.id for j in out)
        return sorted(out, key=lambda j: j.id)

    def keep_worker(self) -> None:
        """A worker for the job just queued: started, or started again saying why (lab.training.worker_process)."""
        for line in self.worker.check(has_work=True):
            logger.warning("TB2-lite: %s", line)

    def look(self, deliver: Deliver, force: bool = False) -> None:
        """Hand on what arrived and check the worker, at most once per `worker.poll_s` unless `force`."""
        now = time.monotonic()
        if not force and now - self._looked < float(training_defaults()["worker"]["poll_s"]):
            return
        self._looked = now
        try:
            for job in self.arrivals():
                deliver(job)
            for line in self.worker.check(self.has_work()):
                logger.warning("TB2-lite: %s", line)
        except Exception as exc:  # noqa: BLE001 - a look that fails is a line; training goes on
            logger.warning("TB2-lite: could not read the evaluations' state in %s (%s)", self.book.folder, exc)

    def end(self, global_step: int, wait_s: float | None, deliver: Deliver) -> None:
        """The end of training (module docstring)."""
        self.book.mark_ended(global_step)
        started = time.monotonic()
        poll = float(training_defaults()["worker"]["poll_s"])
        while True:
            self.look(deliver, force=True)
            busy = self.has_work()
            if not busy and not self.worker.running:
                break
            if not busy and time.monotonic() - started > poll:  # all done: the worker is on its way out
                break
            if self.worker.given_up or (wait_s is not None and time.monotonic() - started >= wait_s):
                break
            time.sleep(min(poll, 0.25))
        left = [j for j in self.refresh() if j.status not in FINISHED]
        if left or finalists_pending(self.book, self.subset):
            what = ", ".join(j.label for j in left) or "the whole replays the series judgement asks for"
            waited = time.monotonic() - started
            goes = "the worker goes on while this process runs; " if self.worker.running else ""
            logger.warning("TB2-lite: %d evaluation(s) not finished %.0f s after training ended (%s); %sto finish them "
                           "later: %s", len(left), waited, what, goes, finish_command(self.book.folder))


def delivery_line(job: Job) -> str | None:
    """The warning a finished job gives (None: a plain success)."""
    if job.status == FAILED:
        return f"TB2-lite evaluation of {job.label} failed after {job.seconds or 0:.1f} s: {job.reason}"
    if job.status == SKIPPED:
        return f"TB2-lite: {job.label} skipped: {job.reason}"
    if job.store_line and job.store_line.startswith("warning"):
        return f"TB2-lite: {job.store_line}"
    return None
