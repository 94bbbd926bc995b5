"""Race a checkpoint series instead of replaying all of it: the selected steps' tasks in rounds
(lab.sweep.race_plan), each round replayed on every checkpoint still racing (lab.sweep.race_driver), then
judged (lab.sweep.race_book, lab.scoring.sequential): a checkpoint worse than the leader with 95 %
confidence stops. The race ends when one checkpoint is left, the steps run out or the step budget is
spent, and writes race.json beside the runs. The CLI and the Batch tab share this path."""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lab.errors import LabError
from lab.sweep.plan import Cluster, Sweep
from lab.sweep.progress import ProgressFn
from lab.sweep.race_book import (
    BUDGET_SPENT, FAILED, FINISHED, ONE_LEFT, STEPS_RAN_OUT, STOPPED, RaceBook, RoundRecord,
)
from lab.sweep.race_plan import RacePlan, plan_rounds

RACE_FILE = "race"  # race.json; a folder holding another race's gets race-2.json …
F1 = "command_f1"  # the per-step score a race judges (the run's score is its mean)


@dataclass
class Race:
    """What to race: a sweep of a series (one engine per checkpoint, no shards) and the race's own options."""

    sweep: Sweep
    round_tasks: int
    seed: int = 0
    budget_steps: int | None = None


@dataclass
class RaceOutcome:
    """How a race ended: its book (standings, rounds, why it ended), its jobs (files, errors) and race.json."""

    book: RaceBook
    jobs: list
    path: Path


RoundFn = Callable[[RaceBook, RoundRecord | None], None]  # after every round (None: before the first)


def check_race(race: Race, plan: RacePlan) -> None:
    """LabError (one line) for a race that cannot run: fewer than two checkpoints, shards, a budget below
    one round."""
    sweep = race.sweep
    if len(sweep.specs) < 2:
        raise LabError(f"a race needs at least two checkpoints (got {len(sweep.specs)}): give more --engine SPECs "
                       "or a pattern such as 'vllm:/ckpts/checkpoint-{100..500..100}'")
    if sweep.shards > 1:
        raise LabError("--race replays each checkpoint as one engine, round by round: drop --shards")
    first = len(plan.keys[0]) * len(sweep.specs) if plan.rounds else 0
    if race.budget_steps is not None and race.budget_steps < first:
        raise LabError(f"--budget-steps {race.budget_steps}: the first round alone is {first} steps "
                       f"({len(plan.keys[0])} steps × {len(sweep.specs)} checkpoints); give at least that")


def race_path(out_dir: Path, resume: bool) -> Path:
    """race.json in `out_dir`, or race-2.json … when another race's file is there (a resumed race rewrites its own)."""
    path = out_dir / f"{RACE_FILE}.json"
    k = 2
    while path.exists() and not resume:
        path, k = out_dir / f"{RACE_FILE}-{k}.json", k + 1
    return path


def race_document(race: Race, book: RaceBook, jobs: list) -> dict:
    """race.json: the race's settings, every round, every checkpoint's standing with its file and error."""
    body = book.as_dict()
    full = len(race.sweep.steps) * len(race.sweep.specs)
    spent = sum(len(job.rows) for job in jobs)  # every step replayed (a resumed race's earlier ones too)
    for entry, job in zip(body["checkpoints"], jobs):
        entry["file"] = str(job.path or (job.run.path if job.run is not None else "")) or None
        entry["complete"] = job.path is not None
        if job.error:
            entry["error"] = job.error
    return {"seed": race.seed, "round_tasks": race.round_tasks, "budget_steps": race.budget_steps,
            "steps_spent": spent, "full_sweep_steps": full, "share_of_full_sweep": round(spent / full, 4) if full else None,
            "replay": race.sweep.source.path, **body}


