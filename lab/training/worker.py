"""The evaluation worker: a process of its own that evaluates a series' queued checkpoints while training goes on
(`follow`), or finishes what is left afterwards (`python -m lab training finish`).

Apart from the training process, so training keeps its GIL, its CUDA context and its memory. It reads
saved folders: on a managed `vllm serve` kept between jobs (a LoRA checkpoint's adapter loaded into the
running server, a full checkpoint a server of its own), or with the in-process transformers engine on the
device the callback names. One worker at a time per series (a lock file); the jobs' files say what is left.

Order: the saves' jobs by step (with `queue="latest"` the newest alone, the ones it overtook skipped); once
training has ended and none is left, the series judgement on the subset (lab.training.finalists) queues the
whole replay of each checkpoint it cannot rule out as the best, and those run last. A Stop (the training
process gone, Ctrl-C) ends the job under way at once, keeping what it finished for the next try.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable

from lab.engines.common import EngineBase
from lab.engines.registry import create_engine
from lab.engines.spec import split_spec
from lab.errors import LabError
from lab.training.checkpoint_job import JobContext, run_job
from lab.training.finalists import judge, judgement_line
from lab.training.jobs import DONE, FAILED, QUEUED, RUNNING, SKIPPED, Heartbeat, Job, JobBook, hold_lock
from lab.training.options import training_defaults
from lab.training.plan import SeriesPlan
from lab.training.storing import importer, stored_names
from lab.training.vllm_checkpoints import CheckpointServer

Say = Callable[[str], None]


class CheckpointEngines:
    """The engines a worker replays saved checkpoints on (module docstring)."""

    def __init__(self, plan: SeriesPlan) -> None:
        options = plan.eval_options()
        self.kind = options.engine
        self.server = None if options.in_memory else CheckpointServer(options)

    def engine_for(self, job: Job) -> EngineBase:
        if self.server is not None:
            return self.server.engine_for(Path(job.folder))
        engine = create_engine(checked_spec(job, self.kind))
        engine.load()
        return engine

    def served_by(self, engine: EngineBase) -> dict | None:
        """The server a job runs on (its pid, the servers this worker started so far, its load or swap time)."""
        held = self.server.engine if self.server is not None else None
        if held is None or held.server is None:
            return None
        return {"pid": held.server.pid, "starts": self.server.starts, "load_s": round(held.load_time_sec or 0.0, 3)}

    def release(self, engine: EngineBase) -> None:
        if self.server is None:
            engine.close()  # a new checkpoint each job: its weights go

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def checked_spec(job: Job, kind: str) -> str:
    """The job's SPEC when it loads the job's own checkpoint folder with the series' in-process engine `kind` (the
    folder as the model, or as the adapter of a base model): a job file is data, and names nothing else to load
    or connect to."""
    parsed = split_spec(job.spec or "")
    folder = str(Path(job.folder))
    if parsed.kind != kind or folder not in (parsed.target, parsed.options.get("lora")):
        raise LabError(f"{job.label}: its SPEC {str(job.spec)[:120]!r} is not a {kind} SPEC of its checkpoint "
                       f"folder {folder}; evaluate it with python -m lab replay")
    return job.spec


def requeue_stale(book: JobBook, say: Say) -> None:
    """Jobs left `running` by a worker that is gone: queued again to continue (their partial files are kept),
    or failed once the worker has died during them as often as options.yaml `worker.restarts` allows."""
    limit = int(training_defaults()["worker"]["restarts"])
    for job in book.jobs():
        if job.status != RUNNING:
            continue
        if job.attempts > limit:
            job.status, job.reason = FAILED, f"the evaluation worker stopped during it {job.attempts} times; left alone"
        else:
            job.status, job.reason = QUEUED, "the evaluation worker stopped during it; continued"
        book.save(job)
        say(f"{job.label}: {job.reason}")


def next_job(book: JobBook, policy: str, say: Say) -> Job | None:
    """The next queued job: saves by step (`latest`: the newest, the others skipped), whole replays last."""
    queued = [j for j in book.jobs() if j.status == QUEUED]
    saves = [j for j in queued if j.kind != "full"]
    if policy == "latest" and len(saves) > 1:
        newest = max(saves, key=lambda j: j.step)
        for job in saves:
            if job is not newest:
                job.status, job.reason, job.finished_at = SKIPPED, f"overtaken by checkpoint-{newest.step} " \
                                                                   "(queue='latest')", time.time()
                book.save(job)
                say(f"{job.label}: skipped: {job.reason}")
        return newest
    return saves[0] if saves else (queued[0] if queued else None)


def queue_finalists(book: JobBook, plan: SeriesPlan, say: Say) -> bool:
    """Judge the series on the subset and queue the whole replay of each checkpoint kept; True when a job was
    queued. Judged again only when the evaluated checkpoints changed (`finish --retry` finished another)."""
    if not plan.subset:
        return False
    done = {j.step: j for j in book.jobs() if j.kind == "subset" and j.status == DONE and j.result_path}
    if not done:
        return False
    earlier = book.judgement()
    if earlier is not None and sorted(earlier.get("judged", [])) == sorted(done):
        return False
    judgement = judge({s: Path(j.result_path) for s, j in done.items()})
    book.write_judgement(judgement.to_dict())
    say(judgement_line(judgement))
    added = False
    for step in judgement.finalists:
        subset_job = done[step]
        full = Job(step, "full", subset_job.folder, subset_job.spec, subset_job.training)
        if book.get(full.id) is None:
            book.add(full)
            added = True
    return added


def context(book: JobBook, plan: SeriesPlan, engines: CheckpointEngines) -> JobContext:
    steps, subset = plan.steps()
    options, settings = plan.eval_options(), plan.lab_settings()
    return JobContext(book, plan, steps, subset, engines.engine_for, engines.release,
                      import_file=importer(options, settings), taken=stored_names(options, settings),
                      served_by=engines.served_by)


def run_worker(folder: str | os.PathLike, *, follow: bool, stop: threading.Event, say: Say,
               retry: bool = False, beat: Heartbeat | None = None, lock: int | None = None) -> list[Job]:
    """Evaluate the series' jobs in `folder` (module docstring) until none is left (`follow`: until the training
    has ended too), or `stop`; returns the jobs as they stand. `retry`: failed jobs are queued again first.
    `beat`, `lock`: the heartbeat already going and the worker lock already held (the worker command takes both
    before its heavy imports)."""
    book = JobBook(Path(folder).absolute())
    plan = SeriesPlan.from_dict(book.plan())
    lock = hold_lock(book) if lock is None else lock
    if plan.cwd and Path(plan.cwd).is_dir():
        os.chdir(plan.cwd)  # relative paths of the training's options read as they did there
    engines = None
    beat = beat or Heartbeat(book)
    try:
        requeue_stale(book, say)
        if retry:
            for job in book.jobs():
                if job.status == FAILED:
                    job.status, job.reason = QUEUED, "tried again"
                    book.save(job)
        engines = CheckpointEngines(plan)
        ctx = context(book, plan, engines)
        poll = float(training_defaults()["worker"]["poll_s"])
        with beat:
            while not stop.is_set():
                job = next_job(book, plan.options.get("queue", "all"), say)
                if job is None:
                    if follow and not book.ended():
                        stop.wait(poll)
                        continue
                    if queue_finalists(book, plan, say):
                        continue
                    break
                beat.job = job.id
                say(f"{job.label}: evaluating (try {job.attempts + 1})")
                job = run_job(ctx, job, stop)
                beat.job = None
                say(job_line(job))
    finally:
        if engines is not None:
            engines.close()
        os.close(lock)
    return book.jobs()


def job_line(job: Job) -> str:
    """`checkpoint-4: done in 12.3 s, score 31.2 (FILE)` and the like."""
    if job.status == DONE:
        score = next((v for k, v in job.metrics.items() if k.endswith("/score")), None)
        said = f", score {score:.2f}" if isinstance(score, (int, float)) else ""
        return f"{job.label}: done in {job.seconds or 0:.1f} s{said} ({job.result_path})"
    if job.status == QUEUED:
        return f"{job.label}: {job.reason}"
    return f"{job.label}: {job.status}: {job.reason}"
