"""The sweep's driver: places one Ray actor per engine (or shard), receives finished steps as they come,
and alone writes checkpoints and result files. A lost actor (node) is re-placed and resumes from the
last step received; a stop kills the actors and keeps every step received. Progress goes to one
callback (lab.sweep.progress), which the terminal and the Batch tab each draw their way."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import LabError
from lab.runs.checkpoint import RunCheckpoint
from lab.runs.claims import RunNameTaken
from lab.sweep import progress as states
from lab.sweep.options import JobOptions
from lab.sweep.progress import JobProgress, ProgressFn
from lab.sweep.worker import EngineWorker

MAX_REPLACEMENTS = 3


@dataclass
class Job:
    """One engine, or one shard of it, with the steps it replays."""

    spec: str
    steps: list
    options: JobOptions
    resources: dict
    run_name: str | None = None
    shard: tuple[int, int] | None = None  # (index, count)
    result: dict | None = None
    path: Path | None = None
    error: str | None = None
    replacements: int = 0
    events: list = field(default_factory=list)
    lengths: list = field(default_factory=list)  # prompt tokens of a shard's steps (for the merged context stats)
    missing: int = 0  # steps its engine has no answer for (a stored run's): not counted in its progress
    done: int = 0
    state: str = states.WAITING
    node: str | None = None
    actor: Any = None  # the live actor handle (killed on stop)

    @property
    def label(self) -> str:
        return self.spec + (f" [{self.shard[0]}/{self.shard[1]}]" if self.shard else "")

    def snapshot(self) -> JobProgress:
        return JobProgress(self.spec, self.label, self.done, len(self.steps) - self.missing, self.state, self.node,
                           self.error, self.missing)


class _Reporter:
    """Hands every job's snapshot to the progress callback after each change (one change at a time),
    and keeps which job writes which result file stem."""

    def __init__(self, jobs: list[Job], progress: ProgressFn | None) -> None:
        self.jobs, self.progress, self.lock = jobs, progress, threading.Lock()
        self.stems: dict[str, Job] = {}

    def claim(self, job: Job, stem: str) -> Job | None:
        """Take `stem` for `job`; the other job when one holds it already (two engines, one file)."""
        with self.lock:
            holder = self.stems.setdefault(stem, job)
            return None if holder is job else holder

    def __call__(self, job: Job, **changes) -> None:
        with self.lock:
            for key, value in changes.items():
                setattr(job, key, value)
            if self.progress is not None:
                self.progress([j.snapshot() for j in self.jobs])


def _stem_for(job: Job, stem: str) -> str:
    from lab.sweep.shards import shard_stem

    return shard_stem(stem, job.shard[0]) if job.shard else stem


def _kill(ray, actor) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001 - already gone (its node died, or the stop watcher killed it)
        pass


def run_job(ray, job: Job, out_dir: Path, resume: bool, report: _Reporter, audit: bool,
            stop: threading.Event) -> None:
    """Drive one job to its result, re-placing its actor when it (or its node) dies; on `stop`, keep
    the checkpoint (every step received) for a later resume."""
    # two calls at once: `discard` (on a stop) runs beside a streaming `run`
    remote = ray.remote(max_restarts=0, max_task_retries=0, max_concurrency=2)(EngineWorker)
    claimed: list[RunCheckpoint | None] = [None]  # the job's run, held from its first placement to its end
    try:
        _drive(ray, remote, job, out_dir, resume, report, audit, stop, claimed)
    finally:
        if claimed[0] is not None:
            claimed[0].release()


def _drive(ray, remote, job: Job, out_dir: Path, resume: bool, report: _Reporter, audit: bool,
           stop: threading.Event, claimed: list[RunCheckpoint | None]) -> None:
    """run_job's loop; `claimed[0]` holds the job's run (its name and checkpoint) once its engine has named it."""
    while True:
        if stop.is_set():
            report(job, state=states.STOPPED)
            return
        actor = job.actor = remote.options(**job.resources).remote(job.spec, audit)
        if stop.is_set():  # the stop watcher may have looked before this actor existed
            _kill(ray, actor)
        run = None
        try:
            report(job, node=ray.get(actor.where.remote()), state=states.LOADING)  # returns once placed
            stem = _stem_for(job, ray.get(actor.prepare.remote(job.run_name, job.options.what)))
            other = report.claim(job, stem)
            if other is not None:  # its name is known only once loaded: refused before it writes anything
                report(job, error=f"{job.spec}: {other.spec} writes {stem}.json already; give each engine its own "
                                  "name (name=… in its SPEC)", state=states.FAILED)
                return
            if claimed[0] is None:  # another process's run of that name is never replaced (lab.runs.claims)
                try:
                    claimed[0] = RunCheckpoint.claim(out_dir, stem, resume=resume, explicit=job.run_name is not None)
                except RunNameTaken as exc:
                    report(job, error=f"{job.spec}: {exc}", state=states.FAILED)
                    return
            job.missing = ray.get(actor.missing.remote([s.key for s in job.steps]))
            run = claimed[0]
            header, entries = run.kept() if run.resumed or job.replacements else (None, [])
            report(job, done=len(entries), state=states.RUNNING)
            for ref in actor.run.options(num_returns="streaming").remote(job.steps, job.options, header, entries):
                message = ray.get(ref)
                if message[0] == "header":
                    run.start(message[1])
                elif message[0] == "row":
                    run.append(message[1], message[2])
                    report(job, done=job.done + 1)
                elif message[0] == "lengths":
                    job.lengths = message[1]
                else:
                    job.result = message[1]
            run.sync()
            job.path = run.finish(job.result)
            if audit:
                job.events = ray.get(actor.opened_files.remote())
            ray.get(actor.close.remote())
            report(job, state=states.DONE)
            return
        except Exception as exc:  # noqa: BLE001 - a lost actor is placed again; any other error ends this job only
            if not on_job_error(job, exc, report, stop):
                return
        finally:
            if run is not None:
                run.close()  # every row received stays on disk (a stop or a lost node keeps them)
            _kill(ray, actor)
            job.actor = None


def on_job_error(job: Job, exc: Exception, report: _Reporter, stop: threading.Event) -> bool:
    """What an error while driving a job means: True to place it again (its actor or node died), else the job
    ends, stopped (a Stop) or failed with the reason."""
    from ray.exceptions import RayActorError, RayTaskError

    if isinstance(exc, RayActorError):
        return lost_actor(job, report, stop)
    if isinstance(exc, RayTaskError):
        task_failed(job, exc, report, stop)
    else:  # e.g. the driver cannot write its file: this job fails, the others go on
        driver_failed(job, exc, report)
    return False


def lost_actor(job: Job, report: _Reporter, stop: threading.Event) -> bool:
    """The job's actor (or its node) died: True to place it again, False when that was a stop or the
    job has lost too many."""
    if stop.is_set():
        report(job, state=states.STOPPED)
        return False
    job.replacements += 1
    if job.replacements > MAX_REPLACEMENTS:
        report(job, error=f"{job.spec}: its actor died {job.replacements} times", state=states.FAILED)
        return False
    report(job, state=states.REPLACING, node=None)
    return True


def task_failed(job: Job, exc: Exception, report: _Reporter, stop: threading.Event) -> None:
    """The job's replay raised on its actor: a failure, or a stop (its folder went, or its server died)."""
    if stop.is_set():
        report(job, state=states.STOPPED)
        return
    cause = getattr(exc, "cause", None)
    report(job, error=f"{job.spec}: {cause if cause is not None else exc}", state=states.FAILED)