def write_json(path: Path, document: dict) -> None:
    """Write `document` whole or not at all (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temp, path)


def _book(race: Race, plan: RacePlan) -> RaceBook:
    sweep = race.sweep
    names = [n or s for n, s in zip(sweep.run_names or [None] * len(sweep.specs), sweep.specs)]
    return RaceBook(names, sweep.specs, [s.key for s in sweep.steps], {s.key: s.task_id for s in sweep.steps}, plan)


def _judge(book: RaceBook, jobs: list, keys: list[str]) -> None:
    """Hand the book every racing job's scores on the steps given so far (a resumed checkpoint's later rows
    wait for their round)."""
    for j in book.racing:
        rows = jobs[j].rows
        for key in keys:
            row = rows.get(key)
            if row is not None and isinstance(row.get(F1), (int, float)):
                book.record(j, key, float(row[F1]))


def run_rounds(ray, race: Race, plan: RacePlan, book: RaceBook, jobs: list, steps_ref, resume: bool,
               report, audit: bool, stop: threading.Event, on_round: RoundFn) -> None:
    """Every round until the race ends (its reason in `book.ended`)."""
    from lab.sweep.race_driver import ELIMINATED, release, run_race_round

    given: list[str] = []
    for keys in plan.keys:
        racing = book.racing
        cost = len(keys) * len(racing)
        if race.budget_steps is not None and book.planned_steps + cost > race.budget_steps:
            book.end(BUDGET_SPENT)
            return
        given += keys
        wanted = set(given)
        for j in racing:
            jobs[j].steps = [s for s in race.sweep.steps if s.key in wanted]
        run_race_round(ray, [jobs[j] for j in racing], steps_ref, list(given), race.sweep.out_dir, resume, report,
                       audit, stop)
        if stop.is_set():
            book.end(STOPPED)
            return
        for j in racing:
            if jobs[j].error:  # it leaves the race, and its actor gives its place back
                book.fail(j)
                release(ray, jobs[j], None, report, audit)
        book.names = [job.run.name if job.run is not None else name for job, name in zip(jobs, book.names)]
        _judge(book, jobs, given)
        if not book.racing:
            book.end(FAILED)
            return
        record = book.close_round(cost)
        for name in record.eliminated:
            release(ray, jobs[book.names.index(name)], ELIMINATED, report, audit)
        if len(book.racing) == 1:
            book.end(ONE_LEFT)
        on_round(book, record)
        if book.ended:
            return
    book.end(STEPS_RAN_OUT)


def execute_race(race: Race, address: str | None, resume: bool, *, progress: ProgressFn | None = None,
                 stop: threading.Event | None = None, audit: bool = False,
                 connected: Callable[[Cluster], None] | None = None,
                 on_round: RoundFn | None = None) -> RaceOutcome:
    """Connect to Ray, race the series round by round (progress to `progress`, the book to `on_round` before
    the first round and after every one), release every actor and write race.json (after every round too)."""
    from lab.sweep.connect import connect, dashboard_url, disconnect, sweep_address
    from lab.sweep.driver import _Reporter, _stop_watch
    from lab.sweep.plan import plan_jobs, refuse_shared_names, run_stems
    from lab.sweep.race_driver import FINALIST, RaceJob, release

    sweep = race.sweep
    plan = plan_rounds(sweep.steps, race.round_tasks, race.seed)
    check_race(race, plan)
    refuse_shared_names(sweep.specs, run_stems(sweep.specs, sweep.run_names or [None] * len(sweep.specs)))
    book = _book(race, plan)
    path = race_path(sweep.out_dir, resume)
    ray, context = connect(address, stop)  # the CLI's (no stop) joins Ray in its main thread
    stop = stop or threading.Event()
    try:
        nodes = ray.nodes()
        if connected is not None:
            connected(Cluster(sweep_address(address), sum(1 for n in nodes if n.get("Alive")), dashboard_url(context)))
        jobs = [RaceJob(**{**vars(job), "steps": []}) for job in plan_jobs(sweep, nodes)]
        report = _Reporter(jobs, progress)

        def after(done: RaceBook, record: RoundRecord | None) -> None:
            write_json(path, race_document(race, done, jobs))
            if on_round is not None:
                on_round(done, record)

        after(book, None)
        over = threading.Event()
        watcher = threading.Thread(target=_stop_watch, args=(ray, jobs, stop, over), name="lab-race-stop", daemon=True)
        watcher.start()
        try:
            run_rounds(ray, race, plan, book, jobs, ray.put(sweep.steps), resume, report, audit, stop, after)
        finally:
            if book.ended is None:  # an error of the driver itself
                book.end(FAILED)
            for j, job in enumerate(jobs):
                release(ray, job, FINALIST if book.active[j] and book.ended in FINISHED else None, report, audit)
            over.set()
            watcher.join()
            write_json(path, race_document(race, book, jobs))
    finally:
        disconnect(ray)
    return RaceOutcome(book, jobs, path)
