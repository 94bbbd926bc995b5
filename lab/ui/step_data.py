"""One step's engine columns: each engine's cached, instant or pending answer, and the similarity heatmap."""
from __future__ import annotations

from lab.data.step import Step
from lab.runs.pipeline import parse_reference, run_steps
from lab.ui.context import EngineEntry, LabContext
from lab.ui.heatmap import heatmap_figure
from lab.ui.legacy_column import answer_legacy_step, is_legacy
from lab.ui.step_view import (
    CRASHED,
    ERROR,
    FAILED,
    LOADING,
    PENDING,
    EngineView,
    engine_view_from_result,
    engine_view_state,
)


def engine_view(ctx: LabContext, entry: EngineEntry, step: Step, compute_instant: bool = True) -> EngineView:
    """The column of one engine for one step: cached answer, instant answer, or its state."""
    cached = ctx.views.get((entry.name, step.key))
    if cached is not None:
        return cached
    if entry.state in (FAILED, CRASHED):
        return engine_view_state(entry.spec, entry.name, entry.state, entry.error, entry.kind)
    if entry.state == LOADING or entry.engine is None:
        return engine_view_state(entry.spec, entry.name, LOADING, None, entry.kind)
    if entry.instant and compute_instant:
        return answer_step(ctx, entry, step)
    return engine_view_state(entry.spec, entry.name, PENDING, None, entry.kind)


def answer_step(ctx: LabContext, entry: EngineEntry, step: Step) -> EngineView:
    """Run one engine on one step through the pipeline and cache the column (errors included)."""
    if is_legacy(entry):  # a legacy run: its own step of the legacy replay, the legacy scorer
        return answer_legacy_step(ctx, entry, step)
    try:
        result = run_steps(entry.engine, [step], scorer=getattr(entry.engine, "scorer", "corrected"))[0]
        view = engine_view_from_result(entry.spec, entry.name, result, entry.kind)
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
    non_ref = [v for v in ready if v.kind != "reference"]
    return (non_ref or ready or [None])[0]


def heatmap_for(ctx: LabContext, step: Step, views: list[EngineView], wanted: str | None):
    """The heatmap figure (cached per engine and step) and the engine it shows."""
    view = pick_heat_engine(views, wanted)
    if view is None:
        return None, None
    cache_key = ("heatmap", view.name, step.key)
    fig = ctx.views.get(cache_key)
    if fig is None:
        fig = heatmap_figure(view.pred_units, parse_reference(step).command_units, view.name)
        ctx.views.put(cache_key, fig)
    return fig, view.name
