"""One job of a series (lab.training.jobs) carried out: its checkpoint's files named, its steps replayed on an
engine, its outcome written into the job file the moment it is known.

Shared by the callback (a save evaluated in the training's turn, the model in memory) and the worker beside
training or `python -m lab training finish` (the saved folder loaded). A job that an earlier try left
half-done continues its own `.partial.jsonl`; one whose checkpoint folder is gone (`save_total_limit`
deleted it first) is skipped, saying so.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lab.data.step import Step
from lab.engines.common import EngineBase
from lab.runs.claims import TakenFn
from lab.training.evaluate import Outcome, RunPlan, evaluate_checkpoint, one_line
from lab.training.jobs import DONE, FAILED, QUEUED, RUNNING, SKIPPED, Job, JobBook
from lab.training.metrics import timing_metrics
from lab.training.naming import checkpoint_stem, subset_suffix
from lab.training.plan import SeriesPlan


@dataclass
class JobContext:
    """What every job of a series needs: the plan, its steps, the store's hooks and the engines' hands."""

    book: JobBook
    plan: SeriesPlan
    steps: list[Step]              # the selection's steps (a `save` or `full` job replays these)
    subset: list[Step]             # the subset's steps (a `subset` job replays these)
    engine_for: Callable[[Job], EngineBase]
    release: Callable[[EngineBase], None]
    import_file: Callable[[Path], str] | None = None
    taken: TakenFn | None = None
    served_by: Callable[[EngineBase], dict | None] | None = None  # what the job's file says of its server


def deleted_line(job: Job) -> str:
    return (f"{job.folder} was deleted before its evaluation began (the trainer's save_total_limit?); "
            "nothing to evaluate")


def _stem(ctx: JobContext, job: Job) -> str:
    """The checkpoint's file stem: the job's own from an earlier try, the subset job's for a whole replay, else
    the first free `SERIES-checkpoint-STEP[-N]`."""
    if job.stem:
        return job.stem
    if job.kind == "full":
        first = ctx.book.get(Job(job.step, "subset", job.folder).id)
        if first is not None and first.stem:
            return first.stem
    tails = ("", subset_suffix()) if job.kind == "subset" else ("",)
    return checkpoint_stem(Path(ctx.plan.eval_options().results), ctx.plan.series, job.step, ctx.taken, tails)


def run_plan(ctx: JobContext, job: Job, stem: str) -> tuple[RunPlan, list[Step]]:
    """(where the job's files go and what they record, the steps it replays)."""
    plan = ctx.plan
    options = plan.eval_options()
    subset = job.kind == "subset"
    selection = plan.selection
    if subset:
        selection = {"mode": plan.selection.get("mode"), "tasks": sorted(plan.subset["tasks"]), "limit": None,
                     "subset": {k: v for k, v in plan.subset.items() if k != "tasks"} | {"within": plan.selection}}
    run = RunPlan(out_dir=Path(options.results), stem=stem + (subset_suffix() if subset else ""),
                  eval_path=plan.replay_path, replay_fingerprint=plan.replay_fingerprint, replay_steps=plan.replay_steps,
                  selection=selection, extra={"training": _training_block(job, plan.subset)},
                  reference=options.reference and job.kind != "full",
                  budget_s=plan.budget_s, taken=ctx.taken, resume=True, reference_stem=stem,
                  reference_steps=ctx.steps if subset else None, reference_selection=plan.selection,
                  reference_extra={"training": dict(job.training)})
    return run, (ctx.subset if subset else ctx.steps)


def _training_block(job: Job, subset: dict | None) -> dict:
    """The result file's `training` block: the save's, and for a subset run the subset it replayed."""
    return {**job.training, "subset": subset} if job.kind == "subset" else dict(job.training)


def _finish(ctx: JobContext, job: Job, outcome: Outcome, seconds: float, save: Callable[[Job], Job]) -> Job:
    """Write what the evaluation gave into the job: done, failed, skipped (its folder went), or queued again
    (a Stop ended it: what it finished is kept and the next try continues it)."""
    job.seconds, job.finished_at = round(seconds, 3), time.time()
    if outcome.stopped:
        job.status, job.reason, job.finished_at = QUEUED, "stopped before it finished (kept; continued next time)", None
        return save(job)
    folder_gone = bool(job.training.get("saved", True)) and not Path(job.folder).is_dir()
    if outcome.error and folder_gone and outcome.result_path is None:
        job.status, job.reason = SKIPPED, deleted_line(job)
    else:
        job.status, job.reason = (FAILED, outcome.error) if outcome.error else (DONE, None)
    job.result_path = str(outcome.result_path) if outcome.result_path else None
    job.reference_path = str(outcome.reference_path) if outcome.reference_path else None
    job.metrics = {**outcome.metrics, **timing_metrics(seconds, bool(outcome.error))}
    job.store_line = outcome.store_line
    return save(job)


def run_job(ctx: JobContext, job: Job, stop=None, record: bool = True) -> Job:
    """Evaluate `job` (module docstring); never raises for a failure of the evaluation itself. `record`: write
    its state into the series' folder (an evaluation of the model in memory between saves has no folder to
    evaluate later, and is not recorded)."""
    save = ctx.book.save if record else (lambda j: j)
    saved = bool(job.training.get("saved", True))
    if saved and not Path(job.folder).is_dir():
        job.status, job.reason, job.finished_at = SKIPPED, deleted_line(job), time.time()
        return save(job)
    job.status, job.attempts, job.started_at, job.reason = RUNNING, job.attempts + 1, time.time(), None
    save(job)
    started = time.perf_counter()
    engine = None
    try:
        job.stem = _stem(ctx, job)
        save(job)
        plan, steps = run_plan(ctx, job, job.stem)
        engine = ctx.engine_for(job)
        job.server = ctx.served_by(engine) if ctx.served_by is not None else None
        outcome = evaluate_checkpoint(engine, steps, plan, ctx.import_file, stop=stop)
    except Exception as exc:  # noqa: BLE001 - an engine that cannot start is a failed evaluation, not a stop
        outcome = Outcome(error=one_line(exc), stopped=bool(stop is not None and stop.is_set()))
    finally:
        if engine is not None:
            ctx.release(engine)
    return _finish(ctx, job, outcome, time.perf_counter() - started, save)
