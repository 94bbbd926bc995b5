"""Compare's answers to a step: the engines' jobs started, awaited as they answer, followed from another page,
and the stored and reference columns warmed ahead in the background."""
from __future__ import annotations

import queue
import threading
from dataclasses import replace
from typing import Iterator

from lab.data.step import Step
from lab.ui.compare.inflight import Job, inflight_of
from lab.ui.compare.reference_nll import needs_reference_prefill, reference_nll
from lab.ui.compare.step_data import answer_step, engine_view, heatmap_for
from lab.ui.compare.step_view import READY, EngineView, engine_view_state
from lab.workspace import EngineEntry, LabContext

_WARM_LOCK = threading.Lock()
LIVE_EVERY_S = 1.0  # how often a waiting column's elapsed time and tokens so far are refreshed


def warm_instant_engines(ctx: LabContext, start_key: str | None = None) -> threading.Thread:
    """Precompute, in one background thread, the columns of every stored/reference engine for
    every step (from `start_key` on, wrapping), so that switching steps only renders HTML."""

    def work() -> None:
        if not _WARM_LOCK.acquire(blocking=False):
            return  # a warmer is already running; it re-reads the engine list every step
        try:
            if ctx.pool is not None:
                ctx.pool.wait()
            keys = ctx.step_keys()
            if not keys:
                return
            first = keys.index(start_key) if start_key in keys else 0
            for key in keys[first:] + keys[:first]:
                step = ctx.replay.by_key[key]
                entries = ctx.engine_entries()
                for entry in entries:
                    if entry.answers_from_data and entry.state == "ready" and (entry.name, key) not in ctx.views:
                        answer_step(ctx, entry, step)
                heatmap_for(ctx, step, [engine_view(ctx, e, step, compute_instant=False) for e in entries], None)
        finally:
            _WARM_LOCK.release()

    thread = threading.Thread(target=work, name="lab-warm-columns", daemon=True)
    thread.start()
    return thread



def start_answers(ctx: LabContext, key: str) -> dict[str, Job]:
    """Start every ready engine without an answer to step `key` (cached or being generated); the jobs of
    all of them, those another Generate started included, by engine name."""
    step = ctx.replay.by_key[key]
    inflight = inflight_of(ctx)
    jobs = {}
    for e in ctx.engine_entries():  # the engines and their states as they are now, when Generate is pressed
        if e.state == "ready" and e.engine is not None and (e.name, key) not in ctx.views:
            jobs[e.name] = inflight.start(e.name, key, e.engine, lambda e=e: answer_step(ctx, e, step))
    return jobs


def step_columns(ctx: LabContext, step: Step, answered: dict[str, EngineView] | None = None) -> list[EngineView]:
    """The columns of `step` for the engines of this moment, each from what it is now: its answer (cached, or
    `answered` by jobs this stream awaited: an error too), an answer being generated, or its state (an
    engine that finished loading meanwhile says so, one added meanwhile shows, one removed is gone)."""
    answered = answered or {}
    return [answered.get(e.name) or engine_view(ctx, e, step) for e in ctx.engine_entries()]


def await_jobs(ctx: LabContext, step: Step, jobs: dict[str, Job]) -> Iterator[list[EngineView]]:
    """The columns of `step` as each of `jobs` answers, and every LIVE_EVERY_S meanwhile (seconds and tokens
    so far of the waiting ones, the states of the others)."""
    done: queue.Queue = queue.Queue()
    for job in jobs.values():
        job.when_done(done.put)
    answered: dict[str, EngineView] = {}
    while len(answered) < len(jobs):
        try:
            job = done.get(timeout=LIVE_EVERY_S)
        except queue.Empty:
            yield step_columns(ctx, step, answered)
            continue
        if job.view is not None:
            answered[job.name] = job.view
        else:  # the job ended without a column (it raised past answer_step's own handling)
            answered[job.name] = engine_view_state(job.name, job.name, "error", "the generation ended without an answer")
        yield step_columns(ctx, step, answered)


def generate_views(ctx: LabContext, key: str) -> Iterator[list[EngineView]]:
    """Run every ready engine without an answer concurrently (an answer another Generate is generating is
    awaited, not started again); yield the columns as each answers. Each yield has the engines of that
    moment, each shown as it is then (lab.ui.compare.answers.step_columns)."""
    step = ctx.replay.by_key[key]
    jobs = start_answers(ctx, key)
    yield step_columns(ctx, step)
    answered: dict[str, EngineView] = {}
    for views in await_jobs(ctx, step, jobs):
        answered = {v.name: v for v in views if v.name in jobs}
        yield views
    # Then, with every answer shown and no generation left to slow down, each live model's reference
    # likelihood (one prefill each, one engine at a time): the columns gain it beside their F1.
    entries = {e.name: e for e in ctx.engine_entries()}
    for name in jobs:
        view, e = ctx.views.get((name, key)) or answered.get(name), entries.get(name)
        if e is None or view is None or view.state != READY or view.ref_nll is not None or not needs_reference_prefill(e):
            continue

        def with_nll(view: EngineView = view, e: EngineEntry = e) -> EngineView:
            shown = replace(view, ref_nll=reference_nll(ctx, e, step, view.prompt_text))
            if ctx.views.get((e.name, key)) is not None:
                ctx.views.put((e.name, key), shown)
            return shown

        # a job of its own: two Generates on this step run one prefill, the second awaits it
        job = inflight_of(ctx).start(name, f"reference NLL {key}", e.engine, with_nll)
        job.done.wait()
        answered[name] = job.view or view
        yield step_columns(ctx, step, answered)


def follow_views(ctx: LabContext, key: str) -> Iterator[list[EngineView]]:
    """What a page that did not start them sees of the answers being generated for step `key` (after a
    reload, the tab shown again, the step opened again): the columns until every one of them is in;
    nothing when none is running."""
    if ctx.replay is None or key not in ctx.replay.by_key:
        return
    jobs = {job.name: job for job in inflight_of(ctx).running_on(key)}
    if jobs:
        yield from await_jobs(ctx, ctx.replay.by_key[key], jobs)