def driver_failed(job: Job, exc: Exception, report: _Reporter) -> None:
    """The driver's own part failed (e.g. it cannot write the file): this job fails, the others go on."""
    why = str(exc) if isinstance(exc, LabError) else f"{type(exc).__name__}: {exc}"
    report(job, error=f"{job.spec}: {why}", state=states.FAILED)


DISCARD_WAIT_S = 5.0


def _discard_all(ray, actors: list) -> None:
    """Ask every live actor to remove its temporary folder (a few seconds at most: a lost one is skipped)."""
    refs = []
    for actor in actors:
        try:
            refs.append(actor.discard.remote())
        except Exception:  # noqa: BLE001 - already gone
            pass
    try:
        ray.wait(refs, num_returns=len(refs), timeout=DISCARD_WAIT_S)
    except Exception:  # noqa: BLE001 - an actor died meanwhile: its folder goes with the next actor there
        pass


def _stop_watch(ray, jobs: list[Job], stop: threading.Event, over: threading.Event) -> None:
    """Kill every live actor once `stop` is set (their servers die with them, their folders first);
    finished steps stay."""
    while not over.is_set():
        if stop.wait(0.1):
            _discard_all(ray, [job.actor for job in jobs if job.actor is not None])
            for job in jobs:
                if job.actor is not None:
                    _kill(ray, job.actor)
            over.wait(0.5)  # again: an actor re-placed just as the stop came


def run_jobs(ray, jobs: list[Job], out_dir: Path, resume: bool, audit: bool = False,
             progress: ProgressFn | None = None, stop: threading.Event | None = None) -> None:
    """All jobs at once (Ray queues those its cluster cannot hold yet); `progress` sees every change,
    `stop` cancels the sweep (what finished is kept; a later run with `resume` continues)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stop = stop or threading.Event()
    report = _Reporter(jobs, progress)
    if progress is not None:
        progress([j.snapshot() for j in jobs])
    over = threading.Event()
    watcher = threading.Thread(target=_stop_watch, args=(ray, jobs, stop, over), name="lab-sweep-stop", daemon=True)
    watcher.start()
    threads = [threading.Thread(target=run_job, args=(ray, j, out_dir, resume, report, audit, stop), daemon=True)
               for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    over.set()
    watcher.join()
    failed = [j.error for j in jobs if j.error]
    if failed and len(failed) == len(jobs):
        raise LabError("; ".join(failed))
