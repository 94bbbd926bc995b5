"""One step's data for Compare, built once per step switch: the step, each engine's column (cached,
instant or pending answer), the reference parsed once, the step view and the similarity heatmap.
The Compare tab and the views beside it (run picker, what-if, samples) receive it or use these helpers."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from lab.data.step import Step
from lab.engines.registry import engine_class
from lab.runs.pipeline import parse_reference, run_steps
from lab.scoring.action import ParsedAction
from lab.workspace import EngineEntry, LabContext
from lab.ui.compare.heatmap import heatmap_figure
from lab.ui.compare.inflight import Job, inflight_of
from lab.ui.compare.legacy_column import answer_legacy_step, is_legacy
from lab.ui.compare.reference_nll import reference_nll
from lab.ui.compare.step_view import (
    CRASHED,
    ERROR,
    FAILED,
    LOADING,
    PENDING,
    READY,
    RUNNING,
    EngineView,
    StepView,
    build_step_view,
    engine_view_from_result,
    engine_view_state,
)


def engine_view(ctx: LabContext, entry: EngineEntry, step: Step, compute_instant: bool = True) -> EngineView:
    """The column of one engine for one step: cached answer, instant answer, an answer being generated
    (whichever Generate, page or tab started it: its seconds and tokens so far), or its state."""
    cached = ctx.views.get((entry.name, step.key))
    if cached is not None:
        return cached
    if entry.state in (FAILED, CRASHED):
        return engine_view_state(entry.spec, entry.name, entry.state, entry.error, entry.kind)
    if entry.state == LOADING or entry.engine is None:
        return engine_view_state(entry.spec, entry.name, LOADING, None, entry.kind)
    job = inflight_of(ctx).running(entry.name, step.key)
    if job is not None:
        return running_view(entry, job)
    if entry.answers_from_data and compute_instant:
        return answer_step(ctx, entry, step)
    return engine_view_state(entry.spec, entry.name, PENDING, None, entry.kind)


def running_view(entry: EngineEntry, job: Job) -> EngineView:
    """The column of an answer being generated: "generating…" with its seconds and tokens so far."""
    live = job.engine.live_progress().snapshot()
    return replace(engine_view_state(entry.spec, entry.name, RUNNING, None, entry.kind), live=live)


def answer_step(ctx: LabContext, entry: EngineEntry, step: Step) -> EngineView:
    """Run one engine on one step through the pipeline and cache the column (errors included)."""
    if is_legacy(entry):  # a legacy run: its own step of the legacy replay, the legacy scorer
        return answer_legacy_step(ctx, entry, step)
    try:
        result = run_steps(entry.engine, [step], scorer=entry.engine.scorer)[0]
        view = engine_view_from_result(entry.spec, entry.name, result, entry.kind)
        if view.state == READY and entry.engine.stored_run:  # beside its F1: its model's score-reference figure
            view.ref_nll = reference_nll(ctx, entry, step, view.prompt_text)  # (a live model's: generate_views)
    except Exception as exc:  # noqa: BLE001 - an engine's failure is shown in its column
        view = engine_view_state(entry.spec, entry.name, ERROR, f"{type(exc).__name__}: {exc}", entry.kind)
        return view  # not cached: the user may retry
    ctx.views.put((entry.name, step.key), view)
    return view


def heat_choices(views: list[EngineView]) -> list[tuple[str, str]]:
    return [(v.name, v.name) for v in views if v.state == "ready"]


def pick_heat_engine(views: list[EngineView], wanted: str | None) -> EngineView | None:
    """The engine the heatmap shows: the wanted one if answered, else the first non-reference one."""
    ready = [v for v in views if v.state == "ready"]
    for v in ready:
        if v.name == wanted:
            return v
    non_ref = [v for v in ready if not engine_class(v.kind).answers_reference]
    return (non_ref or ready or [None])[0]


def heatmap_for(ctx: LabContext, step: Step, views: list[EngineView], wanted: str | None,
                ref: ParsedAction | None = None):
    """The heatmap figure (cached per engine and step) and the engine it shows; `ref` is the step's
    parsed reference when the caller has it already."""
    view = pick_heat_engine(views, wanted)
    if view is None:
        return None, None
    cache_key = ("heatmap", view.name, step.key)
    fig = ctx.views.get(cache_key)
    if fig is None:
        ref = ref if ref is not None else parse_reference(step)
        fig = heatmap_figure(view.pred_units, ref.command_units, view.name)
        ctx.views.put(cache_key, fig)
    return fig, view.name


@dataclass
class StepData:
    """Everything Compare knows about one step, computed once per step switch."""

    step: Step
    entries: list[EngineEntry]
    views: list[EngineView]  # one column per engine, in the engines' order
    ref: ParsedAction  # the reference, parsed once
    view: StepView  # context, F1 gap
    heat_figure: Any
    heat_engine: str | None


def step_data(ctx: LabContext, key: str | None, heat_engine: str | None = None) -> StepData:
    """The data of step `key` (the first step when `key` is unknown); stored and reference engines answer now."""
    step = ctx.replay.by_key.get(key) if ctx.replay and key else None
    if step is None:
        step = ctx.replay.by_key[ctx.step_keys()[0]]
    entries = ctx.engine_entries()
    views = [engine_view(ctx, e, step) for e in entries]
    ref = parse_reference(step)
    fig, heat_spec = heatmap_for(ctx, step, views, heat_engine, ref)
    return StepData(step, entries, views, ref, build_step_view(step, views, ref), fig, heat_spec)
