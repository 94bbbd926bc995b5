"""A race's checkpoints on the cluster, round by round: each checkpoint keeps its Ray actor (its engine
loaded) from one round to the next while the cluster has room, replays the round's steps through the
sweep's worker (replay's `only`: the run stays a checkpoint until every step is answered), and streams its
rows back to the driver, which alone writes the checkpoint file. A lost actor is re-placed and resumes from
the last step received, as in a sweep (lab.sweep.driver); a checkpoint dropped by the race, or left at its
end, keeps its `NAME.partial.jsonl` for `python -m lab replay --resume`."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from lab.runs.checkpoint import RunCheckpoint
from lab.runs.claims import RunNameTaken
from lab.sweep import progress as states
from lab.sweep.driver import Job, _kill, _Reporter, on_job_error
from lab.sweep.options import ANSWERS
from lab.sweep.worker import EngineWorker

BETWEEN = "between rounds"  # its round is done; the others' are not, or the race is judging it
ELIMINATED, FINALIST = "eliminated", "finalist"


@dataclass
class RaceJob(Job):
    """One checkpoint of a race: a sweep Job (its steps: those given so far) with its run (its name claimed, its
    checkpoint file) and every row received (step key -> per-step row)."""

    run: RunCheckpoint | None = None
    rows: dict = field(default_factory=dict)
    loaded: bool = False  # its actor holds the engine (placed, prepared)

    def read_kept(self) -> None:
        """The rows already in its checkpoint (a resumed race's): kept, not replayed again."""
        if self.run is not None and self.run.resumed:
            _, entries = self.run.kept()
            self.rows.update({f"{e.row.get('task_id')}/{e.row.get('step_idx')}": e.row for e in entries})
            self.done = len(self.rows)


def _place(ray, remote, job: RaceJob, out_dir: Path, resume: bool, report: _Reporter, audit: bool,
           stop: threading.Event) -> bool:
    """Start the job's actor and load its engine (once per placement); claim its run name at the first. False
    when the job failed (a name another engine or process holds)."""
    report(job, state=states.WAITING)  # until placed: a job done with its round gives its actor back meanwhile
    actor = job.actor = remote.options(**job.resources).remote(job.spec, audit)
    if stop.is_set():  # the stop watcher may have looked before this actor existed
        _kill(ray, actor)
    report(job, node=ray.get(actor.where.remote()), state=states.LOADING)  # returns once placed
    stem = ray.get(actor.prepare.remote(job.run_name, ANSWERS))
    other = report.claim(job, stem)
    if other is not None:
        report(job, error=f"{job.spec}: {other.spec} writes {stem}.json already; give each engine its own name "
                          "(name=… in its SPEC)", state=states.FAILED)
        return False
    if job.run is None:
        try:
            job.run = RunCheckpoint.claim(out_dir, stem, resume=resume, explicit=job.run_name is not None)
        except RunNameTaken as exc:
            report(job, error=f"{job.spec}: {exc}", state=states.FAILED)
            return False
        job.read_kept()
    job.loaded = True
    return True


def _stream(ray, job: RaceJob, steps_ref, keys: list[str], report: _Reporter) -> None:
    """One round's replay on the job's loaded actor: every row into the checkpoint file as it comes."""
    job.missing = ray.get(job.actor.missing.remote(keys))
    run = job.run
    try:
        header, entries = run.kept()
        report(job, done=len(job.rows), state=states.RUNNING)
        options = replace(job.options, only=frozenset(keys))
        for ref in job.actor.run.options(num_returns="streaming").remote(steps_ref, options, header, entries):
            message = ray.get(ref)
            if message[0] == "header":
                run.start(message[1])
            elif message[0] == "row":
                run.append(message[1], message[2])
                job.rows[f"{message[1].get('task_id')}/{message[1].get('step_idx')}"] = message[1]
                report(job, done=len(job.rows))
            elif message[0] == "result":
                job.result = message[1]
        run.sync()
        if job.result is not None:  # every selected step answered: the run is whole
            job.path = run.finish(job.result)
    finally:
        run.close()


def run_round(ray, remote, job: RaceJob, steps_ref, keys: list[str], out_dir: Path, resume: bool,
              report: _Reporter, audit: bool, stop: threading.Event) -> None:
    """Drive one job through one round (the steps `keys`: every round's so far), re-placing its actor when
    it (or its node) dies; on `stop`, keep every step received."""
    from ray.exceptions import RayActorError

    while True:
        if stop.is_set():
            report(job, state=states.STOPPED)
            return
        try:
            if not job.loaded and not _place(ray, remote, job, out_dir, resume, report, audit, stop):
                return
            _stream(ray, job, steps_ref, keys, report)
            report(job, state=BETWEEN)
            return
        except Exception as exc:  # noqa: BLE001 - a lost actor is placed again; any other error ends this job only
            if isinstance(exc, RayActorError):  # placed afresh next time
                _kill(ray, job.actor)
                job.actor, job.loaded = None, False
            if not on_job_error(job, exc, report, stop):
                return


def release(ray, job: RaceJob, state: str | None, report: _Reporter, audit: bool) -> None:
    """The job leaves the race: its actor closes (its engine and folder go), its name is let go (a checkpoint
    holding steps stays), its state becomes `state` (None: unchanged)."""
    if job.actor is not None:
        if audit:
            try:
                job.events = ray.get(job.actor.opened_files.remote())
            except Exception:  # noqa: BLE001 - already gone (its node died, or a stop killed it)
                pass
        release_actor(ray, job)
    if job.run is not None:
        job.run.release()
    if state is not None:
        report(job, state=state)


def run_race_round(ray, jobs: list[RaceJob], steps_ref, keys: list[str], out_dir: Path, resume: bool,
                   report: _Reporter, audit: bool, stop: threading.Event) -> None:
    """One round on every job given, all at once (Ray queues what the cluster cannot hold yet). A job done
    with its round gives its actor back while another waits for room, so a cluster smaller than the series
    never deadlocks; otherwise the actor stays for the next round."""
    remote = ray.remote(max_restarts=0, max_task_retries=0, max_concurrency=2)(EngineWorker)

    def one(job: RaceJob) -> None:
        run_round(ray, remote, job, steps_ref, keys, out_dir, resume, report, audit, stop)
        if job.loaded and any(j.state in (states.WAITING, states.REPLACING) for j in jobs if j is not job):
            release_actor(ray, job)

    threads = [threading.Thread(target=one, args=(job,), daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def release_actor(ray, job: RaceJob) -> None:
    """Close the job's actor (its engine stops) but keep its claim: it is placed again next round."""
    try:
        ray.get(job.actor.close.remote())
    except Exception:  # noqa: BLE001 - already gone (its node died, or a stop killed it)
        pass
    _kill(ray, job.actor)
    job.actor, job.loaded = None, False

