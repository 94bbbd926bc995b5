"""The sweep's driver: places one Ray actor per engine (or shard), receives finished steps as they come,
and alone writes checkpoints and result files. A lost actor (node) is re-placed and resumes from the
last step received."""
from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from lab.errors import LabError
from lab.runs.checkpoint import Checkpoint
from lab.resultfiles.resultfile import write_result_file
from lab.sweep.worker import EngineWorker

MAX_REPLACEMENTS = 3


@dataclass
class Job:
    """One engine, or one shard of it, with the steps it replays."""

    spec: str
    steps: list
    options: dict
    resources: dict
    run_name: str | None = None
    shard: tuple[int, int] | None = None  # (index, count)
    result: dict | None = None
    path: Path | None = None
    error: str | None = None
    replacements: int = 0
    events: list = field(default_factory=list)
    lengths: list = field(default_factory=list)  # prompt tokens of a shard's steps (for the merged context stats)


def _stem_for(job: Job, stem: str) -> str:
    from lab.sweep.shards import shard_stem

    return shard_stem(stem, job.shard[0]) if job.shard else stem


def run_job(ray, job: Job, out_dir: Path, resume: bool, bar: tqdm, overall: tqdm, audit: bool, lock) -> None:
    """Drive one job to its result, re-placing its actor when it (or its node) dies."""
    from ray.exceptions import RayActorError, RayTaskError

    remote = ray.remote(max_restarts=0, max_task_retries=0)(EngineWorker)
    while True:
        actor = remote.options(**job.resources).remote(job.spec, audit)
        try:
            stem = _stem_for(job, ray.get(actor.prepare.remote(job.run_name)))
            checkpoint = Checkpoint(out_dir / f"{stem}.partial.jsonl")
            header, entries = (checkpoint.read_entries() if (resume or job.replacements) and checkpoint.exists()
                               else (None, []))
            with lock:
                bar.n = len(entries)
                bar.refresh()
            for ref in actor.run.options(num_returns="streaming").remote(job.steps, job.options, header, entries):
                message = ray.get(ref)
                if message[0] == "header":
                    checkpoint.start(message[1])
                elif message[0] == "row":
                    checkpoint.append(message[1], message[2])
                    with lock:
                        bar.update(1)
                        overall.update(1)
                elif message[0] == "lengths":
                    job.lengths = message[1]
                else:
                    job.result = message[1]
            checkpoint.sync()
            job.path = out_dir / f"{stem}.json"
            write_result_file(job.path, job.result)
            checkpoint.remove()
            if audit:
                job.events = ray.get(actor.opened_files.remote())
            ray.get(actor.close.remote())
            return
        except RayActorError:
            job.replacements += 1
            resume = True
            if job.replacements > MAX_REPLACEMENTS:
                job.error = f"{job.spec}: its actor died {job.replacements} times"
                return
            print(f"\n{job.spec}: its node was lost; re-placing it (resumes from the last step received)", file=sys.stderr)
        except RayTaskError as exc:
            job.error = f"{job.spec}: {exc.cause if exc.cause is not None else exc}"
            return
        finally:
            ray.kill(actor, no_restart=True)


def run_jobs(ray, jobs: list[Job], out_dir: Path, resume: bool, audit: bool = False) -> None:
    """All jobs at once (Ray queues those its cluster cannot hold yet), one bar each and one overall."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    overall = tqdm(total=sum(len(j.steps) for j in jobs), desc="sweep", unit="step", file=sys.stderr, position=0)
    bars = [tqdm(total=len(j.steps), desc=j.spec + (f" [{j.shard[0]}/{j.shard[1]}]" if j.shard else ""),
                 unit="step", file=sys.stderr, position=i + 1, leave=False) for i, j in enumerate(jobs)]
    threads = [threading.Thread(target=run_job, args=(ray, j, out_dir, resume, b, overall, audit, lock), daemon=True)
               for j, b in zip(jobs, bars)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for b in bars:
        b.close()
    overall.close()
    failed = [j.error for j in jobs if j.error]
    if failed and len(failed) == len(jobs):
        raise LabError("; ".join(failed))
